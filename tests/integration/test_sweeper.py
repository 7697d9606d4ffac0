"""The sweeper: expired leases, overdue approvals and due dead letters; resolving by hand."""

from __future__ import annotations

from typing import Any

import pytest

from pivotal import ApprovalStatus, EventType, InvalidInput, SagaStatus
from pivotal.declarations.policy import DAY
from pivotal.examples.commerce import Fault
from pivotal.operations.worker import Sweeper, Worker, WorkerConfig


async def lease(store: Any, saga_id: str) -> tuple[str | None, int]:
    """(owner, epoch) of the saga's lease; owner None when it is free."""
    found = await store.lease_of(saga_id)
    assert found is not None
    return found[0], found[1]


async def test_sweep_frees_an_expired_lease_and_bumps_its_epoch(
    orchestrator, store, clock, checkout_plan, check
) -> None:
    await orchestrator.submit(checkout_plan("o-1"), saga_id="crashed")
    epoch = await store.claim("crashed", "dead-worker", 5, clock.now())
    sweeper = Sweeper(orchestrator)
    clock.advance(4)
    assert (await sweeper.sweep()).leases_recovered == []

    clock.advance(2)
    report = await sweeper.sweep()

    assert report.leases_recovered == ["crashed"]
    assert await lease(store, "crashed") == (None, epoch + 1)
    assert await store.heartbeat("dead-worker", {"crashed": epoch}, 5, clock.now()) == set()
    stats = await Worker(orchestrator, WorkerConfig(poll_interval=0.01)).run(until_idle=True)
    assert stats.finished == {"completed": 1}
    await check("crashed")


async def test_sweep_expires_an_overdue_approval_and_compensates(
    orchestrator, store, services, clock, fulfilment_plan, check
) -> None:
    state = await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    sweeper = Sweeper(orchestrator)
    assert (await sweeper.sweep()).approvals_expired == []

    clock.advance(DAY + 1)
    report = await sweeper.sweep()

    assert report.approvals_expired == ["big"]
    state = await check("big")
    assert state.status is SagaStatus.COMPENSATED
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.EXPIRED
    assert await store.pending_approvals() == []
    assert services.calls("capture") == []
    assert len(services.rows("effects", op="void")) == 1
    assert len(services.rows("effects", op="release")) == 1


async def parked(orchestrator, faults, checkout_plan, saga_id: str) -> Any:
    faults.next("charge", Fault.PERMANENT).always("release", Fault.PERMANENT)
    state = await orchestrator.execute(checkout_plan(saga_id), saga_id=saga_id)
    assert state.status is SagaStatus.COMPENSATION_FAILED
    [letter] = await orchestrator.store.dead_letters("open")
    assert letter.step_name == "reserve_stock"
    return letter


async def test_sweep_settles_a_due_dead_letter_once_the_undo_succeeds(
    orchestrator, store, services, faults, clock, checkout_plan, check
) -> None:
    letter = await parked(orchestrator, faults, checkout_plan, "dl")
    sweeper = Sweeper(orchestrator)
    assert letter.next_retry_at is not None
    assert letter.next_retry_at > clock.now()
    assert (await sweeper.sweep()).dead_letters_retried == 0  # not due yet
    faults.clear()
    clock.advance(letter.next_retry_at - clock.now() + 1)

    report = await sweeper.sweep()

    assert (report.dead_letters_retried, report.dead_letters_settled) == (1, 1)
    assert await store.dead_letters("open") == []
    [row] = await store.dead_letters(None)
    assert (row.status, row.resolution) == ("resolved", "the undo succeeded")
    state = await check("dl")
    assert state.status is SagaStatus.COMPENSATED
    assert len(services.rows("effects", op="release")) == 1
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    assert services.available("sku-1", "A") == 50


async def test_sweep_reparks_a_dead_letter_whose_retry_still_fails(
    orchestrator, store, services, faults, clock, checkout_plan, check
) -> None:
    letter = await parked(orchestrator, faults, checkout_plan, "dl")
    clock.advance(letter.next_retry_at - clock.now() + 1)

    report = await Sweeper(orchestrator).sweep()

    assert (report.dead_letters_retried, report.dead_letters_settled) == (1, 0)
    [row] = await store.dead_letters("open")
    assert (row.id, row.retries) == (letter.id, 1)
    assert row.next_retry_at is not None
    assert row.next_retry_at > letter.next_retry_at
    assert (await check("dl")).status is SagaStatus.COMPENSATION_FAILED
    assert len(services.calls("release")) == 2
    assert services.rows("effects", op="release") == []


async def test_resolving_a_dead_letter_records_who_and_why(
    orchestrator, store, faults, checkout_plan, check
) -> None:
    letter = await parked(orchestrator, faults, checkout_plan, "dl")
    before = await store.events("dl")
    for by, reason in (("alice", "  "), ("", "done by hand")):
        with pytest.raises(InvalidInput):
            await orchestrator.resolve_dead_letter(letter.id, by, reason)
    assert await store.events("dl") == before

    await orchestrator.resolve_dead_letter(letter.id, "alice", "released in the WMS by hand")

    events = (await store.events("dl"))[len(before) :]
    assert [e.type for e in events] == [
        EventType.DEAD_LETTER_RESOLVED,
        EventType.SAGA_COMPENSATED,
    ]
    assert dict(events[0].data) == {"by": "alice", "reason": "released in the WMS by hand"}
    [row] = await store.dead_letters(None)
    assert (row.status, row.resolution) == ("resolved", "released in the WMS by hand")
    assert (await check("dl")).status is SagaStatus.COMPENSATED
    with pytest.raises(InvalidInput):
        await orchestrator.resolve_dead_letter(letter.id, "alice", "again")
