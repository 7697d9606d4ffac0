"""Approval at the point of no return: pause, approve, reject, expire, stale preconditions."""

from __future__ import annotations

import pytest

from pivotal import (
    ApprovalError,
    ApprovalStatus,
    EventType,
    InvalidInput,
    SagaStatus,
    StepStatus,
    UndoStatus,
)
from pivotal.declarations.policy import DAY

RATIONALE = "customer asked for express delivery of the lamp"


@pytest.fixture
async def paused(orchestrator, fulfilment_plan):
    """Order 4471 for 180 (standard tier, threshold 150): paused before the capture."""
    plan = fulfilment_plan("4471", amount="180.00", rationale=RATIONALE)
    state = await orchestrator.execute(plan, saga_id="big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state


async def test_large_amount_pauses_with_the_rationale(
    paused, orchestrator, store, services, clock, check
) -> None:
    approval = paused.approval
    assert approval is not None
    assert approval.step == 2
    assert approval.status is ApprovalStatus.PENDING
    assert approval.rationale == RATIONALE
    assert approval.reason.startswith("capture_payment amount=180")
    assert "exceeds the approval threshold 150 for tier 'standard'" in approval.reason
    assert approval.requested_at == clock.now()
    assert approval.expires_at == approval.requested_at + DAY
    assert [r.status for r in paused.steps] == [
        StepStatus.SUCCEEDED,
        StepStatus.SUCCEEDED,
        StepStatus.PENDING,
        StepStatus.PENDING,
        StepStatus.PENDING,
    ]
    stored = await orchestrator.get("big")
    assert stored.state == paused
    [pending] = await store.pending_approvals()
    assert (pending.saga_id, pending.step_name) == ("big", "capture_payment")
    assert (pending.amount, pending.currency, pending.stake) == (180, "EUR", "EUR 180.00")
    assert pending.approval == approval
    events = await store.events("big")
    assert events[-1].type is EventType.APPROVAL_REQUESTED
    assert events[-1].data["rationale"] == RATIONALE

    # running again without a decision keeps waiting and calls nothing
    assert (await orchestrator.run("big")).status is SagaStatus.AWAITING_APPROVAL
    assert services.calls("capture") == []
    assert [p["status"] for p in services.rows("payments")] == ["authorized"]
    assert [r["status"] for r in services.rows("reservations")] == ["active"]
    assert services.order_status("4471") == "open"
    await check("big")


async def test_approve_completes(paused, orchestrator, store, services, check) -> None:
    state = await orchestrator.approve("big", "maria", "known customer")

    assert state.status is SagaStatus.COMPLETED
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.APPROVED
    assert (state.approval.approver, state.approval.note) == ("maria", "known customer")
    assert all(r.status is StepStatus.SUCCEEDED for r in state.steps)
    assert await store.pending_approvals() == []
    [capture] = services.calls("capture")
    assert capture["key"] == "big:2"
    assert sorted((p["kind"], p["status"], p["key"]) for p in services.rows("payments")) == [
        ("authorization", "captured", "big:1"),
        ("capture", "captured", "big:2"),
    ]
    assert services.order_status("4471") == "paid"
    assert len(services.rows("shipments")) == 1
    assert len(services.rows("emails")) == 1
    assert services.calls("void") == services.calls("release") == []
    await check("big")


async def test_approval_recorded_now_runs_later(paused, orchestrator, services, check) -> None:
    state = await orchestrator.approve("big", "maria", run=False)

    assert state.status is SagaStatus.RUNNING
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.APPROVED
    assert (await orchestrator.get("big")).state == state
    assert services.calls("capture") == []

    final = await orchestrator.run("big")

    assert final.status is SagaStatus.COMPLETED
    assert len(services.calls("capture")) == 1
    assert sorted((p["kind"], p["status"], p["key"]) for p in services.rows("payments")) == [
        ("authorization", "captured", "big:1"),
        ("capture", "captured", "big:2"),
    ]
    await check("big")


async def test_reject_compensates_void_then_release(
    paused, orchestrator, store, services, check
) -> None:
    state = await orchestrator.reject("big", "maria", "too large")

    assert state.status is SagaStatus.COMPENSATED
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.REJECTED
    assert "rejected by maria: too large" in (state.reason or "")
    assert [r.undo_status for r in state.steps[:2]] == [UndoStatus.DONE, UndoStatus.DONE]
    events = await store.events("big")
    assert [e.step for e in events if e.type is EventType.UNDO_STARTED] == [1, 0]
    [void] = services.calls("void")
    [release] = services.calls("release")
    assert void["id"] < release["id"]
    assert services.calls("capture") == []
    assert [p["status"] for p in services.rows("payments")] == ["voided"]
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    assert services.available("sku-1", "A") == 50
    await check("big")


async def test_approval_after_expiry_compensates(
    paused, orchestrator, store, services, clock, check
) -> None:
    assert paused.approval is not None
    clock.advance(paused.approval.expires_at - clock.now() + 1)

    state = await orchestrator.approve("big", "maria")

    assert state.status is SagaStatus.COMPENSATED
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.EXPIRED
    assert "expired" in (state.reason or "")
    events = await store.events("big")
    assert EventType.APPROVAL_EXPIRED in [e.type for e in events]
    assert EventType.APPROVAL_GRANTED not in [e.type for e in events]
    assert services.calls("capture") == []
    assert [p["status"] for p in services.rows("payments")] == ["voided"]
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    await check("big")


async def test_stale_precondition_at_approval_compensates_without_capture(
    paused, orchestrator, store, services, check
) -> None:
    services.set_order_status("4471", "cancelled")

    state = await orchestrator.approve("big", "maria")

    assert state.status is SagaStatus.COMPENSATED
    capture = state.steps[2]
    assert capture.status is StepStatus.FAILED
    assert "precondition no longer holds: order 4471 is cancelled" in (capture.error or "")
    [failed] = [e for e in await store.events("big") if e.type is EventType.STEP_FAILED]
    assert failed.data["outcome"] == "precondition"
    assert services.calls("capture") == []
    assert [p["status"] for p in services.rows("payments")] == ["voided"]
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    await check("big")


async def test_decisions_need_a_pending_approval_and_a_name(
    paused, orchestrator, services, check
) -> None:
    with pytest.raises(InvalidInput):
        await orchestrator.approve("big", "  ")
    await orchestrator.reject("big", "maria")
    with pytest.raises(ApprovalError):
        await orchestrator.approve("big", "maria")
    assert (await orchestrator.get("big")).state.status is SagaStatus.COMPENSATED
    assert services.calls("capture") == []
    await check("big")


async def test_gold_tier_has_a_higher_threshold(
    orchestrator, store, services, fulfilment_plan, check
) -> None:
    services.order("g1", "c", "gold")

    state = await orchestrator.execute(fulfilment_plan("g1", amount="180.00"), saga_id="gold")

    assert state.status is SagaStatus.COMPLETED
    assert state.approval is None
    events = await store.events("gold")
    assert EventType.APPROVAL_REQUESTED not in [e.type for e in events]
    assert await store.pending_approvals() == []
    assert len(services.calls("capture")) == 1
    assert sorted((p["kind"], p["status"], p["key"]) for p in services.rows("payments")) == [
        ("authorization", "captured", "gold:1"),
        ("capture", "captured", "gold:2"),
    ]
    assert services.order_status("g1") == "paid"
    await check("gold")


async def test_approving_while_a_worker_holds_the_saga_leaves_it_to_the_worker(
    paused, orchestrator, store, clock, services, check
) -> None:
    """The approval is recorded; the worker that claimed the saga (notified) runs it."""
    epoch = await store.claim("big", "worker-elsewhere", 30, clock.now())
    assert epoch is not None

    state = await orchestrator.approve("big", "alice", "ok")  # no error: recorded, not run

    assert state.status is SagaStatus.RUNNING
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.APPROVED
    assert services.calls("capture") == []  # nothing ran here
    await store.release("big", epoch)
    assert (await orchestrator.run("big")).status is SagaStatus.COMPLETED
    await check("big")
