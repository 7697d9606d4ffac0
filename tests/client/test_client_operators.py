"""What an operator's service settles through ``Client`` and ``AsyncClient``, against a real
``pivotal serve`` (``conftest.served``): a saga parked ``needs_human`` resumed or resolved,
a dead letter listed, retried and resolved, an escalation resolved, a finished saga forked.
The sagas are run here as a worker would (``Served.run``), over the example's services
with the faults each test sets."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from live_server import Connect, Served, checkout, done

from pivotal import SagaNotParked, SagaStatus, SQLiteStore
from pivotal.engine.resuming import ResumeFromRefused
from pivotal.examples.commerce import CommerceApp, Fault, create_app
from pivotal.orchestration.fork import SagaNotForkable
from pivotal.planning import (
    PlanningMode,
    PlanningOutcome,
    PlanRequest,
    ScriptedPlanner,
    propose_plan,
)
from pivotal.sagas.saga_ids import new
from pivotal.server import views
from pivotal.server.api_errors import DeadLetterNotFound
from pivotal.server.errors import Forbidden
from pivotal.store.planning_records import EscalationClosed


@pytest.fixture
def shop(served: Served) -> Iterator[CommerceApp]:
    """The example's services over the server's state, to set faults on; cleared after."""
    app = create_app(served.commerce)
    try:
        yield app
    finally:
        app.services.faults.clear()
        app.services.close()


def fulfilment(order: str) -> dict[str, Any]:
    """A fulfilment of an order ``Served.open_order`` opened (49.90: under the approval
    threshold, so it runs through its capture, the point of no return, unasked)."""
    payment = {"order_id": order, "amount": "49.90"}
    return {
        "catalogue": "fulfilment",
        "steps": [
            {"name": "reserve_stock", "args": {"order_id": order, "sku": "sku-1", "quantity": 2}},
            {"name": "authorize_payment", "args": payment},
            {"name": "capture_payment", "args": payment},
            {"name": "create_shipment", "args": {"order_id": order}},
            {
                "name": "send_confirmation",
                "args": {"order_id": order, "recipient": f"{order}@example.com"},
            },
        ],
        "rationale": f"ship order {order}",
    }


async def parked(served: Served, connect: Connect, shop: CommerceApp) -> str:
    """A fulfilment past its capture whose shipment keeps failing: it waits for a person."""
    order = f"park-{new()[-8:]}"
    served.open_order(order)
    saga_id = (await done(connect("bot").submit(fulfilment(order)))).saga_id
    stored = served.stored_id(saga_id)
    shop.services.faults.always("ship", Fault.PERMANENT)
    state = await served.run(stored)
    assert state.status is SagaStatus.NEEDS_HUMAN, state.reason
    shop.services.faults.clear()  # the carrier's account is fixed
    return stored


async def test_a_parked_saga_resumed_goes_on_and_once_only(
    served: Served, connect: Connect, shop: CommerceApp
) -> None:
    stored = await parked(served, connect, shop)
    olga = connect("olga")
    with pytest.raises(Forbidden):  # a viewer reads; an operator settles
        await done(connect("vera").resume(stored, reason="not mine"))
    with pytest.raises(ResumeFromRefused) as refused:  # the capture may not be settled by hand
        await done(olga.resume(stored, reason="captured by hand", from_step="capture_payment"))
    assert refused.value.status == 409
    resumed = await done(olga.resume(stored, reason="carrier account fixed"))
    assert isinstance(resumed, views.Outcome)
    assert resumed.saga_id == stored
    assert resumed.status is not SagaStatus.NEEDS_HUMAN
    assert (await served.run(stored)).status is SagaStatus.COMPLETED
    with pytest.raises(SagaNotParked) as again:
        await done(olga.resume(stored, reason="twice"))
    assert again.value.status == 409


async def test_a_parked_saga_resolved_by_hand_ends_resolved(
    served: Served, connect: Connect, shop: CommerceApp
) -> None:
    stored = await parked(served, connect, shop)
    olga = connect("olga")
    settled = await done(olga.resolve(stored, reason="shipped by hand"))
    assert settled.status is SagaStatus.RESOLVED
    shown = await done(connect("vera").get(stored))
    assert isinstance(shown, views.SagaView)
    assert shown.status is SagaStatus.RESOLVED
    with pytest.raises(SagaNotParked):
        await done(olga.resolve(stored, reason="twice"))


async def dead_letter(served: Served, connect: Connect, shop: CommerceApp) -> views.DeadLetterRow:
    """A checkout whose charge is refused and whose stock release is refused too: its
    undo waits as a dead letter."""
    order = f"dl-{new()[-8:]}"
    served.open_order(order)
    saga_id = (await done(connect("bot").submit(checkout(order)))).saga_id
    stored = served.stored_id(saga_id)
    shop.services.faults.next("charge", Fault.PERMANENT).always("release", Fault.PERMANENT)
    assert (await served.run(stored)).status is SagaStatus.COMPENSATION_FAILED
    shop.services.faults.clear()  # the warehouse is back
    [letter] = [d for d in await done(connect("vera").dead_letters()) if d.saga_id == stored]
    return letter


async def test_a_dead_letter_listed_retried_and_resolved(
    served: Served, connect: Connect, shop: CommerceApp
) -> None:
    first = await dead_letter(served, connect, shop)
    second = await dead_letter(served, connect, shop)
    vera, olga = connect("vera"), connect("olga")
    assert isinstance(first, views.DeadLetterRow)
    assert (first.status, first.step_name) == ("open", "reserve_stock")
    listed = await done(vera.dead_letters(page_size=1))  # every page, oldest first
    ids = [d.id for d in listed]
    assert ids == sorted(ids)
    assert {first.id, second.id} <= set(ids)
    retried = await done(olga.retry_dead_letter(first.id))
    assert isinstance(retried, views.Retried)
    assert (retried.dead_letter_id, retried.status, retried.noted) == (first.id, "open", True)
    resolved = await done(olga.resolve_dead_letter(second.id, reason="released in the WMS"))
    assert isinstance(resolved, views.Resolved)
    assert (resolved.dead_letter_id, resolved.by) == (second.id, "olga")
    done_by_hand = await done(vera.dead_letters(status="resolved"))
    [row] = [d for d in done_by_hand if d.id == second.id]
    assert row.resolution == "released in the WMS"
    assert second.id not in [d.id for d in await done(vera.dead_letters())]
    with pytest.raises(DeadLetterNotFound) as gone:
        await done(olga.resolve_dead_letter(second.id, reason="twice"))
    assert gone.value.status == 404
    with pytest.raises(DeadLetterNotFound):
        await done(olga.retry_dead_letter(2**40))


async def escalate(served: Served) -> int:
    """An escalation in the server's ledger: a request no planner turned into a plan."""
    request = PlanRequest(text="make it right", context={"order_id": "4471"}, catalogue="checkout")
    credit = {"steps": [{"name": "teleport", "args": {}}]}
    app = create_app(served.commerce)
    try:
        run = await propose_plan(
            request, ScriptedPlanner([credit] * 3), app.catalogue("checkout"), run_id=new()
        )
    finally:
        app.services.close()
    run = run.model_copy(update={"mode": PlanningMode.LIVE, "outcome": PlanningOutcome.ESCALATED})
    async with SQLiteStore(served.ledger) as store:
        opened = await store.escalate(run, "nothing fits", 1.0)
    return opened.id


