"""Why a saga failed, as the terminal shows it: retries of one step as one row with the
last error and when the next attempt is due, results as JSON, and (``--verbose``) every
event with each failed call's traceback."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from rich.console import Console
from typer.testing import CliRunner

from pivotal import (
    Catalogue,
    Event,
    EventType,
    FakeClock,
    Orchestrator,
    Permanent,
    RetryPolicy,
    SagaState,
    SQLiteStore,
    StepContext,
    Transient,
    parse_plan,
)
from pivotal.cli import cli
from pivotal.views import render


class Item(BaseModel):
    n: int = 0


def busy(tries: int) -> None:
    raise Transient(f"busy, try {tries}")


def catalogue() -> Catalogue:
    shop = Catalogue("shown", doubt_grace=0.0)
    tries = {"n": 0}
    slow = RetryPolicy(max_attempts=7, base_delay=2.0, multiplier=1.0, jitter=False)

    async def undo(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    @shop.compensable(undo=undo, retry=slow)
    async def reserve(args: Item, ctx: StepContext) -> dict[str, Any]:
        tries["n"] += 1
        if tries["n"] <= 6:
            busy(tries["n"])
        return {"reservation": "r-1", "items": [1, 2], "held": True}

    @shop.compensable(undo=undo, retry=RetryPolicy(max_attempts=1))
    async def charge(args: Item, ctx: StepContext) -> None:
        raise Permanent("card declined")

    return shop


@pytest.fixture
async def ran(tmp_path: Path) -> AsyncIterator[tuple[SagaState, list[Event]]]:
    clock = FakeClock(start=1_800_000_000.0)  # 2027-01-15 08:00:00 UTC
    async with SQLiteStore(tmp_path / "ledger.db") as store:
        orch = Orchestrator(store, catalogue(), clock=clock, rng=random.Random(0))
        plan = {"catalogue": "shown", "steps": [{"name": "reserve"}, {"name": "charge"}]}
        state = await orch.execute(parse_plan(plan), saga_id="s")
        yield state, await store.events("s")


def shown(renderable: Any) -> str:
    console = Console(width=100, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def flat(text: str) -> str:
    return " ".join(text.split())


def test_retries_of_one_step_are_one_row_with_the_last_error_and_the_next_attempt(
    ran: tuple[SagaState, list[Event]],
) -> None:
    state, events = ran
    text = shown(render.timeline(state, events))

    retries = [e for e in events if e.type is EventType.STEP_RETRY_SCHEDULED]
    assert len(retries) == 6  # the events are all kept: only the view groups them
    due = render.clock_time(retries[-1].data["next_attempt_at"])
    assert flat(text).count("step_retry_scheduled") == 1
    assert "step_retry_scheduled reserve 1-6 6 attempts, last: Transient: busy, try 6; " in flat(
        text
    )
    assert f"next attempt at {due} (in 2.0s)" in flat(text)
    assert flat(text).count("step_started") == 2  # the attempt that succeeded, and charge
    assert "Traceback" not in text
    assert "busy(tries" not in text


def test_a_result_is_shown_as_json_never_a_python_repr(
    ran: tuple[SagaState, list[Event]],
) -> None:
    state, events = ran
    timeline = flat(shown(render.timeline(state, events)))
    steps = flat(shown(render.steps_table(state, events)))

    assert '{"held": true, "items": [1, 2], "reservation": "r-1"}' in timeline
    assert "{'" not in timeline
    assert "True" not in timeline
    assert '{"held": true,' in steps
    assert "{'" not in steps


def test_verbose_shows_every_event_and_each_failed_calls_trace(
    ran: tuple[SagaState, list[Event]],
) -> None:
    state, events = ran
    text = shown(render.timeline(state, events, verbose=True))

    assert flat(text).count("step_retry_scheduled") == 6
    assert flat(text).count("step_started") == 8
    assert "test_render_failures.py:" in text
    assert " in busy" in text
    assert 'raise Transient(f"busy, try {tries}")' in text
    assert "pivotal.errors.Permanent: card declined" in text
    assert "engine.py" not in text  # the engine's frames are not the user's
    for n in range(1, 7):  # each retry row says when its next attempt was due
        assert f"busy, try {n}; next attempt at" in flat(text)


def test_the_saga_view_passes_verbose_on(ran: tuple[SagaState, list[Event]]) -> None:
    state, events = ran
    quiet = shown(render.saga_view(state, events, None, ""))
    loud = shown(render.saga_view(state, events, None, "", verbose=True))

    assert "in busy" not in quiet
    assert "in busy" in loud


def test_two_attempts_are_grouped_one_is_not() -> None:
    def ev(type: EventType, attempt: int, step: int = 0, seq: int = 0) -> Event:
        data = {"error": "x", "next_attempt_at": 12.0} if "retry" in type.value else {}
        return Event(type=type, at=10.0, step=step, attempt=attempt, data=data, seq=seq)

    s, r = EventType.STEP_STARTED, EventType.STEP_RETRY_SCHEDULED
    one = [ev(s, 1), ev(r, 1), ev(s, 2)]
    assert [row.attempts for row in render.timeline_rows(one)] == [(), (), ()]

    two = [ev(s, 1), ev(r, 1), ev(s, 2), ev(r, 2), ev(s, 3)]
    rows = render.timeline_rows(two)
    assert [len(row.attempts) for row in rows] == [4, 0]
    assert rows[0].tries == "1-2"
    assert rows[0].detail.startswith("2 attempts, last: x; next attempt at ")
    assert rows[0].detail.endswith("(in 2.0s)")

    other_step = [ev(s, 1), ev(r, 1), ev(s, 1, step=1), ev(r, 1, step=1)]
    assert all(not row.attempts for row in render.timeline_rows(other_step))

    undos = [ev(EventType.UNDO_STARTED, 1), ev(EventType.UNDO_RETRY_SCHEDULED, 1)] * 2
    undos[2:] = [ev(EventType.UNDO_STARTED, 2), ev(EventType.UNDO_RETRY_SCHEDULED, 2)]
    assert [len(row.attempts) for row in render.timeline_rows(undos)] == [4]


def test_as_json_keeps_text_and_survives_what_json_refuses() -> None:
    assert render.as_json({"a": 1}) == '{"a": 1}'
    assert render.as_json("plain text") == "plain text"
    assert render.as_json(None) == ""
    assert render.as_json({1: "a", "b": 2}) == "{1: 'a', 'b': 2}"  # unsortable keys: as is
    assert render.as_json({"bidi": "\u202e"}) == '{"bidi": "\\u202e"}'


def test_sagas_show_verbose_prints_the_traces_redacted_and_plain_show_does_not(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.db"

    async def prepare() -> None:
        async with SQLiteStore(ledger) as store:
            orch = Orchestrator(store, catalogue(), clock=FakeClock(), rng=random.Random(0))
            plan = {"catalogue": "shown", "steps": [{"name": "reserve"}, {"name": "charge"}]}
            await orch.execute(parse_plan(plan), saga_id="s")

    asyncio.run(prepare())
    runner = CliRunner()
    env = {"COLUMNS": "100"}

    plain = runner.invoke(cli, ["--db", str(ledger), "sagas", "show", "s"], env=env)
    verbose = runner.invoke(cli, ["--db", str(ledger), "sagas", "show", "s", "--verbose"], env=env)
    as_json = runner.invoke(cli, ["--db", str(ledger), "sagas", "show", "s", "--json"], env=env)

    assert plain.exit_code == verbose.exit_code == as_json.exit_code == 0, plain.output
    assert "6 attempts, last:" in flat(plain.output)
    assert " in busy" not in plain.output
    assert flat(verbose.output).count("step_retry_scheduled") == 6
    assert "test_render_failures.py:" in verbose.output
    assert " in busy" in verbose.output
    assert "pivotal.errors.Transient: busy, try 6" in verbose.output
    events = json.loads(as_json.output)["events"]
    assert [e["data"]["trace"][-1]["message"] for e in events if "trace" in e["data"]][:2] == [
        "busy, try 1",
        "busy, try 2",
    ]
