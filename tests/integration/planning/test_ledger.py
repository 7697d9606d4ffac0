"""Planning records in the store, on every backend: what a write keeps, in one transaction,
and what closing an escalation allows."""

from __future__ import annotations

import asyncio

import pytest

from pivotal import FakeClock, StoreError
from pivotal.planning import (
    EscalationClosed,
    EscalationNotFound,
    EscalationStatus,
    PlanningMode,
    PlanningOutcome,
    PlanningRun,
    PlanRequest,
    ScriptedPlanner,
    propose_plan,
)
from pivotal.store import Store

REQUEST = PlanRequest(text="ship it", context={"order_id": "4471"}, catalogue="fulfilment")
CREDIT = {"steps": [{"name": "apply_goodwill_credit", "args": {"order_id": "4471"}}]}


async def rejected(app, clock: FakeClock, run_id: str) -> PlanningRun:
    """A live run whose every attempt failed (three of them, the last two repeats)."""
    planner, catalogue = ScriptedPlanner([CREDIT] * 3), app.catalogue("fulfilment")
    run = await propose_plan(REQUEST, planner, catalogue, run_id=run_id, clock=clock)
    return run.model_copy(update={"mode": PlanningMode.LIVE, "outcome": PlanningOutcome.ESCALATED})


async def test_an_escalation_keeps_its_run_and_every_attempt(ledger: Store, app, clock) -> None:
    run = await rejected(app, clock, "run-1")
    opened = await ledger.escalate(run, "nothing fits", clock.now())

    assert opened.run == run.model_copy(update={"escalation_id": opened.id})
    assert await ledger.escalation(opened.id) == opened
    assert await ledger.escalations() == [opened]
    assert await ledger.runs(PlanningMode.LIVE) == [opened.run]
    assert [a.repeat_of for a in opened.run.attempts] == [None, 1, 1]
    assert await ledger.escalation(opened.id + 1) is None


async def test_a_run_and_its_escalation_are_one_transaction(ledger: Store, app, clock) -> None:
    run = await rejected(app, clock, "run-1")
    await ledger.record_run(run)
    with pytest.raises(StoreError):
        await ledger.escalate(run, "again", clock.now())  # the run is kept already
    assert await ledger.escalations(None) == []
    assert await ledger.runs(PlanningMode.LIVE) == [run]


async def test_recording_the_same_run_again_changes_nothing(ledger: Store, app, clock) -> None:
    """What a retry meets when its first try landed before the link dropped."""
    run = await rejected(app, clock, "run-1")
    await ledger.record_run(run)
    await ledger.record_run(run)
    assert await ledger.runs(PlanningMode.LIVE) == [run]

    other = await rejected(app, clock, "run-2")
    opened = await ledger.escalate(other, "nothing fits", clock.now())
    assert await ledger.escalate(other, "nothing fits", clock.now()) == opened
    assert await ledger.escalations() == [opened]


async def test_another_run_under_a_taken_id_is_refused(ledger: Store, app, clock) -> None:
    run = await rejected(app, clock, "run-1")
    await ledger.record_run(run)
    clock.advance(5)
    later = await rejected(app, clock, "run-1")
    with pytest.raises(StoreError):
        await ledger.record_run(later)
    with pytest.raises(StoreError):
        await ledger.escalate(later, "nothing fits", clock.now())
    assert await ledger.runs(PlanningMode.LIVE) == [run]
    assert await ledger.escalations(None) == []


async def test_escalations_are_listed_newest_first(ledger: Store, app, clock) -> None:
    first = await ledger.escalate(await rejected(app, clock, "run-1"), "one", clock.now())
    second = await ledger.escalate(await rejected(app, clock, "run-2"), "two", clock.now())
    clock.advance(1)
    third = await ledger.escalate(await rejected(app, clock, "run-3"), "three", clock.now())

    assert [e.id for e in await ledger.escalations()] == [third.id, second.id, first.id]
    assert [e.id for e in await ledger.escalations(limit=2)] == [third.id, second.id]
    await ledger.close_escalation(second.id, "ana", "done", clock.now())
    assert [e.id for e in await ledger.escalations()] == [third.id, first.id]
    resolved = await ledger.escalations(EscalationStatus.RESOLVED)
    assert [e.id for e in resolved] == [second.id]
    assert [r.run_id for r in await ledger.runs(PlanningMode.LIVE)] == ["run-1", "run-2", "run-3"]


async def test_resolving_closes_once(ledger: Store, app, clock) -> None:
    opened = await ledger.escalate(await rejected(app, clock, "run-1"), "why", clock.now())
    clock.advance(3)

    closed = await ledger.close_escalation(
        opened.id, "ana", "called back", clock.now(), saga_id="s-1"
    )

    assert closed == opened.model_copy(
        update={
            "status": EscalationStatus.RESOLVED,
            "resolved_at": clock.now(),
            "resolved_by": "ana",
            "resolution": "called back",
            "saga_id": "s-1",
        }
    )
    with pytest.raises(EscalationClosed, match="already resolved"):
        await ledger.close_escalation(opened.id, "bob", "me too", clock.now())
    with pytest.raises(EscalationNotFound):
        await ledger.close_escalation(opened.id + 1, "bob", "nothing", clock.now())
    assert await ledger.escalation(opened.id) == closed


async def test_of_two_people_closing_at_once_one_wins(ledger: Store, app, clock) -> None:
    opened = await ledger.escalate(await rejected(app, clock, "run-1"), "why", clock.now())

    outcomes = await asyncio.gather(
        *(
            ledger.close_escalation(opened.id, who, "mine", clock.now())
            for who in ("ana", "bob", "eve")
        ),
        return_exceptions=True,
    )

    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1
    assert all(isinstance(e, EscalationClosed) for e in lost)
    assert (await ledger.escalation(opened.id)) == won[0]
