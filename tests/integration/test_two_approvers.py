"""Two distinct approvers above a second amount, on both ledgers: the first approval keeps
the saga waiting, the second lets a worker run it; the same approver twice is refused; a
reject after one approval compensates; the event log replays into the stored state."""

from __future__ import annotations

import pytest

from pivotal import ApprovalError, ApprovalStatus, EventType, SagaStatus, StepStatus
from pivotal.declarations.policy import ThresholdPolicy
from pivotal.operations.worker import Worker, WorkerConfig

FAST = WorkerConfig(poll_interval=0.01)


@pytest.fixture
async def paused(app, orchestrator, fulfilment_plan):
    """Order 4471 for 180: above 160 it needs two approvers before the capture."""
    catalogue = app.catalogue("fulfilment")
    catalogue.approval = ThresholdPolicy(
        threshold=150, two_approvers_above=160, steps=frozenset({"capture_payment"})
    )
    state = await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert (state.approval.required, state.approval.approved_by) == (2, ())
    return state


async def test_first_approval_keeps_it_pending_the_second_lets_a_worker_run_it(
    paused, orchestrator, store, services, check
) -> None:
    first = await orchestrator.approve("big", "maria", "fine by me", run=False)
    assert first.status is SagaStatus.AWAITING_APPROVAL
    assert first.approval is not None
    assert first.approval.status is ApprovalStatus.PENDING
    assert first.approval.approved_by == ("maria",)
    stored = await orchestrator.get("big")
    assert stored.state == first
    [pending] = await store.pending_approvals()
    assert pending.approval.approved_by == ("maria",)
    assert pending.approval.required == 2
    # a worker that picks it up keeps waiting and captures nothing
    await Worker(orchestrator, FAST).run(until_idle=True)
    assert (await orchestrator.get("big")).state.status is SagaStatus.AWAITING_APPROVAL
    assert services.calls("capture") == []

    second = await orchestrator.approve("big", "jon", "agreed", run=False)
    assert second.status is SagaStatus.RUNNING
    assert second.approval is not None
    assert second.approval.status is ApprovalStatus.APPROVED
    assert second.approval.approved_by == ("maria", "jon")
    assert second.approval.approver == "jon"
    assert await store.pending_approvals() == []
    await Worker(orchestrator, FAST).run(until_idle=True)
    done = await check("big")
    assert done.status is SagaStatus.COMPLETED
    assert all(r.status is StepStatus.SUCCEEDED for r in done.steps)
    assert len(services.calls("capture")) == 1
    grants = [e for e in await store.events("big") if e.type is EventType.APPROVAL_GRANTED]
    assert [e.data["approver"] for e in grants] == ["maria", "jon"]


async def test_the_same_approver_twice_is_refused(paused, orchestrator, services, check) -> None:
    first = await orchestrator.approve("big", "maria", run=False)
    with pytest.raises(ApprovalError, match="maria already approved saga big"):
        await orchestrator.approve("big", "maria", "again")
    stored = await orchestrator.get("big")
    assert stored.state == first
    assert stored.state.status is SagaStatus.AWAITING_APPROVAL
    assert services.calls("capture") == []
    await check("big")


async def test_a_reject_after_one_approval_compensates(
    paused, orchestrator, services, check
) -> None:
    await orchestrator.approve("big", "maria", run=False)
    state = await orchestrator.reject("big", "jon", "too much")
    assert state.status is SagaStatus.COMPENSATED
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.REJECTED
    assert state.approval.approver == "jon"
    assert state.approval.approved_by == ("maria",)
    assert services.calls("capture") == []
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    await check("big")


async def test_one_approver_is_enough_below_the_second_amount(
    app, orchestrator, fulfilment_plan, check
) -> None:
    app.catalogue("fulfilment").approval = ThresholdPolicy(
        threshold=150, two_approvers_above=500, steps=frozenset({"capture_payment"})
    )
    paused = await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="b")
    assert paused.approval is not None
    assert paused.approval.required == 1
    state = await orchestrator.approve("b", "maria")
    assert state.status is SagaStatus.COMPLETED
    assert state.approval is not None
    assert state.approval.approved_by == ("maria",)
    await check("b")
