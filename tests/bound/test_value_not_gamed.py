"""Value that cannot be gamed, and one spelling for every identity: a negative amount never
lowers what is counted, digits of another script never make another customer, and a name
that draws the same as another is that person."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Annotated

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from pivotal import (
    Catalogue,
    ExposurePolicy,
    FakeClock,
    Orchestrator,
    PlanRejected,
    SagaStatus,
    StepContext,
    parse_plan,
)
from pivotal.declarations.exposure import Moves
from pivotal.declarations.identity import (
    MONEY,
    NEGATIVE_MONEY,
    SIGNED_MONEY,
    CustomerId,
    canonical_text,
)
from pivotal.declarations.plan import Plan
from pivotal.declarations.policy import Window
from pivotal.errors import InvalidInput, PlanParseError
from pivotal.people.principals import MAX_PERSON, _canonical, canonical_person
from pivotal.store import Store


class Amount(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: CustomerId
    amount: Annotated[Decimal, MONEY]


class Adjustment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: CustomerId
    amount: Annotated[Decimal, SIGNED_MONEY]  # below 0: the customer owes less


def refunds(paid: list[tuple[str, str, Decimal]], *, across: Window | None = None) -> Catalogue:
    """Adjust what a customer owes, then refund them; a person approves above 150 EUR."""
    catalogue = Catalogue("refunds", approval=ExposurePolicy(threshold=150, across=across))

    @catalogue.compensable(moves=Moves(currency="EUR", per="customer"))
    async def adjust(args: Adjustment, ctx: StepContext) -> None:
        """Adjust the customer's balance."""
        paid.append(("adjust", args.customer, args.amount))

    @adjust.undo
    async def _(args: Adjustment, ctx: StepContext) -> None:
        paid.append(("unadjust", args.customer, args.amount))

    @catalogue.pivot(moves=Moves(currency="EUR", per="customer"))
    async def refund(args: Amount, ctx: StepContext) -> None:
        """Refund the customer."""
        paid.append(("refund", args.customer, args.amount))

    return catalogue


def plan(*steps: tuple[str, str, str]) -> Plan:
    return parse_plan(
        {
            "catalogue": "refunds",
            "steps": [
                {"name": name, "args": {"customer": customer, "amount": amount}}
                for name, customer, amount in steps
            ],
        }
    )


def test_an_amount_of_money_below_0_is_refused_where_its_argument_is_not_signed() -> None:
    with pytest.raises(ValidationError) as refused:
        Amount(customer="c-1", amount=Decimal("-300"))
    assert refused.value.errors()[0]["type"] == NEGATIVE_MONEY
    assert Adjustment(customer="c-1", amount=Decimal("-300")).amount == Decimal("-300")


async def test_a_refund_beside_a_negative_amount_still_waits_for_a_person(
    store: Store, clock: FakeClock
) -> None:
    paid: list[tuple[str, str, Decimal]] = []
    orch = Orchestrator(store, refunds(paid), clock=clock, rng=random.Random(0))
    with pytest.raises(PlanRejected) as refused:  # a refund of -300 is not money coming back
        await orch.execute(plan(("refund", "c-1", "-300"), ("refund", "c-1", "400")))
    assert "cannot be below 0" in refused.value.errors[0].message

    # a signed adjustment of -300 is not netted against the refund of 400: 400 goes out
    state = await orch.execute(plan(("adjust", "c-1", "-300"), ("refund", "c-1", "400")))

    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert paid == [("adjust", "c-1", Decimal("-300"))]


async def test_a_negative_amount_in_one_saga_lowers_nothing_in_the_next(
    store: Store, clock: FakeClock
) -> None:
    paid: list[tuple[str, str, Decimal]] = []
    catalogue = refunds(paid, across=Window("customer"))
    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    first = await orch.execute(plan(("adjust", "c-1", "-1000")), saga_id="first")
    assert first.status is SagaStatus.COMPLETED

    second = await orch.execute(plan(("refund", "c-1", "900")), saga_id="second")

    assert second.status is SagaStatus.AWAITING_APPROVAL
    assert ("refund", "c-1", Decimal("900")) not in paid


@pytest.mark.parametrize(
    "written", ["c-\u0661", "c-\u0967", "c-\u09e7", "c-\u0e51", "c-\U0001d7cf"]
)  # Arabic-Indic, Devanagari, Bengali, Thai, mathematical
def test_a_digit_of_another_script_is_not_another_customer(written: str) -> None:
    assert canonical_text(written) == "c-1"
    with pytest.raises(ValidationError) as refused:
        Amount(customer=written, amount=Decimal(1))
    assert refused.value.errors()[0]["type"] == "not_canonical"
    assert "use 'c-1'" in refused.value.errors()[0]["msg"]


async def test_a_customer_in_other_digits_is_refused_not_counted_apart(
    store: Store, clock: FakeClock
) -> None:
    paid: list[tuple[str, str, Decimal]] = []
    catalogue = refunds(paid, across=Window("customer"))
    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    first = await orch.execute(plan(("refund", "c-1", "100")), saga_id="first")
    assert first.status is SagaStatus.COMPLETED

    with pytest.raises(PlanRejected) as refused:  # 100 + 100 to one customer, nobody asked
        await orch.execute(plan(("refund", "c-\u0661", "100")), saga_id="second")

    assert [e.code.value for e in refused.value.errors] == ["not_canonical"]
    assert paid == [("refund", "c-1", Decimal("100"))]
    assert await store.load("second") is None


@pytest.mark.parametrize("blank", ["\u2800", "\u3164", "\u115f", "\u1160", "\uffa0", "\U0001d159"])
def test_a_character_that_draws_as_nothing_makes_no_other_person(blank: str) -> None:
    assert canonical_person(f"olga{blank}") == canonical_person("olga")
    assert canonical_person(f"ol{blank}ga") == canonical_person("olga")
    assert canonical_person(blank) == ""


def test_digits_of_another_script_make_no_other_person() -> None:
    assert canonical_person("agent-\u0662") == canonical_person("agent-2")


def test_a_name_is_bounded_and_a_long_one_is_not_kept() -> None:
    with pytest.raises(PlanParseError, match="on_behalf_of"):
        parse_plan(
            {
                "catalogue": "refunds",
                "steps": [{"name": "refund", "args": {"customer": "c-1", "amount": "1"}}],
                "provenance": {"on_behalf_of": "o" * (MAX_PERSON + 1)},
            }
        )
    before = _canonical.cache_info().currsize
    assert canonical_person("olga" * 25_000) == canonical_person("OLGA" * 25_000)
    assert _canonical.cache_info().currsize == before


async def test_a_person_acting_with_a_name_over_the_bound_is_refused_and_nothing_changes(
    store: Store, clock: FakeClock
) -> None:
    paid: list[tuple[str, str, Decimal]] = []
    orch = Orchestrator(store, refunds(paid), clock=clock, rng=random.Random(0))
    state = await orch.execute(plan(("refund", "c-1", "400")), saga_id="s")
    assert state.status is SagaStatus.AWAITING_APPROVAL

    with pytest.raises(InvalidInput, match="at most 200 characters"):
        await orch.approve("s", "olga" * 51, "ok")
    with pytest.raises(InvalidInput, match="at most 200 characters"):
        await orch.abort("s", "olga" * 51, "changed my mind")

    assert (await orch.get("s")).state.status is SagaStatus.AWAITING_APPROVAL
    assert paid == []
