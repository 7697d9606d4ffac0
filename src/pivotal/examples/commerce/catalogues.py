"""The checkout and fulfilment catalogues over the simulated services."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pivotal.declarations.catalogue import Catalogue, NothingToUndo, Partial, StepContext
from pivotal.declarations.exposure import Moves
from pivotal.declarations.identity import MONEY, Email, Identity, OrderId, Sku
from pivotal.declarations.plan import Plan
from pivotal.declarations.policy import ExposurePolicy, ThresholdPolicy, Window
from pivotal.declarations.retry import RetryPolicy
from pivotal.declarations.rules import (
    Agree,
    AtMost,
    Free,
    FromFact,
    FromFactRows,
    PlanRule,
    Required,
    RequiresEarlier,
)
from pivotal.examples.commerce.services import CommerceServices

Amount = Annotated[Decimal, MONEY]
# The value a payment takes: its amount, in its currency, for its order. Declared on the
# steps that take money (the charge, the capture), not on a hold that lapses on its own.
PAYS = Moves("amount", currency_arg="currency", per=("order_id",))
Money = Field(gt=0, le=500, max_digits=9, decimal_places=2, description="At most 500.")
Warehouse = Annotated[str, Field(pattern=r"^[A-Z]$"), Identity("warehouse", fold="upper")]
CurrencyCode = Annotated[Literal["EUR", "USD"], Identity("currency", fold="upper")]
ABOUT = ("order_id", "customer")  # what a request for either catalogue is about


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ReserveStock(_Args):
    order_id: OrderId
    sku: Sku
    quantity: int = Field(ge=1, le=100)
    warehouse: Warehouse = "A"


class Payment(_Args):
    order_id: OrderId
    amount: Amount = Money
    currency: CurrencyCode = "EUR"


class CreateShipment(_Args):
    order_id: OrderId
    warehouse: Warehouse = "A"


class SendConfirmation(_Args):
    order_id: OrderId
    recipient: Email
    template: Literal["order_confirmed", "shipment_update"] = "order_confirmed"


def bound_to_the_order(charge: str) -> list[PlanRule]:
    """What binds a plan of either catalogue to its order, whatever the planner wrote:
    one order; every amount and the currency the order's; each reservation one of the
    order's lines (its SKU and quantity), once, and every line reserved; the shipment
    from the reservations' warehouse, after them, at most once; the confirmation to the
    order's customer, after the shipment, at most once; ``charge`` (the step that takes
    the money) exactly once."""
    return [
        Required(charge),
        AtMost(charge),
        Agree("order_id"),
        FromFact("amount"),
        FromFact("currency"),
        FromFactRows("reserve_stock", fields=("sku", "quantity")),
        Agree("warehouse", steps=("reserve_stock", "create_shipment")),
        RequiresEarlier("create_shipment", "reserve_stock"),
        AtMost("create_shipment"),
        FromFact("recipient", steps=("send_confirmation",)),
        RequiresEarlier("send_confirmation", "create_shipment"),
        AtMost("send_confirmation"),
        Free("template", steps=("send_confirmation",), why="which e-mail to send"),
    ]


Result = dict[str, Any]
FAST = RetryPolicy(max_attempts=4, base_delay=0.02, max_delay=0.5)


def _note(done: str, result: Result) -> str:
    """What an undo reports: what it reversed, or that there was nothing to reverse."""
    found = next(iter(result.values()), None)
    if found:
        return f"{done} {found}"
    return NothingToUndo("nothing to undo: no effect was found for the key")


# How long the providers keep a hold before it lapses on its own: the warehouse a
# reservation for fulfilment (two days), the card network an authorisation (seven days).
RESERVATION_HOLD = 2 * 86_400.0
AUTHORISATION_HOLD = 7 * 86_400.0


def _inventory_steps(
    catalogue: Catalogue, svc: CommerceServices, *, lapses_after: float | None = None
) -> None:
    async def find(args: ReserveStock, ctx: StepContext) -> Result | None:
        return svc.find(ctx.key)

    def sku_known(args: ReserveStock) -> str | None:
        svc.faults.check("precondition")
        if svc.sku_known(args.sku, args.warehouse):
            return None
        return f"warehouse {args.warehouse} does not stock {args.sku}"

    @catalogue.compensable(
        lookup=find,
        precondition=sku_known,
        retry=FAST,
        undo_retry=FAST,
        lapses_after=lapses_after,
    )
    async def reserve_stock(args: ReserveStock, ctx: StepContext) -> Result:
        """Reserve units of a product at a warehouse for an order."""
        return svc.reserve(args.order_id, args.sku, args.quantity, args.warehouse, ctx.key)

    @reserve_stock.undo
    async def release_stock(args: ReserveStock, result: Any, ctx: StepContext) -> str:
        released = svc.release(reserved_with=ctx.action_key, key=ctx.key)
        if "returned" in released:  # some units were re-sold meanwhile: they stay sold
            back, of = released["returned"], released["quantity"]
            return Partial(
                f"released reservation {released['released']}: {back} of {of} units back "
                f"in stock, {of - back} already re-sold"
            )
        return _note("released reservation", released)


def _shipment(catalogue: Catalogue, svc: CommerceServices, *, retriable: bool) -> None:
    async def find(args: CreateShipment, ctx: StepContext) -> Result | None:
        return svc.find(ctx.key)

    async def create_shipment(args: CreateShipment, ctx: StepContext) -> Result:
        """Book a carrier shipment for an order from a warehouse."""
        return svc.ship(args.order_id, args.warehouse, ctx.key)

    if retriable:
        catalogue.retriable(
            lookup=find, retry=RetryPolicy(max_attempts=6, base_delay=0.02, max_delay=0.5)
        )(create_shipment)
        return

    shipment = catalogue.compensable(lookup=find, retry=FAST, undo_retry=FAST)(create_shipment)

    @shipment.undo
    async def cancel_shipment(args: CreateShipment, result: Any, ctx: StepContext) -> str:
        done = svc.cancel_shipment(shipped_with=ctx.action_key, key=ctx.key)
        return _note("cancelled shipment", done)


def _confirmation(catalogue: Catalogue, svc: CommerceServices) -> None:
    async def find(args: SendConfirmation, ctx: StepContext) -> Result | None:
        return svc.find(ctx.key)

    @catalogue.retriable(lookup=find, retry=RetryPolicy(max_attempts=6, base_delay=0.02))
    async def send_confirmation(args: SendConfirmation, ctx: StepContext) -> Result:
        """Email the customer that the order is confirmed. Cannot be unsent: it goes last.
        Sent where the order system says at send time (the plan's address was checked
        against it, but may have changed since)."""
        known = svc.order_facts(args.order_id).get("recipient")
        recipient = known if isinstance(known, str) and known else args.recipient
        return svc.email(args.order_id, recipient, args.template, ctx.key)


def _order_open(svc: CommerceServices) -> Any:
    def order_open(args: Payment) -> str | None:
        """No charge or capture of an order that is not open (paid already, say)."""
        svc.faults.check("precondition")
        status = svc.order_status(args.order_id)
        if status is None:
            return f"order {args.order_id} does not exist"
        return None if status == "open" else f"order {args.order_id} is {status}"

    return order_open


def _tier_of(svc: CommerceServices) -> Any:
    def tier_of(args: BaseModel, plan: Plan) -> str | None:
        svc.faults.check("approval_policy")
        return svc.tier(getattr(args, "order_id", ""))

    return tier_of


# Other sagas for the same order count toward a plan's exposure while they are in flight
# and for a day after they end: one payment split over several sagas waits for a person.
SAME_ORDER = Window("order_id")


def checkout_catalogue(svc: CommerceServices) -> Catalogue:
    """reserve_stock, charge_payment, create_shipment (compensable), then send_confirmation
    (retriable: an email cannot be unsent, so it goes last). A charge that takes the
    order's exposure over 150 waits for a person before it is made."""
    catalogue = Catalogue(
        "checkout",
        "Place an order: reserve stock, charge, ship, then confirm by email.",
        approval=ExposurePolicy(
            threshold=150,
            by_tier={"gold": 400},
            tier_of=_tier_of(svc),
            counted=frozenset({"charge_payment"}),
            before=frozenset({"charge_payment"}),
            across=SAME_ORDER,
        ),
        rules=bound_to_the_order("charge_payment"),
        unbound="refuse",
        about=ABOUT,
    )
    _inventory_steps(catalogue, svc)

    async def find(args: Payment, ctx: StepContext) -> Result | None:
        return svc.find(ctx.key)

    @catalogue.compensable(
        lookup=find, precondition=_order_open(svc), retry=FAST, undo_retry=FAST, moves=PAYS
    )
    async def charge_payment(args: Payment, ctx: StepContext) -> Result:
        """Charge the customer's card for an order (at most 500)."""
        return svc.charge(args.order_id, args.amount, ctx.key)

    @charge_payment.undo
    async def refund_payment(args: Payment, result: Any, ctx: StepContext) -> str:
        return _note("refunded charge", svc.refund(charged_with=ctx.action_key, key=ctx.key))

    _shipment(catalogue, svc, retriable=False)
    _confirmation(catalogue, svc)
    return catalogue


