"""A failed call's event carries its trace (the user's frames, redacted, bounded); an event
of a call that succeeded carries none; a worker logs each failed attempt."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    EventType,
    Orchestrator,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    Transient,
    parse_plan,
)
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.store import Store
from pivotal.tracebacks import last_frame

SECRET_URL = "https://ops:hunter2@payments.example/v1/charge?token=tok-123"
FAILURES = (
    EventType.STEP_RETRY_SCHEDULED,
    EventType.STEP_FAILED,
    EventType.STEP_UNKNOWN,
    EventType.UNDO_RETRY_SCHEDULED,
    EventType.UNDO_DEAD_LETTERED,
)


class Item(BaseModel):
    n: int = 0


def post(url: str) -> None:
    """The user's HTTP helper: the frame a trace should end in."""
    raise ConnectionError(f"cannot reach {url}")


def shop(tries: dict[str, int]) -> Catalogue:
    catalogue = Catalogue("traced", doubt_grace=0.0)
    fast = RetryPolicy(max_attempts=3, base_delay=0.5, multiplier=2.0, jitter=False)

    async def release(args: Item, result: Any, ctx: StepContext) -> None:
        tries["release"] = tries.get("release", 0) + 1
        post(SECRET_URL)

    async def fine_undo(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=fine_undo, retry=fast)
    async def flaky(args: Item, ctx: StepContext) -> dict[str, Any]:
        tries["flaky"] = tries.get("flaky", 0) + 1
        if tries["flaky"] < 3:
            raise Transient(f"busy, try {tries['flaky']}")
        return {"held": ctx.key, "n": 1}

    @catalogue.compensable(undo=release, retry=fast, undo_retry=fast)
    async def hold(args: Item, ctx: StepContext) -> dict[str, str]:
        return {"id": ctx.key}

    @catalogue.compensable(undo=fine_undo, retry=RetryPolicy(max_attempts=1))
    async def refuse(args: Item, ctx: StepContext) -> None:
        def check_card() -> None:
            raise Permanent("card declined: password=s3cr3t")

        check_card()

    @catalogue.compensable(undo=fine_undo, retry=RetryPolicy(max_attempts=1))
    async def vague(args: Item, ctx: StepContext) -> None:
        raise RuntimeError("the provider said nothing useful")

    return catalogue


def plan(*steps: str) -> Any:
    return parse_plan({"catalogue": "traced", "steps": [{"name": s} for s in steps]})


def frames(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in trace if "file" in e]


async def test_a_retried_step_keeps_a_trace_on_each_retry_and_none_on_its_success(
    make_orchestrator: Callable[[Catalogue], Orchestrator], store: Store
) -> None:
    orch = make_orchestrator(shop({}))

    state = await orch.execute(plan("flaky", "refuse"), saga_id="t1")

    assert state.status is SagaStatus.COMPENSATED
    events = await store.events("t1")
    retries = [e for e in events if e.type is EventType.STEP_RETRY_SCHEDULED]
    assert [e.attempt for e in retries] == [1, 2]
    for e in retries:
        trace = e.data["trace"]
        assert trace[-1] == {
            "exception": "pivotal.errors.Transient",
            "message": f"busy, try {e.attempt}",
        }
        assert [f["function"] for f in frames(trace)] == ["flaky"]  # no engine frame
        assert frames(trace)[0]["file"] == "test_failure_traces.py"
        assert "raise Transient" in frames(trace)[0]["source"]
    [failed] = [e for e in events if e.type is EventType.STEP_FAILED]
    assert [f["function"] for f in frames(failed.data["trace"])] == ["refuse", "check_card"]
    assert failed.data["trace"][-1]["message"] == "card declined: password=***"
    for e in events:  # only the failures carry one
        assert ("trace" in e.data) is (e.type in FAILURES), e
    json.dumps([e.data for e in events])