async def test_an_escalation_listed_and_resolved_with_the_saga_that_settled_it(
    served: Served, connect: Connect
) -> None:
    opened = await escalate(served)
    vera, olga = connect("vera"), connect("olga")
    [row] = [e for e in await done(vera.escalations()) if e.id == opened]
    assert isinstance(row, views.EscalationRow)
    assert (row.status, row.reason) == ("open", "nothing fits")
    closed = await done(olga.resolve_escalation(opened, reason="by hand", saga_id="manual-1"))
    assert isinstance(closed, views.EscalationRow)
    assert (closed.status, closed.resolved_by, closed.saga_id) == ("resolved", "olga", "manual-1")
    assert opened in [e.id for e in await done(vera.escalations(status="all", page_size=1))]
    assert opened not in [e.id for e in await done(vera.escalations())]
    with pytest.raises(EscalationClosed) as twice:
        await done(olga.resolve_escalation(opened, reason="again"))
    assert twice.value.status == 409


FEWER = {"0.quantity": 1, "1.amount": "24.95"}


async def test_a_completed_saga_forked_with_fewer_once(
    served: Served, connect: Connect, shop: CommerceApp
) -> None:
    order = f"fork-{new()[-8:]}"
    served.open_order(order)
    saga_id = (await done(connect("bot").submit(checkout(order)))).saga_id
    stored = served.stored_id(saga_id)
    olga = connect("olga")
    with pytest.raises(SagaNotForkable):  # not finished yet
        await done(olga.fork(stored, changes=FEWER, reason="the customer wants one"))
    assert (await served.run(stored)).status is SagaStatus.COMPLETED
    shop.services.order(  # the customer asks for one: the order system's facts change
        order,
        customer=f"c-{order}",
        amount="24.95",
        lines=[{"sku": "sku-1", "quantity": 1}],
        recipient=f"{order}@example.com",
    )
    forked = await done(olga.fork(stored, changes=FEWER, reason="the customer wants one"))
    assert isinstance(forked, views.Outcome)
    assert forked.saga_id != stored
    again = await done(olga.fork(stored, changes=FEWER, reason="the customer wants one"))
    assert again.saga_id == forked.saga_id  # the same request: the same fork
    shown = await done(olga.get(forked.saga_id))
    assert isinstance(shown, views.SagaView)
    assert shown.plan["steps"][0]["args"]["quantity"] == 1
    assert shown.provenance["forked_from"]["saga_id"] == stored
