# examples/first_catalogue/shop.py
"""A first catalogue: hold a card payment, capture it, email the receipt."""

from __future__ import annotations

import os
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any

from fakeshop import FakeServices
from pydantic import BaseModel, Field

from pivotal import App, Catalogue, Moves, StepContext, ThresholdPolicy
from pivotal.declarations.identity import MONEY, Email, OrderId
from pivotal.declarations.policy import Window
from pivotal.declarations.rules import Agree, AtMost, FromFact, Required, RequiresEarlier


class Payment(BaseModel):
    order_id: OrderId  # an entity: one spelling ("4471", never "4471 ")
    amount: Annotated[Decimal, MONEY] = Field(gt=0, le=500)  # bounds live in the schema


class Receipt(BaseModel):
    order_id: OrderId
    email: Email  # one address: nothing that could add a header or a recipient


class Shop(App):
    """The shop's catalogue, and what its order system says about an order."""

    def __init__(self, catalogue: Catalogue, services: FakeServices) -> None:
        super().__init__([catalogue], name="shop")
        self.services = services

    def facts(self, context: Mapping[str, object]) -> dict[str, object]:
        return self.services.order(str(context.get("order_id", "")))


def create_app(services: FakeServices | None = None) -> App:
    """The shop's catalogue bound to its services (by default the fakes, keeping their state
    in $SHOP_STATE, else shop.db)."""
    svc = services or FakeServices(os.environ.get("SHOP_STATE", "shop.db"))
    payments = Catalogue(
        "payments",
        "Take a card payment for an order, then send the receipt.",
        # a capture taking the order over 150 EUR waits for a person, counting what the
        # ledger holds reserved for the same order by other sagas over the last day, in
        # any catalogue (one payment split in two still waits)
        approval=ThresholdPolicy(threshold=150, currency="EUR", across=Window("order_id")),
        rules=[
            Required("capture_payment"),
            RequiresEarlier("capture_payment", "hold_payment"),
            AtMost("hold_payment"),  # every step moving value: at most once per plan
            AtMost("capture_payment"),
            AtMost("send_receipt"),
            Agree("order_id"),
            FromFact("amount"),  # the hold and the capture: the order's total
            FromFact("email", steps=["send_receipt"]),  # the receipt: the order's customer
        ],
        # every amount and id above is bound, and every step moving value bounded
        # (AtMost), or the app does not load
        unbound="refuse",
    )

    async def find(args: BaseModel, ctx: StepContext) -> dict[str, Any] | None:
        # after a crash mid-call, recovery asks whether the call made with ctx.key took effect
        return svc.find(ctx.key)

    def unpaid(args: Payment) -> str | None:
        status = svc.order(args.order_id).get("status")
        return None if status == "open" else f"order {args.order_id} is {status or 'unknown'}"

    @payments.compensable(lookup=find)
    async def hold_payment(args: Payment, ctx: StepContext) -> dict[str, Any]:
        """Hold the amount on the customer's card."""
        return svc.hold(args.order_id, args.amount, key=ctx.key)

    @hold_payment.undo
    async def release_hold(args: Payment, result: dict[str, Any] | None, ctx: StepContext) -> str:
        # result is None when the hold's outcome is unknown: find it by ctx.action_key
        reply = svc.release(hold_key=ctx.action_key, key=ctx.key)
        return "hold released" if reply["released"] else "no hold to release"

    # the value it takes: its amount, in euros, for its order (counted per order, below)
    @payments.pivot(lookup=find, precondition=unpaid, moves=Moves(currency="EUR", per="order_id"))
    async def capture_payment(args: Payment, ctx: StepContext) -> dict[str, Any]:
        """Capture the held amount: the point of no return."""
        return svc.capture(args.order_id, args.amount, key=ctx.key)

    @payments.retriable(lookup=find)
    async def send_receipt(args: Receipt, ctx: StepContext) -> dict[str, Any]:
        """Email the receipt; it cannot be unsent, so it comes after the capture."""
        return svc.email(args.email, key=ctx.key)

    return Shop(payments, svc)
