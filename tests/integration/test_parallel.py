"""Parallel groups: every member runs, and every member that took effect is undone."""

from __future__ import annotations

from integration_orders import open_order

from pivotal import EventType, Plan, SagaStatus, StepStatus, UndoStatus, parse_plan
from pivotal.examples.commerce import CommerceServices, Fault


def parallel_plan(services: CommerceServices, order_id: str, quantity_b: int = 3) -> Plan:
    """Two reservations side by side, then the charge and the shipment, for an order (made
    open) of these two lines. Both are from warehouse A: a plan's reservations and its
    shipment must agree on the warehouse."""
    open_order(services, order_id, amount="20.00", lines=[("sku-1", 2), ("sku-2", quantity_b)])
    return parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "parallel": [
                        {
                            "name": "reserve_stock",
                            "args": {"order_id": order_id, "sku": "sku-1", "quantity": 2},
                        },
                        {
                            "name": "reserve_stock",
                            "args": {
                                "order_id": order_id,
                                "sku": "sku-2",
                                "quantity": quantity_b,
                                "warehouse": "A",
                            },
                        },
                    ]
                },
                {"name": "charge_payment", "args": {"order_id": order_id, "amount": "20.00"}},
                {"name": "create_shipment", "args": {"order_id": order_id}},
            ],
        }
    )


async def test_both_members_run(orchestrator, store, services, check) -> None:
    state = await orchestrator.execute(parallel_plan(services, "p-1"), saga_id="par")

    assert state.status is SagaStatus.COMPLETED
    assert [r.group for r in state.steps] == [0, 0, None, None]
    assert all(r.status is StepStatus.SUCCEEDED for r in state.steps)
    assert sorted(c["key"] for c in services.calls("reserve")) == ["par:0", "par:1"]
    reservations = {r["key"]: r for r in services.rows("reservations")}
    assert (reservations["par:0"]["sku"], reservations["par:0"]["warehouse"]) == ("sku-1", "A")
    assert (reservations["par:1"]["sku"], reservations["par:1"]["warehouse"]) == ("sku-2", "A")
    assert services.available("sku-1", "A") == 48
    assert services.available("sku-2", "A") == 47
    events = await store.events("par")
    started = [e.step for e in events if e.type is EventType.STEP_STARTED]
    assert sorted(started[:2]) == [0, 1]  # both members start before the charge
    assert started[2:] == [2, 3]
    await check("par")


async def test_later_failure_releases_both_members(
    orchestrator, store, services, faults, check
) -> None:
    faults.always("ship", Fault.PERMANENT)

    state = await orchestrator.execute(parallel_plan(services, "p-2"), saga_id="par-fail")

    assert state.status is SagaStatus.COMPENSATED
    assert [r.undo_status for r in state.steps] == [
        UndoStatus.DONE,
        UndoStatus.DONE,
        UndoStatus.DONE,
        UndoStatus.NONE,
    ]
    events = await store.events("par-fail")
    undone = [e.step for e in events if e.type is EventType.UNDO_STARTED]
    assert undone[0] == 2  # the charge completed last, so it is refunded first
    assert sorted(undone[1:]) == [0, 1]
    assert sorted(c["key"] for c in services.calls("release")) == [
        "par-fail:0:undo",
        "par-fail:1:undo",
    ]
    assert [r["status"] for r in services.rows("reservations")] == ["released", "released"]
    assert services.available("sku-1", "A") == 50
    assert services.available("sku-2", "A") == 50
    assert [p["status"] for p in services.rows("payments")] == ["refunded"]
    await check("par-fail")


async def test_failing_member_releases_its_sibling(orchestrator, store, services, check) -> None:
    state = await orchestrator.execute(
        parallel_plan(services, "p-3", quantity_b=99), saga_id="par-oos"
    )

    assert state.status is SagaStatus.COMPENSATED
    first, second, charge, ship = state.steps
    assert (first.status, first.undo_status) == (StepStatus.SUCCEEDED, UndoStatus.DONE)
    assert (second.status, second.undo_status) == (StepStatus.FAILED, UndoStatus.NONE)
    assert "out of stock" in (second.error or "")
    assert charge.status is ship.status is StepStatus.PENDING
    assert [c["key"] for c in services.calls("release")] == ["par-oos:0:undo"]
    assert services.calls("charge") == []
    assert services.available("sku-1", "A") == 50
    assert services.available("sku-2", "A") == 50
    await check("par-oos")
