"""The apology: a customer whose order was rolled back is told so by email.

A sent email cannot be unsent, only followed by a correction. So no undo ever writes to
the customer: the ``saga.compensated`` outbox message, committed with the compensation
itself, drives one apology through the email service. The relay delivers that message at
least once; the email is keyed by the message id, so a redelivered message sends nothing
more.

    from pivotal.operations.relay import CallableSink, Relay
    apology = ApologySender(store, app.services)
    sink = CallableSink(apology, types={APOLOGY_TRIGGER})
    await Relay(store, [sink]).run(until_idle=True)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pivotal.declarations.plan import Plan
from pivotal.errors import PivotalError
from pivotal.examples.commerce.services import CommerceServices
from pivotal.sagas.outbox import Message
from pivotal.store.base import Store

APOLOGY_TRIGGER = "saga.compensated"
CATALOGUES = frozenset({"checkout", "fulfilment"})
TEMPLATE = "order_rolled_back_apology"


class ApologyError(PivotalError):
    """The apology for a rolled-back order cannot be sent (the relay retries it)."""

    code = "apology_failed"


def apology_key(message_id: str) -> str:
    """The email's idempotency key: the message id, in a namespace of its own (a message
    id ``{saga}:{seq}`` has the shape of the saga's own action keys ``{saga}:{index}``)."""
    return f"apology:{message_id}"


def order_of(plan: Plan) -> str | None:
    """The order a plan is about (the catalogues' rules make every step agree on it)."""
    for flat in plan.calls():
        order = flat.call.args.get("order_id")
        if isinstance(order, str) and order:
            return order
    return None


def recipient_of(services: CommerceServices, order_id: str) -> str | None:
    """Where the customer reads mail, as the order system says at send time: never the
    plan's argument, which may be the very fact that changed and rolled the order back."""
    known = services.order_facts(order_id).get("recipient")
    return known if isinstance(known, str) and known else None


@dataclass(frozen=True, slots=True)
class Apology:
    """What the handler did with one ``saga.compensated`` message."""

    message_id: str
    saga_id: str
    order_id: str | None
    recipient: str | None
    reason: str | None  # why the order was rolled back (the saga's reason)
    sent: bool  # False: nobody to write to, or it had been sent before (redelivery)
    note: str  # what happened, for people


class ApologySender:
    """An outbox handler: one apology per ``saga.compensated`` message of the commerce
    catalogues. ``handled`` lists what it did, in order (a redelivery adds an entry that
    says nothing was sent again)."""

    def __init__(self, store: Store, services: CommerceServices) -> None:
        self.store = store
        self.services = services
        self.handled: list[Apology] = []

    async def __call__(self, message: Message) -> None:
        if message.type != APOLOGY_TRIGGER:
            return
        if message.payload.get("catalogue") not in CATALOGUES:
            return
        stored = await self.store.load(message.saga_id)
        if stored is None:
            raise ApologyError(
                f"saga {message.saga_id} of message {message.id} is not in the ledger"
            )
        why = stored.state.reason  # the ledger's words: the message tells an agent's view
        order = order_of(stored.plan)
        recipient = None if order is None else recipient_of(self.services, order)
        entry = Apology(message.id, message.saga_id, order, recipient, why, False, "")
        if order is None or recipient is None:
            what = "no order" if order is None else f"no address on record for order {order}"
            self._note(entry, f"not sent: {what}")
            return
        key = apology_key(message.id)
        if self.services.rows("emails", key=key):
            self._note(entry, "sent before: this delivery is a repeat")
            return
        self.services.email(order, recipient, TEMPLATE, key)
        self.handled.append(replace(entry, sent=True, note=f"apology sent to {recipient}"))

    def _note(self, entry: Apology, note: str) -> None:
        self.handled.append(replace(entry, sent=False, note=note))

    @property
    def sent(self) -> list[Apology]:
        """The apologies this handler sent."""
        return [a for a in self.handled if a.sent]
