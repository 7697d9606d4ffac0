"""Transient failures: retried with the same key, bounded, and only where the step allows."""

from __future__ import annotations

from typing import Any

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
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.examples.commerce.catalogues import CreateShipment, ReserveStock


async def test_transient_failures_are_retried_into_success(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.next("reserve", Fault.TRANSIENT, Fault.TRANSIENT)

    state = await orchestrator.execute(checkout_plan("o-1"), saga_id="tr")

    assert state.status is SagaStatus.COMPLETED
    assert state.steps[0].attempts == 3
    assert state.steps[0].error is None
    calls = services.calls("reserve")
    assert [c["key"] for c in calls] == ["tr:0"] * 3
    assert [c["fault"] for c in calls] == ["transient", "transient", None]
    assert len(services.rows("reservations")) == 1
    assert services.available("sku-1", "A") == 48

    events = await store.events("tr")
    retries = [e for e in events if e.type is EventType.STEP_RETRY_SCHEDULED]
    assert [(e.step, e.attempt) for e in retries] == [(0, 1), (0, 2)]
    policy = orchestrator.app.catalogue("checkout")["reserve_stock"].retry
    for e in retries:
        assert "Transient" in e.data["error"]
        cap = policy.base_delay * policy.multiplier ** (e.attempt - 1)
        assert e.at <= e.data["next_attempt_at"] <= e.at + cap
    starts = [e for e in events if e.type is EventType.STEP_STARTED and e.step == 0]
    assert [e.attempt for e in starts] == [1, 2, 3]
    assert {e.data["key"] for e in starts} == {"tr:0"}
    # each retry waited for its scheduled time on the fake clock
    assert starts[1].at == retries[0].data["next_attempt_at"]
    assert starts[2].at == retries[1].data["next_attempt_at"]

    await check("tr")


async def test_transient_that_never_stops_exhausts_attempts_and_compensates(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.always("reserve", Fault.TRANSIENT)
    max_attempts = orchestrator.app.catalogue("checkout")["reserve_stock"].retry.max_attempts

    state = await orchestrator.execute(checkout_plan("o-2"), saga_id="never")

    assert state.status is SagaStatus.COMPENSATED
    reserve = state.steps[0]
    # "service unavailable" is no proof of "no effect" by itself: once no attempt can land,
    # its lookup is (not found: no effect, and nothing to undo)
    assert reserve.status is StepStatus.FAILED
    assert reserve.attempts == max_attempts == 4
    assert f"after {max_attempts} attempts" in (reserve.error or "")
    assert "lookup found no effect" in (reserve.error or "")
    assert reserve.undo_status is UndoStatus.NONE
    events = await store.events("never")
    assert len([e for e in events if e.type is EventType.STEP_RETRY_SCHEDULED]) == max_attempts - 1
    assert events[-1].type is EventType.SAGA_COMPENSATED

    assert [c["key"] for c in services.calls("reserve")] == ["never:0"] * max_attempts
    assert services.rows("reservations") == []
    assert services.calls("charge") == []
    assert services.calls("release") == []  # never a step that never ran
    assert services.available("sku-1", "A") == 50
    await check("never")


async def test_exhausted_later_step_releases_the_earlier_reservation(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.always("charge", Fault.TRANSIENT)

    state = await orchestrator.execute(checkout_plan("o-3"), saga_id="charge-down")

    assert state.status is SagaStatus.COMPENSATED
    assert [r.undo_status for r in state.steps] == [
        UndoStatus.DONE,
        UndoStatus.NONE,  # its lookup found no charge once none could land: no refund
        UndoStatus.NONE,
    ]
    assert state.steps[1].status is StepStatus.FAILED
    assert len(services.calls("charge")) == 4
    assert services.rows("payments") == []
    assert services.calls("refund") == []
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    assert services.available("sku-1", "A") == 50
    assert await store.dead_letters() == []
    await check("charge-down")


def shipping_catalogue(svc: CommerceServices, *, retryable: bool) -> Catalogue:
    """reserve_stock, then book_shipment whose retryability is the parameter under test."""
    catalogue = Catalogue("custom")

    async def release(args: ReserveStock, result: Any, ctx: StepContext) -> None:
        svc.release(reserved_with=ctx.action_key, key=ctx.key)

    @catalogue.compensable(undo=release)
    async def reserve_stock(args: ReserveStock, ctx: StepContext) -> dict[str, Any]:
        return svc.reserve(args.order_id, args.sku, args.quantity, args.warehouse, ctx.key)

    async def cancel(args: CreateShipment, result: Any, ctx: StepContext) -> None:
        svc.cancel_shipment(shipped_with=ctx.action_key, key=ctx.key)

    @catalogue.compensable(
        undo=cancel,
        retryable=retryable,
        retry=RetryPolicy(max_attempts=3, base_delay=0.01),
    )
    async def book_shipment(args: CreateShipment, ctx: StepContext) -> dict[str, Any]:
        return svc.ship(args.order_id, args.warehouse, ctx.key)

    return catalogue


def shipping_plan(order_id: str) -> dict[str, Any]:
    return {
        "catalogue": "custom",
        "steps": [
            {"name": "reserve_stock", "args": {"order_id": order_id, "sku": "lamp", "quantity": 1}},
            {"name": "book_shipment", "args": {"order_id": order_id}},
        ],
    }


async def test_step_declared_not_retryable_is_called_once_and_compensates(
    make_orchestrator, store, services, faults, check
) -> None:
    orchestrator = make_orchestrator(shipping_catalogue(services, retryable=False))
    faults.always("ship", Fault.TRANSIENT)

    state = await orchestrator.execute(parse_plan(shipping_plan("o-4")), saga_id="once")

    assert state.status is SagaStatus.COMPENSATED
    [call] = services.calls("ship")
    assert call["key"] == "once:1"
    book = state.steps[1]
    assert book.attempts == 1
    # a transient failure may have had an effect: outcome unknown, so it is undone
    assert book.status is StepStatus.UNKNOWN
    assert book.undo_status is UndoStatus.DONE
    events = await store.events("once")
    assert not [e for e in events if e.type is EventType.STEP_RETRY_SCHEDULED]
    assert [e.step for e in events if e.type is EventType.UNDO_STARTED] == [1, 0]
    assert [c["key"] for c in services.calls("cancel_shipment")] == ["once:1:undo"]
    assert services.rows("shipments") == []
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    assert services.available("lamp", "A") == 50
    await check("once")


async def test_retryable_step_with_the_same_fault_is_retried(
    make_orchestrator, services, faults, check
) -> None:
    orchestrator = make_orchestrator(shipping_catalogue(services, retryable=True))
    faults.next("ship", Fault.TRANSIENT, Fault.TRANSIENT)

    state = await orchestrator.execute(parse_plan(shipping_plan("o-5")), saga_id="again")

    assert state.status is SagaStatus.COMPLETED
    assert [c["key"] for c in services.calls("ship")] == ["again:1"] * 3
    assert len(services.rows("shipments")) == 1
    await check("again")


async def test_abort_is_not_retried_and_compensates(
    make_orchestrator, store, services, faults, check
) -> None:
    catalogue = shipping_catalogue(services, retryable=True)
    calls: list[str] = []

    async def audit(args: CreateShipment, ctx: StepContext) -> None:
        calls.append(ctx.key)
        raise Abort("fraud check says no")

    async def forget(args: CreateShipment, result: Any, ctx: StepContext) -> None:
        raise AssertionError("a step that took no effect is never undone")

    catalogue.compensable(undo=forget, args=CreateShipment, name="fraud_check")(audit)
    plan = shipping_plan("o-6")
    plan["steps"].insert(1, {"name": "fraud_check", "args": {"order_id": "o-6"}})
    orchestrator = make_orchestrator(catalogue)

    state = await orchestrator.execute(parse_plan(plan), saga_id="abort")

    assert state.status is SagaStatus.COMPENSATED
    assert calls == ["abort:1"]
    assert state.steps[1].status is StepStatus.FAILED
    assert state.steps[1].undo_status is UndoStatus.NONE
    [failed] = [e for e in await store.events("abort") if e.type is EventType.STEP_FAILED]
    assert failed.data["outcome"] == "abort"
    assert services.calls("ship") == []
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    await check("abort")
