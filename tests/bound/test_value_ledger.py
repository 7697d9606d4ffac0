"""Value as a declared quantity: what a plan moves is read from its parsed, defaulted
arguments, and counted where every policy and the rollout read it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict

from pivotal import (
    App,
    Catalogue,
    CatalogueError,
    ExposurePolicy,
    FakeClock,
    Orchestrator,
    Partial,
    Permanent,
    Rollout,
    SagaStatus,
    StepContext,
    parse_plan,
)
from pivotal.declarations.exposure import Moves
from pivotal.declarations.identity import MONEY, Currency, CustomerId, OrderId
from pivotal.declarations.plan import ActorType, Plan
from pivotal.declarations.policy import ThresholdPolicy, Window
from pivotal.errors import RolloutShadowed
from pivotal.examples.commerce import CommerceServices
from pivotal.store import Store


class Credit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: CustomerId
    amount: Annotated[Decimal, MONEY] = Decimal("300")  # left out, it is 300


def goodwill(credited: list[tuple[str, Decimal]], across: Window | None = None) -> Catalogue:
    """A goodwill credit: a person approves above 150, agents run only what is below 50
    (with ``across``: counting what the ledger holds reserved for the same customer)."""
    catalogue = Catalogue(
        "goodwill",
        approval=ExposurePolicy(threshold=150, across=across),
        rollout=Rollout(execute_below=Decimal("50")),
    )

    @catalogue.pivot(moves=Moves(currency="EUR", per="customer"))
    async def credit(args: Credit, ctx: StepContext) -> None:
        """Credit the customer's account."""
        credited.append((args.customer, args.amount))

    return catalogue


def credit_plan(customer: str, actor: ActorType, **amount: str) -> Plan:
    return parse_plan(
        {
            "catalogue": "goodwill",
            "steps": [{"name": "credit", "args": {"customer": customer, **amount}}],
            "provenance": {"actor_type": actor.value, "actor_id": "someone"},
        }
    )


async def test_a_defaulted_amount_counts_for_the_approval_policy(
    store: Store, clock: FakeClock
) -> None:
    credited: list[tuple[str, Decimal]] = []
    orch = Orchestrator(store, goodwill(credited), clock=clock, rng=random.Random(0))
    state = await orch.execute(credit_plan("c-1", ActorType.HUMAN), saga_id="g")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert credited == []  # 300 waits for a person


async def test_a_defaulted_amount_counts_for_the_rollout(store: Store, clock: FakeClock) -> None:
    credited: list[tuple[str, Decimal]] = []
    orch = Orchestrator(store, goodwill(credited), clock=clock, rng=random.Random(0))
    with pytest.raises(RolloutShadowed):
        await orch.execute(credit_plan("c-1", ActorType.AGENT), saga_id="g")
    assert credited == []
    assert await store.load("g") is None
    small = await orch.execute(credit_plan("c-1", ActorType.AGENT, amount="20"), saga_id="s")
    assert small.status is SagaStatus.COMPLETED
    assert credited == [("c-1", Decimal("20"))]


# -- money is declared: an amount, its currency, the subject it moves value for ---------------


class Transfer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: CustomerId
    amount: Annotated[Decimal, MONEY]
    currency: Currency
    note: str = ""


def transfers(sent: list[tuple[Decimal, str]], **options: Any) -> Catalogue:
    """Send money in the currency the plan names; a person approves above 150 EUR."""
    catalogue = Catalogue("transfers", **options)

    @catalogue.pivot(moves=Moves(currency_arg="currency", per="customer"))
    async def send(args: Transfer, ctx: StepContext) -> None:
        """Send money to the customer."""
        sent.append((args.amount, args.currency))

    return catalogue


def transfer(amount: str, currency: str, actor: ActorType = ActorType.HUMAN) -> Plan:
    args = {"customer": "c-1", "amount": amount, "currency": currency}
    return parse_plan(
        {
            "catalogue": "transfers",
            "steps": [{"name": "send", "args": args}],
            "provenance": {"actor_type": actor.value, "actor_id": "someone"},
        }
    )


