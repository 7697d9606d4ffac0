"""Exposure across sagas: a policy with ``across=Window(...)`` counts the other sagas for the
same order still going, or ended within the window (not compensated), so one payment split
over several sagas waits for a person as the whole would."""

from __future__ import annotations

import asyncio
import random
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict

from pivotal import (
    Catalogue,
    ExposurePolicy,
    FakeClock,
    Orchestrator,
    SagaStatus,
    StepContext,
    parse_plan,
)
from pivotal.declarations.exposure import Moves
from pivotal.declarations.identity import MONEY, OrderId
from pivotal.declarations.policy import DAY, Window
from pivotal.examples.commerce import CommerceServices
from pivotal.store import Store


class Pay(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId
    amount: Annotated[Decimal, MONEY]


def payments(window: Window) -> Catalogue:
    """A catalogue that lets a plan charge part of an order: nothing but exposure stops a
    payment split in two."""
    catalogue = Catalogue(
        "payments",
        approval=ExposurePolicy(threshold=150, counted=frozenset({"charge"}), across=window),
    )

    async def refund(args: Any, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=refund, moves=Moves(currency="EUR", per="order_id"))
    async def charge(args: Pay, ctx: StepContext) -> None:
        return None

    @catalogue.pivot()
    async def settle(args: Pay, ctx: StepContext) -> None:
        return None

    return catalogue


def part(order: str, amount: str = "100") -> Any:
    pay = {"order_id": order, "amount": amount}
    return parse_plan(
        {
            "catalogue": "payments",
            "steps": [{"name": "charge", "args": pay}, {"name": "settle", "args": pay}],
        }
    )


@pytest.fixture
def orch(store: Store, clock: FakeClock) -> Orchestrator:
    return Orchestrator(store, payments(Window("order_id")), clock=clock, rng=random.Random(0))


async def test_the_second_part_of_a_split_payment_waits_for_a_person(orch: Orchestrator) -> None:
    first = await orch.execute(part("o-1"), saga_id="first")
    assert first.status is SagaStatus.COMPLETED  # 100: under the threshold
    second = await orch.execute(part("o-1"), saga_id="second")
    assert second.status is SagaStatus.AWAITING_APPROVAL
    assert second.approval is not None
    assert "with 100 in 1 other saga for the same order_id" in second.approval.reason
    other = await orch.execute(part("o-2"), saga_id="another-order")
    assert other.status is SagaStatus.COMPLETED


async def test_a_saga_in_flight_counts_and_a_compensated_one_does_not(
    orch: Orchestrator,
) -> None:
    await orch.submit(part("o-1"), saga_id="in-flight")  # recorded, not yet run
    waiting = await orch.execute(part("o-1"), saga_id="second")
    assert waiting.status is SagaStatus.AWAITING_APPROVAL
    undone = await orch.reject("second", "ops-lead", "a double payment")
    assert undone.status is SagaStatus.COMPENSATED
    third = await orch.execute(part("o-1"), saga_id="third")  # counts in-flight, not second
    assert third.status is SagaStatus.AWAITING_APPROVAL
    assert third.approval is not None
    assert "1 other saga" in third.approval.reason


async def test_what_ended_before_the_window_no_longer_counts(
    orch: Orchestrator, clock: FakeClock
) -> None:
    assert (await orch.execute(part("o-1"), saga_id="old")).status is SagaStatus.COMPLETED
    clock.advance(DAY + 1)
    assert (await orch.execute(part("o-1"), saga_id="new")).status is SagaStatus.COMPLETED


async def test_two_parts_run_at_once_do_not_both_pass(orch: Orchestrator) -> None:
    states = await asyncio.gather(
        orch.execute(part("o-1"), saga_id="a"), orch.execute(part("o-1"), saga_id="b")
    )
    assert SagaStatus.AWAITING_APPROVAL in {s.status for s in states}


async def test_more_related_sagas_than_the_window_counts_send_it_to_a_person(
    store: Store, clock: FakeClock
) -> None:
    orch = Orchestrator(store, payments(Window("order_id", limit=1)), clock=clock)
    for n in range(2):
        await orch.submit(part("o-1", "1"), saga_id=f"small-{n}")
    state = await orch.execute(part("o-1", "1"), saga_id="third")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert "more than 1 other sagas" in state.approval.reason


class Unreadable:
    """A ledger whose reservations cannot be read."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    async def reservations(self, *args: Any) -> Any:
        raise ConnectionError("the ledger went away")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_exposure_that_cannot_be_read_is_a_person_s_decision(
    store: Store, clock: FakeClock
) -> None:
    orch = Orchestrator(Unreadable(store), payments(Window("order_id")), clock=clock)  # type: ignore[arg-type]
    state = await orch.execute(part("o-1", "1"), saga_id="small")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert "could not be read (ConnectionError" in state.approval.reason


# -- the bundled checkout counts other sagas of the order ------------------------------------


def checkout_of(order: str, amount: str) -> Any:
    return parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "name": "reserve_stock",
                    "args": {"order_id": order, "sku": "sku-1", "quantity": 1},
                },
                {"name": "charge_payment", "args": {"order_id": order, "amount": amount}},
                {"name": "create_shipment", "args": {"order_id": order}},
            ],
        }
    )


async def test_a_second_checkout_of_an_order_waits_before_it_charges(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    services.order("o-100", customer="c-1", amount="100", sku="sku-1", quantity=1)
    await orchestrator.submit(checkout_of("o-100", "100"), saga_id="first")
    second = await orchestrator.execute(checkout_of("o-100", "100"), saga_id="second")
    assert second.status is SagaStatus.AWAITING_APPROVAL
    assert second.approval is not None
    assert second.steps[second.approval.step].name == "charge_payment"
    assert services.rows("payments") == []  # nothing charged, nothing irreversible done
    # the first counts the second, which still waits: a person sees both
    assert (await orchestrator.run("first")).status is SagaStatus.AWAITING_APPROVAL
    first = await orchestrator.approve("first", "ops-lead", "the customer's order")
    assert first.status is SagaStatus.COMPLETED
    # approved now, the second's charge finds the order paid: it is undone, not charged
    late = await orchestrator.approve("second", "ops-lead", "looks fine")
    assert late.status is SagaStatus.COMPENSATED
    assert len(services.rows("payments", status="charged")) == 1
