"""Random plans from the fulfilment catalogue are refused, or, run against the example
services, leave the providers in a state that keeps every rule of the catalogue."""

from __future__ import annotations

import asyncio
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus, SQLiteStore, parse_plan, validate
from pivotal.examples.commerce import CommerceServices, create_app

ORDERS = ("4471", "4490")  # the order system: 4471 totals 180, 4490 totals 120.00
AMOUNTS = ("180", "120.00", "18", "1800", "180.00")

TOTALS = {"4471": "180", "4490": "120.00"}
RECIPIENTS = {"4471": "customer-4471@example.com", "4490": "ana@example.com"}


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    """Mostly well-formed fulfilments of one order, often bent: another order here and there,
    an amount off, a step left out or out of place."""
    order = draw(st.sampled_from(ORDERS))
    other = draw(st.sampled_from(ORDERS))

    def order_id() -> str:
        return draw(st.sampled_from([order, order, order, order, other]))

    def money() -> str:
        return draw(st.sampled_from([TOTALS[order]] * 4 + list(AMOUNTS)))

    amount = money()
    recipient = draw(st.sampled_from([RECIPIENTS[order]] * 3 + list(RECIPIENTS.values())))
    captured = draw(st.sampled_from([amount, money()]))
    wanted = [
        ("reserve_stock", {"order_id": order_id(), "sku": "lamp", "quantity": 1}),
        ("authorize_payment", {"order_id": order_id(), "amount": amount}),
        ("capture_payment", {"order_id": order_id(), "amount": captured}),
        ("create_shipment", {"order_id": order_id()}),
        ("send_confirmation", {"order_id": order_id(), "recipient": recipient}),
    ]  # fmt: skip
    payment = ("authorize_payment", "capture_payment")
    steps = [
        {"name": name, "args": args}
        for name, args in wanted
        if draw(st.integers(0, 3)) > 0 or (name not in payment and draw(st.booleans()))
    ]
    if len(steps) > 1 and draw(st.integers(0, 5)) == 0:
        steps = draw(st.permutations(steps))
    if steps and draw(st.integers(0, 7)) == 0:
        steps.append(draw(st.sampled_from(steps)))  # a call twice
    if not steps:
        steps = [{"name": "create_shipment", "args": {"order_id": order}}]
    return parse_plan({"catalogue": "fulfilment", "steps": steps})


def honoured(services: CommerceServices) -> list[str]:
    """Every way the providers' own state breaks a rule of the fulfilment catalogue."""
    broken = []
    payments = services.rows("payments")
    captured = {p["order_id"]: p for p in payments if p["kind"] == "capture"}
    authorized = [p for p in payments if p["kind"] == "authorization"]
    for shipment in services.rows("shipments"):
        if shipment["order_id"] not in captured:
            broken.append(f"order {shipment['order_id']} shipped without a capture")
    for email in services.rows("emails"):
        if email["order_id"] not in captured:
            broken.append(f"order {email['order_id']} confirmed without a capture")
    if len([p for p in payments if p["kind"] == "capture"]) > 1:
        broken.append("captured more than once")
    for order_id, capture in captured.items():
        facts = services.order_facts(order_id)
        if Decimal(capture["amount"]) != Decimal(str(facts["amount"])):
            broken.append(f"order {order_id} captured {capture['amount']}, not its total")
        if not any(Decimal(a["amount"]) == Decimal(capture["amount"]) for a in authorized):
            broken.append(f"order {order_id} captured more than was authorised")
    orders = {r["order_id"] for table in ("reservations", "payments", "shipments") for r in
              services.rows(table)}  # fmt: skip
    if len(orders) > 1:
        broken.append(f"one plan touched several orders: {sorted(orders)}")
    return broken


async def run(plan: Plan) -> tuple[list[str], list[str]]:
    """(validation errors, broken rules after running the plan)."""
    app = create_app(":memory:")
    app.services.order(
        "4490", customer="c-4490", amount="120.00", sku="lamp", recipient=RECIPIENTS["4490"]
    )
    try:
        errors = validate(plan, app.catalogue("fulfilment"), facts=app.facts)
        if errors:
            return [e.code.value for e in errors], []
        async with SQLiteStore(":memory:") as store:
            orchestrator = Orchestrator(store, app, clock=FakeClock())
            state = await orchestrator.execute(plan, saga_id="p")
            if state.status is SagaStatus.AWAITING_APPROVAL:
                state = await orchestrator.approve("p", "approver")
            assert state.status.terminal
        return [], honoured(app.services)
    finally:
        app.services.close()


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(plan=plans())
def test_a_random_plan_is_refused_or_keeps_every_rule_in_the_providers(plan: Plan) -> None:
    errors, broken = asyncio.run(run(plan))
    assert errors or not broken, broken


def test_the_strategy_reaches_both_outcomes() -> None:
    """The property above is not vacuous: some plans are accepted and run, some refused."""
    accepted = parse_plan(
        {
            "catalogue": "fulfilment",
            "steps": [
                {
                    "name": "reserve_stock",
                    "args": {"order_id": "4490", "sku": "lamp", "quantity": 1},
                },
                {"name": "authorize_payment", "args": {"order_id": "4490", "amount": "120"}},
                {"name": "capture_payment", "args": {"order_id": "4490", "amount": "120.00"}},
                {"name": "create_shipment", "args": {"order_id": "4490"}},
            ],
        }
    )
    errors, broken = asyncio.run(run(accepted))
    assert (errors, broken) == ([], [])
    two_orders = accepted.model_copy(
        update={"steps": [*accepted.steps[:3], parse_plan(
            {"catalogue": "fulfilment", "steps": [
                {"name": "create_shipment", "args": {"order_id": "4471"}}]}
        ).steps[0]]}
    )  # fmt: skip
    errors, _ = asyncio.run(run(two_orders))
    assert errors == ["arguments_disagree"]