async def test_an_amount_in_a_currency_without_a_rate_goes_to_a_person(
    store: Store, clock: FakeClock
) -> None:
    sent: list[tuple[Decimal, str]] = []
    cat = transfers(sent, approval=ExposurePolicy(threshold=150, currency="EUR"))
    orch = Orchestrator(store, App([cat]), clock=clock, rng=random.Random(0))
    state = await orch.execute(transfer("140", "KWD"), saga_id="kwd")  # 140 is not 140 EUR
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert "no rate from KWD to EUR" in state.approval.reason
    assert sent == []
    euros = await orch.execute(transfer("140", "EUR"), saga_id="eur")
    assert euros.status is SagaStatus.COMPLETED
    assert sent == [(Decimal("140"), "EUR")]


async def test_an_amount_is_converted_by_the_apps_rates(store: Store, clock: FakeClock) -> None:
    sent: list[tuple[Decimal, str]] = []
    cat = transfers(sent, approval=ExposurePolicy(threshold=150, currency="EUR"))
    app = App([cat], rates={("KWD", "EUR"): Decimal("3.00")})
    orch = Orchestrator(store, app, clock=clock, rng=random.Random(0))
    big = await orch.execute(transfer("140", "KWD"), saga_id="big")  # 420 EUR
    assert big.status is SagaStatus.AWAITING_APPROVAL
    small = await orch.execute(transfer("40", "KWD"), saga_id="small")  # 120 EUR
    assert small.status is SagaStatus.COMPLETED
    assert sent == [(Decimal("40"), "KWD")]


async def test_the_rollout_holds_back_what_it_cannot_convert(
    store: Store, clock: FakeClock
) -> None:
    sent: list[tuple[Decimal, str]] = []
    cat = transfers(sent, rollout=Rollout(execute_below=Decimal("50"), currency="EUR"))
    orch = Orchestrator(store, App([cat]), clock=clock, rng=random.Random(0))
    with pytest.raises(RolloutShadowed) as held:
        await orch.execute(transfer("10", "KWD", ActorType.AGENT), saga_id="kwd")
    assert "no rate from KWD to EUR" in held.value.detail  # for people; the agent is not told
    assert "KWD" not in held.value.message
    assert sent == []
    assert await store.load("kwd") is None


def test_a_policy_naming_what_no_step_declares_is_refused_when_the_app_is_built() -> None:
    def built(**options: Any) -> None:
        App([transfers([], **options)])

    built(approval=ExposurePolicy(threshold=150, across=Window("customer")))  # declared
    with pytest.raises(CatalogueError, match="'note', which no step it counts declares"):
        built(approval=ExposurePolicy(field="note", threshold=150))
    with pytest.raises(CatalogueError, match=r"per 'note' \(not an entity argument\)"):
        built(approval=ThresholdPolicy(threshold=150, across=Window("note")))
    with pytest.raises(CatalogueError, match="rollout's window counts per 'note'"):
        built(rollout=Rollout(execute_below=Decimal("5"), across=Window("note")))

    undeclared = Catalogue("undeclared", approval=ExposurePolicy(threshold=150))

    @undeclared.pivot()
    async def send(args: Transfer, ctx: StepContext) -> None:
        return None

    with pytest.raises(CatalogueError, match="'amount' is money it does not declare moving"):
        App([undeclared])


def test_a_declaration_naming_what_the_arguments_do_not_declare_is_refused_at_once() -> None:
    cat = Catalogue("bad")

    async def send(args: Transfer, ctx: StepContext) -> None:
        return None

    with pytest.raises(CatalogueError, match="'note' as its amount, which is not an argument"):
        cat.pivot(moves=Moves("note", currency="EUR", per="customer"))(send)
    with pytest.raises(CatalogueError, match="per 'note', which is not an argument naming"):
        cat.pivot(moves=Moves(currency="EUR", per="note"))(send)
    with pytest.raises(CatalogueError, match="'note' as its currency"):
        cat.pivot(moves=Moves(currency_arg="note", per="customer"))(send)
    with pytest.raises(CatalogueError, match="exactly one of the two"):
        Moves(per="customer")
    with pytest.raises(CatalogueError, match="three capital letters"):
        Moves(currency="euro", per="customer")


