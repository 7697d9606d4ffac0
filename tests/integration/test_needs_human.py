"""needs_human is not a dead end: a person resumes a saga (same keys) or resolves it, and
what an undo reports is kept on its event."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from pivotal import (
    EventType,
    InvalidInput,
    Orchestrator,
    Plan,
    SagaNotParked,
    SagaState,
    SagaStatus,
    StepStatus,
)
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.hooks import Point

PlanBuilder = Callable[..., Plan]
Checker = Callable[[str], Awaitable[SagaState]]


async def parked_after_the_pivot(
    orchestrator: Orchestrator, services: CommerceServices, plan: PlanBuilder
) -> None:
    services.faults.always("ship", Fault.PERMANENT)
    state = await orchestrator.execute(plan(), saga_id="s")
    assert state.status is SagaStatus.NEEDS_HUMAN
    assert state.steps[3].status is StepStatus.FAILED


async def test_resume_runs_forward_with_the_same_keys(
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
    check: Checker,
) -> None:
    await parked_after_the_pivot(orchestrator, services, fulfilment_plan)
    services.faults.clear()  # the person fixed the carrier's account

    state = await orchestrator.resume("s", "ops-lead", "carrier account unblocked", run=True)

    assert state.status is SagaStatus.COMPLETED
    assert [r["key"] for r in services.rows("shipments")] == ["s:3"]
    events = await orchestrator.store.events("s")
    [resumed] = [e for e in events if e.type is EventType.SAGA_RESUMED]
    assert resumed.data["by"] == "ops-lead"
    assert resumed.data["why"] == "carrier account unblocked"
    assert resumed.data["steps"] == [3]
    assert not [e for e in events if e.type is EventType.UNDO_STARTED]  # never compensated
    await check("s")


async def test_resume_without_run_leaves_the_saga_to_a_worker(
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
    check: Checker,
) -> None:
    await parked_after_the_pivot(orchestrator, services, fulfilment_plan)
    services.faults.clear()
    state = await orchestrator.resume("s", "ops-lead", "fixed")
    assert state.status is SagaStatus.RUNNING
    assert state.wake_at is not None
    assert state.wake_at <= orchestrator.clock.now()  # runnable now
    assert (await orchestrator.run("s")).status is SagaStatus.COMPLETED
    await check("s")


async def test_resolve_ends_the_saga_with_who_and_why(
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
    check: Checker,
) -> None:
    await parked_after_the_pivot(orchestrator, services, fulfilment_plan)
    state = await orchestrator.resolve("s", "ops-lead", "shipped by hand with another carrier")
    assert state.status is SagaStatus.RESOLVED
    assert state.status.terminal
    assert state.reason == "resolved by ops-lead: shipped by hand with another carrier"
    with pytest.raises(SagaNotParked):
        await orchestrator.resume("s", "ops-lead", "again")
    with pytest.raises(SagaNotParked):
        await orchestrator.resolve("s", "ops-lead", "again")
    await check("s")


async def test_a_decision_on_a_parked_saga_needs_who_and_why(
    orchestrator: Orchestrator, services: CommerceServices, fulfilment_plan: PlanBuilder
) -> None:
    await parked_after_the_pivot(orchestrator, services, fulfilment_plan)
    with pytest.raises(InvalidInput):
        await orchestrator.resume("s", " ", "fixed")
    with pytest.raises(InvalidInput):
        await orchestrator.resolve("s", "ops", "")
    assert (await orchestrator.get("s")).state.status is SagaStatus.NEEDS_HUMAN


async def test_a_poison_saga_resumes_where_it_stopped(
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    check: Checker,
) -> None:
    services.stock("sku-1", "A", 5)
    broken = {"on": True}

    def hook(point: Point, index: int) -> None:
        if broken["on"] and point is Point.BEFORE_INTENT and index == 1:
            raise RuntimeError("a bug in this release")

    orchestrator.hook = hook
    await orchestrator.submit(checkout_plan(), saga_id="p")
    failed = 0
    while True:
        try:
            state = await orchestrator.run("p")
            break
        except RuntimeError:
            failed += 1
            assert failed <= orchestrator.poison_after + 1
    assert failed == orchestrator.poison_after + 1  # the first pass made progress (step 0)
    assert state.status is SagaStatus.NEEDS_HUMAN
    assert state.reason is not None
    assert state.reason.startswith("poison")

    broken["on"] = False  # the fix is deployed
    state = await orchestrator.resume("p", "dev", "hotfix deployed", run=True)
    assert state.status is SagaStatus.COMPLETED
    await check("p")


async def test_an_undo_note_is_kept_on_its_event(
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    services.stock("sku-1", "A", 5)
    services.faults.always("ship", Fault.PERMANENT)
    state = await orchestrator.execute(checkout_plan(), saga_id="n")
    assert state.status is SagaStatus.COMPENSATED
    notes = [
        e.data.get("note")
        for e in await orchestrator.store.events("n")
        if e.type is EventType.UNDO_SUCCEEDED
    ]
    assert notes
    assert all(notes), notes