async def test_a_succeeding_saga_records_no_trace_and_builds_none(
    make_orchestrator: Callable[[Catalogue], Orchestrator],
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[BaseException] = []
    for calling in ("pivotal.engine.forward", "pivotal.engine.backward"):  # an action, an undo
        monkeypatch.setattr(f"{calling}.from_exception", built.append)
    orch = make_orchestrator(shop({"flaky": 2}))  # flaky succeeds at once

    state = await orch.execute(plan("flaky", "hold"), saga_id="ok")

    assert state.status is SagaStatus.COMPLETED
    assert not any("trace" in e.data for e in await store.events("ok"))
    assert built == []  # the success path never looks at a traceback


async def test_a_failing_undo_keeps_its_trace_until_it_is_dead_lettered(
    make_orchestrator: Callable[[Catalogue], Orchestrator], store: Store
) -> None:
    tries: dict[str, int] = {}
    orch = make_orchestrator(shop(tries))

    state = await orch.execute(plan("hold", "refuse"), saga_id="t2")

    assert state.status is SagaStatus.COMPENSATION_FAILED
    assert tries["release"] == 3
    events = await store.events("t2")
    undos = [
        e
        for e in events
        if e.type in (EventType.UNDO_RETRY_SCHEDULED, EventType.UNDO_DEAD_LETTERED)
    ]
    assert [e.type for e in undos] == [EventType.UNDO_RETRY_SCHEDULED] * 2 + [
        EventType.UNDO_DEAD_LETTERED
    ]
    for e in undos:
        trace = e.data["trace"]
        assert [f["function"] for f in frames(trace)] == ["release", "post"]
        assert last_frame(trace) == f"test_failure_traces.py:{frames(trace)[-1]['line']} in post"
        text = json.dumps(trace)
        assert "hunter2" not in text
        assert "tok-123" not in text
        assert "https://ops:***@payments.example/v1/charge?token=***" in text
    # the error itself is kept as the step raised it (each surface redacts it when shown)
    assert "cannot reach" in undos[-1].data["error"]


async def test_an_unknown_outcome_and_its_settling_call_keep_their_traces(
    make_orchestrator: Callable[[Catalogue], Orchestrator], store: Store
) -> None:
    orch = make_orchestrator(shop({}))

    await orch.execute(plan("vague"), saga_id="t3")

    unknown = [e for e in (await store.events("t3")) if e.type is EventType.STEP_UNKNOWN]
    assert unknown
    for e in unknown:  # the attempt's, and the repeat that settles it forward (if any)
        assert e.data["trace"][-1]["exception"] == "RuntimeError"
        assert frames(e.data["trace"])[-1]["function"] == "vague"


async def test_a_worker_logs_each_failed_attempt_with_its_last_frame(
    make_orchestrator: Callable[[Catalogue], Orchestrator],
    store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:
    orch = make_orchestrator(shop({}))
    await orch.submit(plan("flaky", "refuse"), saga_id="w1")
    caplog.set_level(logging.INFO, logger="pivotal.worker")

    await Worker(orch, WorkerConfig(poll_interval=0.01)).run(until_idle=True)

    said = [r for r in caplog.records if getattr(r, "fields", {}).get("event") in FAILURES]
    assert [(r.step, r.attempt, r.fields["event"]) for r in said] == [  # type: ignore[attr-defined]
        ("flaky", 1, "step_retry_scheduled"),
        ("flaky", 2, "step_retry_scheduled"),
        ("refuse", 1, "step_failed"),
    ]
    first = said[0].getMessage()
    assert "saga w1: flaky attempt 1 failed; next attempt at " in first
    assert "UTC (in 0.5s): Transient: busy, try 1 (at test_failure_traces.py:" in first
    assert first.endswith(" in flaky)")
    assert "password=***" in said[2].getMessage()
    assert "s3cr3t" not in said[2].getMessage()
    assert said[2].fields["frame"].endswith(" in check_card")  # type: ignore[attr-defined]
    assert said[2].fields["error"] == "Permanent: card declined: password=***"  # type: ignore[attr-defined]
    assert len(said) == 3  # and nothing for the attempt that succeeded
