"""Property: any fault schedule on checkout ends terminal, consistent and effect-once."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from integration_orders import open_order

from pivotal import FakeClock, Orchestrator, Plan, SagaState, SagaStatus, SQLiteStore
from pivotal.examples.commerce import Fault, Faults, create_app

OPS = ("reserve", "charge", "ship", "release", "refund", "cancel_shipment")
STEPS = ("reserve_stock", "charge_payment", "create_shipment")

fault = st.one_of(st.none(), st.sampled_from(list(Fault)))
schedules = st.fixed_dictionaries({op: st.lists(fault, max_size=6) for op in OPS})
# every order of the steps the catalogue accepts: a shipment needs a reservation before it
orders = st.permutations(STEPS).filter(
    lambda steps: steps.index("reserve_stock") < steps.index("create_shipment")
)


async def run_schedule(
    schedule: dict[str, list[Fault | None]],
    order: tuple[str, ...],
    checkout_plan: Callable[..., Plan],
    audit: Callable[..., Awaitable[SagaState]],
) -> None:
    faults = Faults()
    for op, queued in schedule.items():
        faults.next(op, *queued)
    # in memory for speed; the file-backed ledger is exercised by every other scenario
    app = create_app(":memory:", faults)
    services = app.services
    open_order(services, "p-1", amount="49.90", lines=[("sku-1", 2)])  # checkout_plan's
    store = SQLiteStore(":memory:")
    await store.open()
    try:
        orchestrator = Orchestrator(store, app, clock=FakeClock(), rng=random.Random(0))
        state = await orchestrator.execute(checkout_plan("p-1", order=order), saga_id="p")

        assert state.status.terminal
        # checkout has no point of no return: every failure compensates
        assert state.status is not SagaStatus.NEEDS_HUMAN
        await audit(orchestrator, services, "p")

        active = services.rows("reservations", order_id="p-1", status="active")
        charged = services.rows("payments", order_id="p-1", status="charged")
        shipped = services.rows("shipments", order_id="p-1", status="created")
        letters = await store.dead_letters()
        if state.status is SagaStatus.COMPLETED:
            assert (len(active), len(charged), len(shipped)) == (1, 1, 1)
            assert services.available("sku-1", "A") == 48
            assert letters == []
        elif state.status is SagaStatus.COMPENSATED:
            assert (active, charged, shipped) == ([], [], [])
            assert services.available("sku-1", "A") == 50
            assert letters == []
        else:
            assert state.status is SagaStatus.COMPENSATION_FAILED
            assert sorted(d.undo_key for d in letters) == [
                f"p:{r.index}:undo" for r in state.dead_letters
            ]
            assert letters
    finally:
        await store.close()
        services.close()


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # fixtures used are stateless
)
@given(schedule=schedules, order=orders)
def test_any_fault_schedule_ends_consistently(
    schedule: dict[str, list[Fault | None]],
    order: list[str],
    checkout_plan: Callable[..., Plan],
    audit: Callable[..., Awaitable[SagaState]],
) -> None:
    asyncio.run(run_schedule(schedule, tuple(order), checkout_plan, audit))
