"""The commerce example's apology: driven by the ``saga.compensated`` outbox message, sent
once per message however often it is delivered, and never by an undo."""

from __future__ import annotations

from typing import Any

import pytest

from pivotal import EventType, FakeClock, Orchestrator, SagaStatus, parse_plan
from pivotal.examples.commerce import CommerceServices, Fault, Faults
from pivotal.examples.commerce.apology import (
    APOLOGY_TRIGGER,
    TEMPLATE,
    ApologyError,
    ApologySender,
    apology_key,
)
from pivotal.operations.relay import CallableSink, Relay
from pivotal.sagas.outbox import Message
from pivotal.store import Store


def apologies(services: CommerceServices) -> list[dict[str, Any]]:
    return services.rows("emails", template=TEMPLATE)


async def the_message(store: Store, saga_id: str, kind: str = APOLOGY_TRIGGER) -> Message:
    [found] = [m for m in await store.messages(saga_id=saga_id) if m.type == kind]
    return found


def relay(store: Store, sender: ApologySender, clock: FakeClock) -> Relay:
    sink = CallableSink(sender, types={APOLOGY_TRIGGER})
    return Relay(store, [sink], clock=clock, timeout=5.0)


@pytest.fixture
async def declined(
    orchestrator: Orchestrator, faults: Faults, fulfilment_plan: Any, services: CommerceServices
) -> str:
    """Order 4490 rolled back: the authorisation is declined, the reservation released."""
    faults.next("authorize", Fault.PERMANENT)
    state = await orchestrator.execute(fulfilment_plan(), saga_id="declined")
    assert state.status is SagaStatus.COMPENSATED
    return state.saga_id


async def test_the_compensation_itself_writes_nothing_to_the_customer(
    declined: str, store: Store, services: CommerceServices
) -> None:
    assert services.calls("email") == []  # the undo released stock; it never wrote
    assert services.calls("release") != []
    events = await store.events(declined)
    undos = [e for e in events if e.type is EventType.UNDO_SUCCEEDED]
    assert undos
    assert all("messages" not in e.data for e in undos)  # no undo publishes anything
    message = await the_message(store, declined)
    assert message.id == f"{declined}:{events[-1].seq}"  # committed with the compensation
    assert message.status == "pending"


async def test_one_apology_per_message_however_often_it_comes(
    declined: str, store: Store, services: CommerceServices
) -> None:
    message = await the_message(store, declined)
    sender = ApologySender(store, services)
    await sender(message)
    await sender(message)  # a redelivery: same id
    [email] = apologies(services)
    assert email["recipient"] == "ana@example.com"  # the order system's address
    assert email["order_id"] == "4490"
    assert email["key"] == apology_key(message.id) == f"apology:{message.id}"
    assert [a.sent for a in sender.handled] == [True, False]
    assert sender.handled[1].note == "sent before: this delivery is a repeat"
    assert sender.sent[0].reason is not None
    assert sender.sent[0].reason.startswith("authorize_payment (step 1) failed")
    # a second handler (another relay process) sends nothing more either
    await ApologySender(store, services)(message)
    assert len(apologies(services)) == 1
    assert services.effects_per_key()[apology_key(message.id)] == 1


async def test_the_relay_delivers_it_and_a_replay_sends_nothing_more(
    declined: str, store: Store, services: CommerceServices, clock: FakeClock
) -> None:
    sender = ApologySender(store, services)
    done = await relay(store, sender, clock).run(until_idle=True, poll=0.0)
    assert done.failed == done.dead == 0
    assert [a.saga_id for a in sender.sent] == [declined]
    message = await the_message(store, declined)
    assert (await store.messages(saga_id=declined, status="delivered"))[-1].id == message.id
    assert await store.replay_message(message.id, clock.now())  # an operator replays it
    await relay(store, sender, clock).run(until_idle=True, poll=0.0)
    assert len(sender.handled) == 2
    assert len(apologies(services)) == 1


async def test_a_failed_send_is_retried_by_the_relay_with_the_same_key(
    declined: str, store: Store, services: CommerceServices, clock: FakeClock, faults: Faults
) -> None:
    faults.next("email", Fault.TRANSIENT, Fault.TIMEOUT_AFTER_EFFECT)
    sender = ApologySender(store, services)
    first = await relay(store, sender, clock).run(until_idle=True, poll=0.0)
    assert first.failed == 1
    for _ in range(2):  # the retry is due later; its email went out, its reply was lost
        clock.advance(3600)
        await relay(store, sender, clock).run(until_idle=True, poll=0.0)
    message = await the_message(store, declined)
    keys = [c["key"] for c in services.calls("email")]
    assert keys == [apology_key(message.id)] * 2
    assert len(apologies(services)) == 1
    assert sender.handled[-1].note == "sent before: this delivery is a repeat"
    assert (await store.messages(saga_id=declined))[-1].status == "delivered"