# -- one ledger of reservations: every policy and the rollout read it ------------------------

PER_CUSTOMER = Window("customer")


class Racing:
    """A ledger whose first two reads of reservations wait for each other once read: two
    submissions for one customer both measure before either is recorded. (Waiting before
    the read raced the other submission's commit on a busy machine: the second read could
    land after the first saga was recorded, and see it.)"""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.waiting: list[asyncio.Event] = []

    async def reservations(self, *args: Any) -> Any:
        rows = await self.inner.reservations(*args)
        if len(self.waiting) < 2:
            mine = asyncio.Event()
            self.waiting.append(mine)
            if len(self.waiting) == 2:
                for event in self.waiting:
                    event.set()
            await mine.wait()
        return rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_two_agent_submissions_racing_for_one_customer_do_not_both_run(
    store: Store, clock: FakeClock
) -> None:
    credited: list[tuple[str, Decimal]] = []
    ledger = Racing(store)
    orch = Orchestrator(ledger, goodwill(credited, PER_CUSTOMER), clock=clock)  # type: ignore[arg-type]
    states = await asyncio.gather(
        orch.execute(credit_plan("c-1", ActorType.AGENT, amount="30"), saga_id="a"),
        orch.execute(credit_plan("c-1", ActorType.AGENT, amount="30"), saga_id="b"),
    )
    assert len(ledger.waiting) == 2  # both measured before either was recorded
    assert len(credited) <= 1  # 60 for one customer never runs unattended
    assert SagaStatus.AWAITING_APPROVAL in {s.status for s in states}


async def test_two_submissions_racing_past_the_approval_threshold_do_not_both_run(
    store: Store, clock: FakeClock
) -> None:
    credited: list[tuple[str, Decimal]] = []
    orch = Orchestrator(store, goodwill(credited, PER_CUSTOMER), clock=clock)
    states = await asyncio.gather(
        orch.execute(credit_plan("c-1", ActorType.HUMAN, amount="100"), saga_id="a"),
        orch.execute(credit_plan("c-1", ActorType.HUMAN, amount="100"), saga_id="b"),
    )
    assert len(credited) <= 1
    assert SagaStatus.AWAITING_APPROVAL in {s.status for s in states}


