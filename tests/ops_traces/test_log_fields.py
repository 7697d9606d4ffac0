"""Structured logs: lines logged during a pass or a call say which saga, step, key and
attempt they are about, in JSON lines and in text lines."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    Orchestrator,
    SagaStatus,
    StepContext,
    Transient,
    parse_plan,
)
from pivotal.cli import _progress
from pivotal.moments import age
from pivotal.observability import logs
from pivotal.observability.logs import (
    JsonLines,
    LogFields,
    LogFormat,
    SagaFieldsFilter,
    TextLines,
    configure_logging,
    current_fields,
    saga_fields,
)
from pivotal.store import Store

STEP_LOG = logging.getLogger("tests.ops_traces.steps")


class Hold(BaseModel):
    n: int


@contextlib.contextmanager
def capture(logger: logging.Logger, fmt: logging.Formatter) -> Iterator[io.StringIO]:
    """Records of ``logger`` formatted by ``fmt``, with the saga fields, into a buffer."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(fmt)
    handler.addFilter(SagaFieldsFilter())
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield buffer
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    with capture(STEP_LOG, JsonLines()) as buffer:
        yield buffer


def parsed(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def catalogue_logging_in_steps(flaky: list[int]) -> Catalogue:
    """``hold`` logs on entering and leaving; both members of a parallel group are inside
    at once. ``flaky`` numbers fail once, transiently."""
    catalogue = Catalogue("logged")
    inside: set[int] = set()
    both = asyncio.Event()

    async def let_go(args: Hold, result: Any, ctx: StepContext) -> None:
        STEP_LOG.info("undo %d", args.n)

    @catalogue.compensable(undo=let_go)
    async def hold(args: Hold, ctx: StepContext) -> dict[str, int]:
        STEP_LOG.info("enter %d", args.n)
        if args.n in flaky:
            flaky.remove(args.n)
            raise Transient("try again")
        inside.add(args.n)
        if len(inside) >= 2:
            both.set()
        await asyncio.wait_for(both.wait(), 30)
        STEP_LOG.info("leave %d", args.n)
        return {"n": args.n}

    return catalogue


async def test_lines_inside_a_call_carry_the_saga_step_key_and_attempt(
    store: Store, clock: FakeClock, json_lines: io.StringIO
) -> None:
    orchestrator = Orchestrator(
        store, catalogue_logging_in_steps(flaky=[3]), clock=clock, telemetry=[LogFields()]
    )
    plan = parse_plan(
        {
            "catalogue": "logged",
            "steps": [
                {
                    "parallel": [
                        {"name": "hold", "args": {"n": 0}},
                        {"name": "hold", "args": {"n": 1}},
                    ]
                },
                {"name": "hold", "args": {"n": 3}},
            ],
        }
    )
    state = await orchestrator.execute(plan, saga_id="s-1")
    assert state.status is SagaStatus.COMPLETED
    STEP_LOG.info("after the pass")

    lines = parsed(json_lines)
    assert lines[-1]["message"] == "after the pass"
    assert not {"saga_id", "step", "key", "attempt"} & lines[-1].keys()
    by_message = {line["message"]: line for line in lines[:-1]}
    assert sorted(by_message) == ["enter 0", "enter 1", "enter 3", "leave 0", "leave 1", "leave 3"]
    # members of the parallel group run at once, each under its own fields
    for message, line in by_message.items():
        n = int(message.split()[1])
        index = {0: 0, 1: 1, 3: 2}[n]
        assert line["saga_id"] == "s-1"
        assert line["step"] == "hold"
        assert line["key"] == f"s-1:{index}"
        assert line["logger"] == STEP_LOG.name
    assert [line["attempt"] for line in lines if line["message"].endswith(" 3")] == [1, 2, 2]
    assert current_fields() == logs.SagaFields()


def catalogue_taking_time(clock: FakeClock, transient: list[int]) -> Catalogue:
    """``take`` lets ``args.n`` seconds pass on the fake clock; numbers in ``transient``
    fail once, transiently (the saga waits for its retry)."""
    catalogue = Catalogue("timed")

    async def give_back(args: Hold, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=give_back)
    async def take(args: Hold, ctx: StepContext) -> dict[str, int]:
        clock.advance(args.n)
        if args.n in transient:
            transient.remove(args.n)
            raise Transient("try again")
        return {"n": args.n}

    return catalogue


async def test_one_line_per_saga_that_comes_to_rest(store: Store, clock: FakeClock) -> None:
    """A saga that ends says so once: its id, outcome and time from submission on the
    ledger's clock (JSON lines carry them as keys)."""
    catalogue = catalogue_taking_time(clock, transient=[90])
    orchestrator = Orchestrator(store, catalogue, clock=clock, telemetry=[LogFields()])
    plan = parse_plan({"catalogue": "timed", "steps": [{"name": "take", "args": {"n": 90}}]})
    started = clock.now()
    with capture(logging.getLogger("pivotal.sagas"), JsonLines()) as buffer:
        done = await orchestrator.execute(plan, saga_id="s-rest")  # waits out its retry
        assert done.status is SagaStatus.COMPLETED
        await orchestrator.run("s-rest")  # a pass over a saga at rest adds no line
    (line,) = parsed(buffer)
    took = clock.now() - started
    assert took > 180  # twice 90 s, and the wait before the retry
    assert line["message"] == f"saga s-rest came to rest: completed after {age(took)}"
    assert (line["saga_id"], line["outcome"]) == ("s-rest", "completed")
    assert line["duration_seconds"] == pytest.approx(took, abs=0.01)


def test_saga_fields_apply_inside_and_are_restored_after() -> None:
    assert current_fields().saga_id is None
    with saga_fields("s-1"):
        assert current_fields() == logs.SagaFields(saga_id="s-1")
        with saga_fields("s-2", step="charge", key="s-2:1"):
            assert current_fields() == logs.SagaFields("s-2", "charge", "s-2:1")
        assert current_fields() == logs.SagaFields(saga_id="s-1")
    assert current_fields() == logs.SagaFields()


def test_json_lines_keep_their_fields_and_add_the_saga_fields() -> None:
    log = logging.getLogger("tests.ops_traces.json")
    with capture(log, JsonLines()) as buffer:
        log.info("plain %s", "line", extra={"fields": {"event": "worker_started", "n": 2}})
        with saga_fields("s-9", step="ship", key="s-9:2"):
            log.warning("about a saga")
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("failed")
        log.info("named by extra", extra={"saga_id": "s-7"})
    plain, about, failed, named = parsed(buffer)
    assert plain.keys() == {"ts", "level", "logger", "message", "event", "n"}
    assert (plain["level"], plain["message"], plain["event"]) == (
        "info",
        "plain line",
        "worker_started",
    )
    assert plain["ts"].endswith("+00:00")
    assert about == about | {"level": "warning", "saga_id": "s-9", "step": "ship", "key": "s-9:2"}
    assert "attempt" not in about
    assert failed["saga_id"] == "s-9"
    assert "ValueError: boom" in failed["exception"]
    assert named["saga_id"] == "s-7"  # a field given with extra is not overwritten


def test_json_lines_write_only_their_keys_in_order_and_redact_the_message() -> None:
    """Any other attribute a caller puts on a record stays out: nothing redacted it."""
    log = logging.getLogger("tests.ops_traces.json_only")
    with capture(log, JsonLines()) as buffer, saga_fields("s-3"):
        log.info(
            "connecting with password=hunter2",
            extra={"fields": {"event": "e", "n": 1}, "api_key": "hunter3"},
        )
    [line] = parsed(buffer)
    assert list(line) == ["ts", "level", "logger", "message", "saga_id", "event", "n"]
    assert "hunter2" not in buffer.getvalue()
    assert "hunter3" not in buffer.getvalue()


def test_text_lines_append_the_saga_fields_when_set() -> None:
    log = logging.getLogger("tests.ops_traces.text")
    with capture(log, TextLines()) as buffer:
        log.info("no saga here")
        with saga_fields("s-1", step="charge_payment", key="s-1:1"):
            log.info("charging")
        with saga_fields("odd id"):
            log.info("quoted")
    plain, about, odd = buffer.getvalue().splitlines()
    assert plain.endswith(" tests.ops_traces.text no saga here")
    assert about.endswith(" tests.ops_traces.text charging saga=s-1 step=charge_payment key=s-1:1")
    assert odd.endswith(' quoted saga="odd id"')


def test_configure_logging_installs_and_removes_its_handler() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buffer = io.StringIO()
    with configure_logging(LogFormat.JSON, stream=buffer, level=logging.DEBUG) as handler:
        assert handler in root.handlers
        assert root.level == logging.DEBUG
        with saga_fields("s-3"):
            logging.getLogger("anything.at.all").debug("deep")
    assert root.handlers == handlers
    assert root.level == level
    [line] = parsed(buffer)
    assert (line["logger"], line["message"], line["saga_id"]) == ("anything.at.all", "deep", "s-3")


def test_the_worker_logging_names_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _progress.LogFormat is LogFormat
    assert _progress.JsonLines is JsonLines
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with _progress.worker_logging(_progress.LogFormat.JSON), saga_fields("s-4"):
        logging.getLogger("pivotal.cli.worker").info("hello")
    assert parsed(err) == [parsed(err)[0] | {"message": "hello", "saga_id": "s-4"}]