def fulfilment_catalogue(svc: CommerceServices) -> Catalogue:
    """Reserve and authorise (compensable), capture (pivot), ship and confirm (retriable).
    A capture that takes the order's exposure over 150 (400 for gold customers) waits for
    a person.

    Deferral rather than compensation: the reservation and the authorisation are holds
    that lapse on their own (``lapses_after``), and only the capture is final. A failure
    before it costs, at worst, holds that lapse; an approval is asked for no longer than
    they cover the capture, and an undo after a lapse calls nothing."""
    catalogue = Catalogue(
        "fulfilment",
        "Fulfil a paid-by-card order: nothing is final until the capture.",
        approval=ThresholdPolicy(
            threshold=150,
            by_tier={"gold": 400},
            tier_of=_tier_of(svc),
            steps=frozenset({"capture_payment"}),
            across=SAME_ORDER,
        ),
        rules=[
            # a fulfilment without a capture ships for free
            *bound_to_the_order("capture_payment"),
            AtMost("authorize_payment"),
            RequiresEarlier("capture_payment", "authorize_payment"),
            RequiresEarlier("create_shipment", "capture_payment"),
            Agree("amount", steps=("authorize_payment", "capture_payment")),
        ],
        unbound="refuse",
        about=ABOUT,
    )
    _inventory_steps(catalogue, svc, lapses_after=RESERVATION_HOLD)

    async def find(args: BaseModel, ctx: StepContext) -> Result | None:
        return svc.find(ctx.key)

    @catalogue.compensable(
        lookup=find, retry=FAST, undo_retry=FAST, lapses_after=AUTHORISATION_HOLD
    )
    async def authorize_payment(args: Payment, ctx: StepContext) -> Result:
        """Place a hold on the customer's card for the order amount (at most 500)."""
        return svc.authorize(args.order_id, args.amount, ctx.key)

    @authorize_payment.undo
    async def void_authorization(args: Payment, result: Any, ctx: StepContext) -> str:
        return _note("voided authorisation", svc.void(authorized_with=ctx.action_key, key=ctx.key))

    @catalogue.pivot(lookup=find, precondition=_order_open(svc), retry=FAST, moves=PAYS)
    async def capture_payment(args: Payment, ctx: StepContext) -> Result:
        """Capture the authorised amount: the point of no return."""
        return svc.capture(args.order_id, args.amount, ctx.key)

    _shipment(catalogue, svc, retriable=True)
    _confirmation(catalogue, svc)
    return catalogue
