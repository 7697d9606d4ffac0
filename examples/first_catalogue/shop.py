# examples/first_catalogue/shop.py
"""A first catalogue: hold a card payment, capture it, email the receipt."""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

from fakeshop import FakeServices
from pydantic import BaseModel, Field

from pivotal import App, Catalogue, StepContext, ThresholdPolicy
from pivotal.rules import Agree, Required, RequiresEarlier


class Payment(BaseModel):
    order_id: str
    amount: Decimal = Field(gt=0, le=500)  # bounds live in the schema, not in a prompt


class Receipt(BaseModel):
    order_id: str
    email: str


def create_app(services: FakeServices | None = None) -> App:
    """The shop's catalogue bound to its services (by default the fakes, keeping their state
    in $SHOP_STATE, else shop.db)."""
    svc = services or FakeServices(os.environ.get("SHOP_STATE", "shop.db"))
    payments = Catalogue(
        "payments",
        "Take a card payment for an order, then send the receipt.",
        approval=ThresholdPolicy(threshold=150),  # a capture above 150 waits for a person
        rules=[
            Required("capture_payment"),
            RequiresEarlier("capture_payment", "hold_payment"),
            Agree("order_id"),
        ],
    )

    async def find(args: BaseModel, ctx: StepContext) -> dict[str, Any] | None:
        # after a crash mid-call, recovery asks whether the call made with ctx.key took effect
        return svc.find(ctx.key)

    @payments.compensable(lookup=find)
    async def hold_payment(args: Payment, ctx: StepContext) -> dict[str, Any]:
        """Hold the amount on the customer's card."""
        return svc.hold(args.order_id, args.amount, key=ctx.key)

    @hold_payment.undo
    async def release_hold(args: Payment, result: dict[str, Any] | None, ctx: StepContext) -> str:
        # result is None when the hold's outcome is unknown: find it by ctx.action_key
        reply = svc.release(hold_key=ctx.action_key, key=ctx.key)
        return "hold released" if reply["released"] else "no hold to release"

    @payments.pivot(lookup=find)
    async def capture_payment(args: Payment, ctx: StepContext) -> dict[str, Any]:
        """Capture the held amount: the point of no return."""
        return svc.capture(args.order_id, args.amount, key=ctx.key)

    @payments.retriable(lookup=find)
    async def send_receipt(args: Receipt, ctx: StepContext) -> dict[str, Any]:
        """Email the receipt; it cannot be unsent, so it comes after the capture."""
        return svc.email(args.email, key=ctx.key)

    return App([payments], name="shop")
