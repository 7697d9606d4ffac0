"""Compensation: undo retries, dead letters, and effects a failed step may have left."""

from __future__ import annotations

from typing import Any

import pytest

from pivotal import (
    Abort,
    Catalogue,
    EventType,
    RetryPolicy,
    SagaStatus,
    StepContext,
    StepStatus,
    UndoStatus,
    parse_plan,
)
from pivotal.examples.commerce import Fault
from pivotal.examples.commerce.catalogues import CreateShipment

CHARGE_FIRST = ("charge_payment", "reserve_stock", "create_shipment")


async def test_failed_undo_is_dead_lettered_and_the_other_undos_still_run(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.always("ship", Fault.PERMANENT).always("release", Fault.PERMANENT)

    state = await orchestrator.execute(checkout_plan("o-1", order=CHARGE_FIRST), saga_id="dl")

    assert state.status is SagaStatus.COMPENSATION_FAILED
    assert "reserve_stock (step 1)" in (state.reason or "")
    charge, reserve, ship = state.steps
    assert (charge.status, charge.undo_status) == (StepStatus.SUCCEEDED, UndoStatus.DONE)
    assert (reserve.status, reserve.undo_status) == (
        StepStatus.SUCCEEDED,
        UndoStatus.DEAD_LETTERED,
    )
    assert reserve.undo_attempts == 1  # permanent: not retried
    assert "refused by the provider" in (reserve.undo_error or "")
    assert (ship.status, ship.undo_status) == (StepStatus.FAILED, UndoStatus.NONE)
    assert [r.index for r in state.dead_letters] == [1]

    [letter] = await store.dead_letters()
    assert letter.saga_id == "dl"
    assert (letter.step, letter.step_name) == (1, "reserve_stock")
    assert letter.undo_key == "dl:1:undo"
    assert letter.status == "open"
    assert letter.attempts == 1
    assert "refused by the provider" in (letter.error or "")

    events = await store.events("dl")
    assert [e.step for e in events if e.type is EventType.UNDO_STARTED] == [1, 0]
    assert [e.step for e in events if e.type is EventType.UNDO_DEAD_LETTERED] == [1]
    assert events[-1].type is EventType.SAGA_COMPENSATION_FAILED

    # the release was refused, yet the refund after it still happened
    [release] = services.calls("release")
    [refund] = services.calls("refund")
    assert release["id"] < refund["id"]
    assert release["key"] == "dl:1:undo"
    assert [p["status"] for p in services.rows("payments")] == ["refunded"]
    assert [r["status"] for r in services.rows("reservations")] == ["active"]
    assert services.available("sku-1", "A") == 48
    await check("dl")


async def test_transient_undo_is_retried_with_the_same_key(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.always("ship", Fault.PERMANENT).next("refund", Fault.TRANSIENT, Fault.TRANSIENT)

    state = await orchestrator.execute(checkout_plan("o-2"), saga_id="undo-retry")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[1].undo_attempts == 3
    assert state.steps[1].undo_status is UndoStatus.DONE
    events = await store.events("undo-retry")
    retries = [e for e in events if e.type is EventType.UNDO_RETRY_SCHEDULED]
    assert [(e.step, e.attempt) for e in retries] == [(1, 1), (1, 2)]
    assert all(e.data["next_attempt_at"] >= e.at for e in retries)
    assert [c["key"] for c in services.calls("refund")] == ["undo-retry:1:undo"] * 3
    assert [p["status"] for p in services.rows("payments")] == ["refunded"]
    assert await store.dead_letters() == []
    await check("undo-retry")


async def test_undo_whose_reply_is_lost_is_applied_once(
    orchestrator, services, faults, checkout_plan, check
) -> None:
    faults.always("ship", Fault.PERMANENT).next("release", Fault.TIMEOUT_AFTER_EFFECT)

    state = await orchestrator.execute(checkout_plan("o-3"), saga_id="undo-lost")

    assert state.status is SagaStatus.COMPENSATED
    assert [c["key"] for c in services.calls("release")] == ["undo-lost:0:undo"] * 2
    assert len(services.rows("effects", op="release")) == 1
    assert services.available("sku-1", "A") == 50
    await check("undo-lost")


@pytest.mark.parametrize(
    ("op", "step"),
    [("reserve", "reserve_stock"), ("charge", "charge_payment")],
)
async def test_effect_of_an_earlier_attempt_is_undone_when_a_retry_fails_permanently(
    orchestrator, store, services, faults, checkout_plan, check, op, step
) -> None:
    """Attempt 1 took effect but its reply was lost; attempt 2 was refused.

    The refusal says attempt 2 took no effect, not that attempt 1 did not. Either the
    engine settles the outcome (lookup) and goes on, or it compensates and reverses the
    effect; it must not record "failed: took no effect" and leave the effect in place.
    """
    faults.next(op, Fault.TIMEOUT_AFTER_EFFECT, Fault.PERMANENT)

    state = await orchestrator.execute(checkout_plan("o-4"), saga_id="earlier")

    [record] = [r for r in state.steps if r.name == step]
    assert record.attempts == 2
    assert len(services.rows("effects", op=op)) == 1  # attempt 1 did take effect
    assert state.status in (SagaStatus.COMPENSATED, SagaStatus.COMPLETED)
    if state.status is SagaStatus.COMPENSATED:
        active = services.rows("reservations", status="active")
        charged = services.rows("payments", status="charged")
        assert (active, charged) == ([], []), "compensated saga left an effect in place"
        assert services.available("sku-1", "A") == 50
    else:
        assert record.status is StepStatus.SUCCEEDED
    assert record.status is not StepStatus.FAILED, (
        f"{step} is recorded as 'failed: took no effect' although attempt 1 took effect"
    )
    await check("earlier")


async def test_abort_after_a_lost_reply_compensates_and_reverses_the_effect(
    make_orchestrator, store, services, faults, check
) -> None:
    """Abort is the step's verdict that the saga must not go on, whatever came before.

    Attempt 1 shipped but its reply was lost; attempt 2 aborts. The saga must compensate
    (not complete because a lookup found attempt 1's effect) and cancel that shipment.
    """
    catalogue = Catalogue("custom")

    async def cancel(args: CreateShipment, result: Any, ctx: StepContext) -> None:
        services.cancel_shipment(shipped_with=ctx.action_key, key=ctx.key)

    async def find(args: CreateShipment, ctx: StepContext) -> dict[str, Any] | None:
        return services.find(ctx.key)

    @catalogue.compensable(undo=cancel, lookup=find, retry=RetryPolicy(base_delay=0.01))
    async def book_shipment(args: CreateShipment, ctx: StepContext) -> dict[str, Any]:
        if ctx.attempt > 1:
            raise Abort("carrier flagged the address")
        return services.ship(args.order_id, args.warehouse, ctx.key)

    faults.next("ship", Fault.TIMEOUT_AFTER_EFFECT)
    plan = parse_plan(
        {"catalogue": "custom", "steps": [{"name": "book_shipment", "args": {"order_id": "a"}}]}
    )

    state = await make_orchestrator(catalogue).execute(plan, saga_id="verdict")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].attempts == 2
    assert state.steps[0].undo_status is UndoStatus.DONE
    [shipment] = services.rows("shipments")
    assert shipment["status"] == "cancelled"
    await check("verdict")
