"""Unknown outcomes: lost replies and timeouts are never taken for "no effect"."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from pivotal import (
    Catalogue,
    EventType,
    RetryPolicy,
    SagaStatus,
    StepContext,
    StepStatus,
    UndoStatus,
    parse_plan,
)
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.examples.commerce.catalogues import CreateShipment, Payment, ReserveStock

TWO_QUICK = RetryPolicy(max_attempts=2, base_delay=0.01)
BOUND = 30.0  # a safety net against a hang, never what a test measures


def custom_catalogue(
    svc: CommerceServices, *, slow_first: int = 0, undo_results: list[Any] | None = None
) -> Catalogue:
    """Steps without lookups: reserve_stock, book_shipment (timeout 0.05s), capture (pivot).

    The first ``slow_first`` calls of book_shipment make their effect, then never reply: only
    the timeout ends them. The other calls never yield to the event loop, so no timeout can
    cut them short however slow the machine. book_shipment's undo appends the ``result`` it
    is given to ``undo_results``.
    """
    catalogue = Catalogue("custom")
    undo_results = undo_results if undo_results is not None else []
    slow = {"left": slow_first}

    async def release(args: ReserveStock, result: Any, ctx: StepContext) -> None:
        svc.release(reserved_with=ctx.action_key, key=ctx.key)

    @catalogue.compensable(undo=release, retry=TWO_QUICK)
    async def reserve_stock(args: ReserveStock, ctx: StepContext) -> dict[str, Any]:
        return svc.reserve(args.order_id, args.sku, args.quantity, args.warehouse, ctx.key)

    async def cancel(args: CreateShipment, result: Any, ctx: StepContext) -> None:
        undo_results.append(result)
        svc.cancel_shipment(shipped_with=ctx.action_key, key=ctx.key)

    @catalogue.compensable(undo=cancel, retry=TWO_QUICK, timeout=0.05)
    async def book_shipment(args: CreateShipment, ctx: StepContext) -> dict[str, Any]:
        result = svc.ship(args.order_id, args.warehouse, ctx.key)
        if slow["left"]:
            slow["left"] -= 1
            await asyncio.Event().wait()  # the effect happened; the reply never comes
        return result

    @catalogue.pivot(retry=TWO_QUICK)
    async def capture(args: Payment, ctx: StepContext) -> dict[str, Any]:
        return svc.capture(args.order_id, args.amount, ctx.key)

    return catalogue


def custom_plan(order_id: str, *steps: str) -> Any:
    args = {
        "reserve_stock": {"order_id": order_id, "sku": "lamp", "quantity": 1},
        "book_shipment": {"order_id": order_id},
        "capture": {"order_id": order_id, "amount": "10.00"},
    }
    return parse_plan(
        {"catalogue": "custom", "steps": [{"name": s, "args": args[s]} for s in steps]}
    )


async def test_lost_reply_is_settled_by_the_lookup(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.always("ship", Fault.TIMEOUT_AFTER_EFFECT)

    state = await orchestrator.execute(checkout_plan("o-1"), saga_id="lost")

    assert state.status is SagaStatus.COMPLETED
    ship = state.steps[2]
    assert ship.status is StepStatus.SUCCEEDED
    assert ship.attempts == 4
    [shipment] = services.rows("shipments")
    assert ship.result == {"shipment_id": shipment["id"]}
    assert shipment["status"] == "created"
    assert [c["key"] for c in services.calls("ship")] == ["lost:2"] * 4
    events = await store.events("lost")
    [succeeded] = [e for e in events if e.type is EventType.STEP_SUCCEEDED and e.step == 2]
    assert succeeded.data["via"] == "lookup"
    retries = [e for e in events if e.type is EventType.STEP_RETRY_SCHEDULED]
    assert len(retries) == 3
    assert all("TimeoutError" in e.data["error"] for e in retries)
    assert services.calls("refund") == services.calls("release") == []
    await check("lost")


async def test_timeout_before_effect_is_looked_up_once_it_cannot_land(
    orchestrator, services, faults, checkout_plan, check
) -> None:
    """A timeout is no proof of "no effect": the lookup's "not found" counts only once the
    call cannot land any more. Then it is the answer (the documents: treat not-found as
    already compensated): the shipment took no effect, and nothing is cancelled."""
    faults.always("ship", Fault.TIMEOUT_BEFORE_EFFECT)

    state = await orchestrator.execute(checkout_plan("o-2"), saga_id="nothing")

    assert state.status is SagaStatus.COMPENSATED
    ship = state.steps[2]
    assert ship.status is StepStatus.FAILED
    assert "found no effect" in (ship.error or "")
    assert ship.undo_status is UndoStatus.NONE
    assert services.rows("shipments") == []
    assert services.calls("cancel_shipment") == []
    assert [p["status"] for p in services.rows("payments")] == ["refunded"]
    await check("nothing")


async def test_lost_reply_without_lookup_is_unknown_and_undone(
    make_orchestrator, store, services, faults, check
) -> None:
    undo_results: list[Any] = []
    orchestrator = make_orchestrator(custom_catalogue(services, undo_results=undo_results))
    faults.always("ship", Fault.TIMEOUT_AFTER_EFFECT)

    plan = custom_plan("o-3", "reserve_stock", "book_shipment")
    state = await orchestrator.execute(plan, saga_id="unknown")

    assert state.status is SagaStatus.COMPENSATED
    book = state.steps[1]
    assert book.status is StepStatus.UNKNOWN
    # two attempts, then the undo by the key: never repeated just to be undone
    assert book.attempts == 2
    assert book.settle_attempt is None
    assert book.undo_status is UndoStatus.DONE
    assert undo_results == [None]  # the undo found the effect by its action key
    events = await store.events("unknown")
    unknown = [e for e in events if e.type is EventType.STEP_UNKNOWN]
    assert [e.step for e in unknown] == [1]
    assert "outcome unknown" in unknown[0].data["error"]
    assert not [e for e in events if e.type is EventType.STEP_FAILED]
    assert [e.step for e in events if e.type is EventType.UNDO_STARTED] == [1, 0]

    [shipment] = services.rows("shipments")
    assert (shipment["key"], shipment["status"]) == ("unknown:1", "cancelled")
    assert [c["key"] for c in services.calls("cancel_shipment")] == ["unknown:1:undo"]
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    assert services.available("lamp", "A") == 50
    await check("unknown")


async def test_step_timeout_is_an_unknown_outcome_never_a_no_effect_failure(
    make_orchestrator, store, services, check
) -> None:
    orchestrator = make_orchestrator(custom_catalogue(services, slow_first=2))

    plan = custom_plan("o-4", "reserve_stock", "book_shipment")
    state = await asyncio.wait_for(orchestrator.execute(plan, saga_id="slow"), timeout=BOUND)

    assert state.status is SagaStatus.COMPENSATED
    book = state.steps[1]
    assert book.status is not StepStatus.FAILED
    # both attempts were cut off by the step's timeout; once they could no longer land,
    # the effect was undone by its key
    assert book.status is StepStatus.UNKNOWN
    assert book.settle_attempt is None
    assert book.undo_status is UndoStatus.DONE
    events = await store.events("slow")
    [retry] = [e for e in events if e.type is EventType.STEP_RETRY_SCHEDULED]
    assert "the call was abandoned" in retry.data["error"]
    # the retry waited until the abandoned call could no longer land
    assert retry.data["next_attempt_at"] >= retry.data["doubt_until"] is not None

    assert [c["key"] for c in services.calls("ship")] == ["slow:1"] * 2
    [shipment] = services.rows("shipments")
    assert shipment["status"] == "cancelled"  # the effect that timed out was reversed
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    await check("slow")


async def test_step_timeout_is_retried_like_a_transient_failure(
    make_orchestrator, store, services, check
) -> None:
    orchestrator = make_orchestrator(custom_catalogue(services, slow_first=1))

    plan = custom_plan("o-5", "reserve_stock", "book_shipment")
    state = await asyncio.wait_for(orchestrator.execute(plan, saga_id="late"), timeout=BOUND)

    assert state.status is SagaStatus.COMPLETED
    assert state.steps[1].attempts == 2
    [shipment] = services.rows("shipments")
    assert state.steps[1].result == {"shipment_id": shipment["id"]}
    assert shipment["status"] == "created"
    assert services.calls("cancel_shipment") == []
    await check("late")


async def test_unknown_outcome_of_the_pivot_needs_a_human(
    make_orchestrator, store, services, faults, check
) -> None:
    orchestrator = make_orchestrator(custom_catalogue(services))
    services.order("o-6", "c-6")
    services.authorize("o-6", Decimal("10.00"), "setup:auth")
    faults.always("capture", Fault.TIMEOUT_AFTER_EFFECT)

    plan = custom_plan("o-6", "reserve_stock", "capture")
    state = await orchestrator.execute(plan, saga_id="pivot")

    assert state.status is SagaStatus.NEEDS_HUMAN
    assert "outcome of the point-of-no-return step capture is unknown" in (state.reason or "")
    assert state.steps[1].status is StepStatus.UNKNOWN
    assert all(r.undo_status is UndoStatus.NONE for r in state.steps)
    events = await store.events("pivot")
    assert not [e for e in events if e.type is EventType.COMPENSATION_STARTED]
    assert events[-1].type is EventType.SAGA_NEEDS_HUMAN
    assert services.calls("release") == []
    assert [r["status"] for r in services.rows("reservations")] == ["active"]
    assert sorted((p["kind"], p["status"], p["key"]) for p in services.rows("payments")) == [
        ("authorization", "captured", "setup:auth"),
        ("capture", "captured", "pivot:1"),
    ]
    await check("pivot")