async def test_a_compensation_that_failed_apologises_only_once_it_is_compensated(
    orchestrator: Orchestrator,
    store: Store,
    services: CommerceServices,
    faults: Faults,
    clock: FakeClock,
    checkout_plan: Any,
) -> None:
    faults.next("ship", Fault.PERMANENT).always("release", Fault.TRANSIENT)
    order = ("charge_payment", "reserve_stock", "create_shipment")
    # the seeded order 4472 (one lamp from B, 90: under the approval threshold)
    plan = checkout_plan("4472", amount="90", sku="lamp", quantity=1, warehouse="B", order=order)
    state = await orchestrator.execute(plan, saga_id="stuck")
    assert state.status is SagaStatus.COMPENSATION_FAILED
    sender = ApologySender(store, services)
    await relay(store, sender, clock).run(until_idle=True, poll=0.0)
    assert sender.handled == []  # saga.compensation_failed is not an apology
    assert apologies(services) == []

    faults.clear()
    [letter] = await store.dead_letters("open")
    # the release's last try may land until its deadline: the retry waits for it
    until = state.steps[letter.step].undo_doubt_until
    assert until is not None
    assert not await orchestrator.retry_dead_letter(letter.id)
    clock.advance(until - clock.now())
    assert await orchestrator.retry_dead_letter(letter.id)
    assert (await orchestrator.get("stuck")).state.status is SagaStatus.COMPENSATED
    await relay(store, sender, clock).run(until_idle=True, poll=0.0)
    [email] = apologies(services)
    # no confirmation step in this plan: the order system's address for order 4472
    assert email["recipient"] == "customer-4472@example.com"
    assert sender.sent[0].reason is not None
    assert "every dead letter has since been settled" in sender.sent[0].reason


async def test_an_order_with_no_address_on_record_gets_none_invented(
    orchestrator: Orchestrator,
    store: Store,
    services: CommerceServices,
    faults: Faults,
) -> None:
    # an open order the order system has no address for (the checkout_plan fixture would
    # give it one): two of sku-1 for 49.90
    services.order("o-unknown", customer="c-o-unknown", amount="49.90", sku="sku-1", quantity=2)
    plan = parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "name": "reserve_stock",
                    "args": {"order_id": "o-unknown", "sku": "sku-1", "quantity": 2},
                },
                {"name": "charge_payment", "args": {"order_id": "o-unknown", "amount": "49.90"}},
                {"name": "create_shipment", "args": {"order_id": "o-unknown"}},
            ],
        }
    )
    faults.next("charge", Fault.PERMANENT)
    await orchestrator.execute(plan, saga_id="nobody")
    sender = ApologySender(store, services)
    await sender(await the_message(store, "nobody"))
    assert apologies(services) == []
    [skipped] = sender.handled
    assert not skipped.sent
    assert skipped.note == "not sent: no address on record for order o-unknown"


async def test_other_messages_are_not_its_business(
    orchestrator: Orchestrator, store: Store, services: CommerceServices, declined: str
) -> None:
    sender = ApologySender(store, services)
    services.order(  # an open order of one sku-1 for 5
        "o-9", customer="c-o-9", amount="5", sku="sku-1", quantity=1, recipient="o-9@example.com"
    )
    completed = parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "name": "reserve_stock",
                    "args": {"order_id": "o-9", "sku": "sku-1", "quantity": 1},
                },
                {"name": "charge_payment", "args": {"order_id": "o-9", "amount": "5"}},
            ],
        }
    )
    await orchestrator.execute(completed, saga_id="fine")
    await sender(await the_message(store, "fine", "saga.completed"))
    message = await the_message(store, declined)
    other = Message(
        id="x:1",
        saga_id=declined,
        type=APOLOGY_TRIGGER,
        payload={**message.payload, "catalogue": "billing"},
        created_at=message.created_at,
    )
    await sender(other)
    assert sender.handled == []
    assert services.calls("email") == []


async def test_a_message_whose_saga_is_gone_fails_the_delivery(
    store: Store, services: CommerceServices
) -> None:
    ghost = Message(
        id="ghost:9",
        saga_id="ghost",
        type=APOLOGY_TRIGGER,
        payload={"catalogue": "checkout", "reason": "?"},
        created_at=0.0,
    )
    with pytest.raises(ApologyError, match="ghost"):
        await ApologySender(store, services)(ghost)


async def test_the_apology_goes_where_the_order_system_says_at_send_time(
    declined: str, store: Store, services: CommerceServices
) -> None:
    # the customer changed the order's address after the plan was made (the re-check may
    # well be what rolled it back): the plan's old address is not written to
    facts = services.order_facts("4490")
    assert facts["recipient"] == "ana@example.com"
    details = {k: v for k, v in facts.items() if k not in ("customer", "customer_tier")}
    details.pop("order_status")
    details["recipient"] = "ana.new@example.com"
    services.order("4490", customer=facts["customer"], **details)
    sender = ApologySender(store, services)
    await sender(await the_message(store, declined))
    [email] = apologies(services)
    assert email["recipient"] == "ana.new@example.com"


async def test_the_confirmation_goes_where_the_order_system_says_at_send_time(
    store: Store, app: Any, clock: FakeClock, services: CommerceServices, fulfilment_plan: Any
) -> None:
    plan = fulfilment_plan("4491")
    facts = services.order_facts("4491")
    details = {k: v for k, v in facts.items() if k not in ("customer", "customer_tier")}
    details.pop("order_status")

    def moved(point: Any, index: int) -> None:
        # the customer changes the address once the capture is made, past every re-check
        if point.value == "after_intent" and index == 4:
            services.order("4491", customer=facts["customer"], **details | {"recipient": "b@x.io"})

    orch = Orchestrator(store, app, clock=clock, hook=moved)
    state = await orch.execute(plan, saga_id="moved")
    assert state.status is SagaStatus.COMPLETED
    [email] = services.rows("emails", order_id="4491")
    assert email["recipient"] == "b@x.io"
