"""Checkout sagas: the happy path and permanent failures that compensate in reverse order."""

from __future__ import annotations

from pivotal import EventType, SagaStatus, StepStatus, UndoStatus
from pivotal.examples.commerce import Fault


def types(events: list) -> list[str]:
    return [e.type.value for e in events]


async def test_happy_path_completes_every_step(
    orchestrator, store, services, checkout_plan, check
) -> None:
    state = await orchestrator.execute(checkout_plan("o-1"), saga_id="happy")

    assert state.status is SagaStatus.COMPLETED
    stored = (await orchestrator.get("happy")).state
    assert stored == state
    assert [r.status for r in stored.steps] == [StepStatus.SUCCEEDED] * 3
    assert [r.attempts for r in stored.steps] == [1, 1, 1]
    assert all(r.undo_status is UndoStatus.NONE for r in stored.steps)
    assert types(await store.events("happy")) == [
        "saga_submitted",
        *["step_started", "step_succeeded"] * 3,
        "saga_completed",
    ]
    assert await store.dead_letters() == []

    assert services.available("sku-1", "A") == 48
    [reservation] = services.rows("reservations")
    assert reservation["key"] == "happy:0"
    assert reservation["status"] == "active"
    assert stored.steps[0].result == {"reservation_id": reservation["id"]}
    [payment] = services.rows("payments")
    assert (payment["key"], payment["kind"], payment["status"]) == ("happy:1", "charge", "charged")
    assert payment["amount"] == "49.90"
    assert stored.steps[1].result == {"charge_id": payment["id"], "amount": "49.90"}
    [shipment] = services.rows("shipments")
    assert (shipment["key"], shipment["status"]) == ("happy:2", "created")
    assert len(services.calls("charge")) == 1
    assert services.calls("release") == services.calls("refund") == []

    await check("happy")


async def test_failing_last_step_refunds_before_it_releases(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.always("ship", Fault.PERMANENT)

    state = await orchestrator.execute(checkout_plan("o-2"), saga_id="rev")

    assert state.status is SagaStatus.COMPENSATED
    assert "create_shipment" in (state.reason or "")
    assert [r.status for r in state.steps] == [
        StepStatus.SUCCEEDED,
        StepStatus.SUCCEEDED,
        StepStatus.FAILED,
    ]
    assert [r.undo_status for r in state.steps] == [
        UndoStatus.DONE,
        UndoStatus.DONE,
        UndoStatus.NONE,
    ]
    events = await store.events("rev")
    assert [e.step for e in events if e.type is EventType.UNDO_STARTED] == [1, 0]
    assert [e.data["key"] for e in events if e.type is EventType.UNDO_STARTED] == [
        "rev:1:undo",
        "rev:0:undo",
    ]
    assert types(events)[-1] == "saga_compensated"

    [refund] = services.calls("refund")
    [release] = services.calls("release")
    assert refund["id"] < release["id"]
    assert (refund["key"], release["key"]) == ("rev:1:undo", "rev:0:undo")
    assert len(services.calls("ship")) == 1  # permanent: never retried
    assert services.calls("cancel_shipment") == []
    assert services.rows("shipments") == []
    assert [p["status"] for p in services.rows("payments")] == ["refunded"]
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    assert services.available("sku-1", "A") == 50

    await check("rev")


async def test_declined_charge_is_not_retried_and_only_the_reservation_is_undone(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.always("charge", Fault.PERMANENT)

    state = await orchestrator.execute(checkout_plan("o-3"), saga_id="declined")

    assert state.status is SagaStatus.COMPENSATED
    reserve, charge, ship = state.steps
    assert (reserve.status, reserve.undo_status) == (StepStatus.SUCCEEDED, UndoStatus.DONE)
    assert (charge.status, charge.undo_status) == (StepStatus.FAILED, UndoStatus.NONE)
    assert charge.attempts == 1
    assert "refused by the provider" in (charge.error or "")
    assert (ship.status, ship.undo_status) == (StepStatus.PENDING, UndoStatus.NONE)

    events = await store.events("declined")
    assert not [e for e in events if e.type is EventType.STEP_RETRY_SCHEDULED]
    [failed] = [e for e in events if e.type is EventType.STEP_FAILED]
    assert (failed.step, failed.data["outcome"]) == (1, "permanent")
    assert [e.step for e in events if e.type is EventType.UNDO_STARTED] == [0]
    assert await store.dead_letters() == []

    assert len(services.calls("charge")) == 1
    assert services.rows("payments") == []
    assert services.calls("refund") == []
    assert services.calls("ship") == []
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    assert services.available("sku-1", "A") == 50

    await check("declined")
