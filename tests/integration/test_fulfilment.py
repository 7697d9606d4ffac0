"""Fulfilment: the pivot divides what is undone from what needs a person."""

from __future__ import annotations

import random

import pytest
from integration_orders import open_order

from pivotal import (
    EventType,
    Orchestrator,
    Plan,
    PlanRejected,
    SagaStatus,
    StepStatus,
    UndoStatus,
    parse_plan,
)
from pivotal.declarations.rules import Required, RequiresEarlier
from pivotal.examples.commerce import CommerceApp, Fault


async def test_completes_below_the_approval_threshold(
    orchestrator, store, services, fulfilment_plan, check
) -> None:
    state = await orchestrator.execute(fulfilment_plan(), saga_id="ok")

    assert state.status is SagaStatus.COMPLETED
    assert state.approval is None
    assert all(r.status is StepStatus.SUCCEEDED for r in state.steps)
    assert sorted((p["kind"], p["status"], p["key"]) for p in services.rows("payments")) == [
        ("authorization", "captured", "ok:1"),
        ("capture", "captured", "ok:2"),
    ]
    assert {p["amount"] for p in services.rows("payments")} == {"120.00"}
    assert services.order_status("4490") == "paid"
    [email] = services.rows("emails")
    assert (email["key"], email["recipient"]) == ("ok:4", "ana@example.com")
    assert len(services.rows("shipments")) == 1
    assert services.available("sku-1", "A") == 49
    await check("ok")


async def test_failure_after_the_pivot_needs_a_human_and_undoes_nothing(
    orchestrator, store, services, faults, fulfilment_plan, check
) -> None:
    faults.always("ship", Fault.TRANSIENT)

    state = await orchestrator.execute(fulfilment_plan(), saga_id="nh")

    assert state.status is SagaStatus.NEEDS_HUMAN
    assert "create_shipment (step 3) failed after the point of no return" in (state.reason or "")
    assert [r.status for r in state.steps] == [
        StepStatus.SUCCEEDED,
        StepStatus.SUCCEEDED,
        StepStatus.SUCCEEDED,
        # each failure may have taken effect: its lookup's "not found" within the window
        # proves nothing, so the outcome is unknown (a person looks either way)
        StepStatus.UNKNOWN,
        StepStatus.PENDING,
    ]
    assert all(r.undo_status is UndoStatus.NONE for r in state.steps)
    max_attempts = orchestrator.app.catalogue("fulfilment")["create_shipment"].retry.max_attempts
    assert state.steps[3].attempts == max_attempts
    events = await store.events("nh")
    types = [e.type for e in events]
    assert EventType.COMPENSATION_STARTED not in types
    assert EventType.UNDO_STARTED not in types
    assert types[-1] is EventType.SAGA_NEEDS_HUMAN
    assert await store.dead_letters() == []

    [capture] = services.calls("capture")
    assert capture["key"] == "nh:2"
    assert sorted((p["kind"], p["status"], p["key"]) for p in services.rows("payments")) == [
        ("authorization", "captured", "nh:1"),
        ("capture", "captured", "nh:2"),
    ]
    assert [r["status"] for r in services.rows("reservations")] == ["active"]
    assert len(services.calls("ship")) == max_attempts
    assert services.calls("release") == services.calls("void") == []
    assert services.rows("emails") == []
    await check("nh")


async def test_failure_before_the_pivot_compensates(
    orchestrator, store, services, faults, fulfilment_plan, check
) -> None:
    faults.always("capture", Fault.PERMANENT)

    state = await orchestrator.execute(fulfilment_plan(), saga_id="pre")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[2].status is StepStatus.FAILED
    assert [r.undo_status for r in state.steps[:2]] == [UndoStatus.DONE, UndoStatus.DONE]
    assert len(services.calls("capture")) == 1
    assert [p["status"] for p in services.rows("payments")] == ["voided"]
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    assert services.calls("ship") == []
    await check("pre")


def open_n1(services) -> None:
    """The order no_pivot_plan() is for: one lamp, confirmed to n@example.com."""
    open_order(services, "n1", amount="40.00", lines=[("lamp", 1)], recipient="n@example.com")


def no_pivot_plan() -> Plan:
    return parse_plan(
        {
            "catalogue": "fulfilment",
            "steps": [
                {"name": "reserve_stock", "args": {"order_id": "n1", "sku": "lamp", "quantity": 1}},
                {"name": "create_shipment", "args": {"order_id": "n1"}},
                {
                    "name": "send_confirmation",
                    "args": {"order_id": "n1", "recipient": "n@example.com"},
                },
            ],
        }
    )


async def test_the_bundled_catalogue_refuses_a_plan_that_skips_the_pivot(
    orchestrator, services
) -> None:
    open_n1(services)
    with pytest.raises(PlanRejected) as refused:
        await orchestrator.submit(no_pivot_plan(), saga_id="nopivot")
    # the confirmation needs the shipment before it (which it has), the shipment the
    # capture: only the shipment is out of place
    assert [(e.code.value, e.path) for e in refused.value.errors] == [
        ("missing_step", "steps"),
        ("missing_prerequisite", "steps[1]"),
    ]
    assert await orchestrator.store.list_sagas() == []


async def test_without_a_pivot_the_first_retriable_step_is_the_point_of_no_return(
    store, clock, services, faults, audit
) -> None:
    """The engine's rule, on a catalogue whose rules allow a plan without a pivot."""
    app = CommerceApp(services)  # its facts: the order system the rules bind plans to
    catalogue = app.catalogue("fulfilment")
    # without the rules that ask for the capture; those that bind the plan to its order stay
    catalogue.rules[:] = [
        r
        for r in catalogue.rules
        if not isinstance(r, Required)
        and not (isinstance(r, RequiresEarlier) and r.earlier == "capture_payment")
    ]
    orchestrator = Orchestrator(store, app, clock=clock, rng=random.Random(0))
    open_n1(services)
    faults.always("email", Fault.PERMANENT)

    state = await orchestrator.execute(no_pivot_plan(), saga_id="nopivot")

    assert state.status is SagaStatus.NEEDS_HUMAN
    assert state.steps[1].status is StepStatus.SUCCEEDED
    assert services.calls("release") == []
    assert [r["status"] for r in services.rows("reservations")] == ["active"]
    assert len(services.rows("shipments")) == 1
    await audit(orchestrator, services, "nopivot")