class Refund(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: CustomerId
    order_id: OrderId
    amount: Annotated[Decimal, MONEY]


def refunds(paid: list[Decimal]) -> Catalogue:
    catalogue = Catalogue(
        "refunds",
        rollout=Rollout(execute_below=Decimal("50"), currency="EUR", across=PER_CUSTOMER),
    )

    @catalogue.pivot(moves=Moves(currency="EUR", per=("customer", "order_id")))
    async def refund(args: Refund, ctx: StepContext) -> None:
        """Pay money back to the customer."""
        paid.append(args.amount)

    return catalogue


def refund_plan(order: str, amount: str) -> Plan:
    args = {"customer": "c-1", "order_id": order, "amount": amount}
    return parse_plan(
        {
            "catalogue": "refunds",
            "steps": [{"name": "refund", "args": args}],
            "provenance": {"actor_type": "agent", "actor_id": "bot"},
        }
    )


async def test_splitting_a_refund_in_three_changes_nothing(store: Store, clock: FakeClock) -> None:
    paid: list[Decimal] = []
    orch = Orchestrator(store, refunds(paid), clock=clock, rng=random.Random(0))
    with pytest.raises(RolloutShadowed):
        await orch.execute(refund_plan("o-1", "139.98"), saga_id="whole")
    first = await orch.execute(refund_plan("o-1", "46.66"), saga_id="part-1")
    assert first.status is SagaStatus.COMPLETED
    for n, order in ((2, "o-2"), (3, "o-3")):  # another order: the same customer
        with pytest.raises(RolloutShadowed):
            await orch.execute(refund_plan(order, "46.66"), saga_id=f"part-{n}")
    assert paid == [Decimal("46.66")]
    assert await store.load("part-2") is None


class Pay(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId
    amount: Annotated[Decimal, MONEY]


class World:
    """Charges and settlements of a payments provider; how much a refund gives back."""

    def __init__(self) -> None:
        self.charged: list[Decimal] = []
        self.settled: list[Decimal] = []
        self.refunded: list[str] = []
        self.partial = False
        self.decline = False


def payments(world: World) -> Catalogue:
    catalogue = Catalogue(
        "payments",
        approval=ExposurePolicy(
            threshold=150, counted=frozenset({"charge"}), across=Window("order_id")
        ),
    )

    async def refund(args: Pay, result: Any, ctx: StepContext) -> str:
        if world.partial:
            world.refunded.append(f"{args.amount - 20:f}")
            return Partial(f"refunded {args.amount - 20:f} of {args.amount:f}: 20 paid out")
        world.refunded.append(f"{args.amount:f}")
        return "refunded"

    @catalogue.compensable(undo=refund, moves=Moves(currency="EUR", per="order_id"))
    async def charge(args: Pay, ctx: StepContext) -> None:
        world.charged.append(args.amount)

    @catalogue.pivot()
    async def settle(args: Pay, ctx: StepContext) -> None:
        if world.decline:
            raise Permanent("the bank declined the settlement")
        world.settled.append(args.amount)

    return catalogue


def pay(order: str, amount: str) -> Plan:
    args = {"order_id": order, "amount": amount}
    steps = [{"name": "charge", "args": args}, {"name": "settle", "args": args}]
    return parse_plan({"catalogue": "payments", "steps": steps})


@pytest.mark.parametrize("partial", [True, False])
async def test_a_partial_undo_keeps_the_reservation_a_full_one_releases_it(
    store: Store, clock: FakeClock, partial: bool
) -> None:
    world = World()
    world.partial, world.decline = partial, True
    orch = Orchestrator(store, payments(world), clock=clock, rng=random.Random(0))
    first = await orch.execute(pay("o-1", "120"), saga_id="first")
    assert first.status is SagaStatus.COMPENSATED
    world.decline = False
    again = await orch.execute(pay("o-1", "100"), saga_id="again")  # the agent retries
    if partial:  # 20 of the 120 stayed out: with 100 more, a person decides
        assert again.status is SagaStatus.AWAITING_APPROVAL
        assert world.settled == []
    else:
        assert again.status is SagaStatus.COMPLETED
        assert world.settled == [Decimal("100")]


async def test_a_saga_that_never_reached_its_effect_releases_its_reservation(
    store: Store, clock: FakeClock
) -> None:
    credited: list[tuple[str, Decimal]] = []
    orch = Orchestrator(store, goodwill(credited, PER_CUSTOMER), clock=clock)
    big = await orch.execute(credit_plan("c-1", ActorType.HUMAN, amount="140"), saga_id="big")
    assert big.status is SagaStatus.COMPLETED
    held = await orch.execute(credit_plan("c-2", ActorType.HUMAN, amount="200"), saga_id="held")
    assert held.status is SagaStatus.AWAITING_APPROVAL
    small = await orch.execute(credit_plan("c-2", ActorType.HUMAN, amount="20"), saga_id="s1")
    assert small.status is SagaStatus.AWAITING_APPROVAL  # 200 is reserved, waiting
    await orch.reject("held", "ops-lead", "too much")
    await orch.reject("s1", "ops-lead", "asked again below")
    again = await orch.execute(credit_plan("c-2", ActorType.HUMAN, amount="20"), saga_id="s2")
    assert again.status is SagaStatus.COMPLETED  # the rejected 200 never moved
    late = await orch.execute(credit_plan("c-1", ActorType.HUMAN, amount="20"), saga_id="s3")
    assert late.status is SagaStatus.AWAITING_APPROVAL  # the 140 that moved still counts
    assert credited == [("c-1", Decimal("140")), ("c-2", Decimal("20"))]


async def test_a_checkout_charge_and_a_fulfilment_capture_of_one_order_see_each_other(
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: Callable[..., Plan],
    fulfilment_plan: Callable[..., Plan],
) -> None:
    order = "4490"  # 120.00
    await orchestrator.submit(checkout_plan(order, amount="120.00", quantity=1), saga_id="co")
    state = await orchestrator.execute(fulfilment_plan(order), saga_id="ff")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert services.calls("capture") == []  # 240 for a 120 order: a person decides
