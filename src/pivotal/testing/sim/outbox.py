"""The outbox under simulation: the real relay (``pivotal.operations.relay.Relay``) delivers what
the ledger committed with each state change to a simulated receiver, which fails now and then,
or takes a message and loses its reply. What must hold at rest: every message delivered (at
least once), nothing delivered that the ledger did not commit, and each saga's messages
first delivered in the order the ledger keeps them."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict

from pivotal.operations.relay import DeliveryError
from pivotal.sagas.outbox import Message
from pivotal.store.base import Store
from pivotal.testing.sim import hosts


class Receiver:
    """A receiver of the outbox (a CRM, say): what it took, in the order it took it."""

    name = "sim receiver"

    def __init__(self, rng: random.Random, fails: float) -> None:
        self.rng = rng
        self.fails = fails  # the chance a delivery fails (half of them after it was taken)
        self.taken: list[Message] = []

    async def deliver(self, message: Message) -> None:
        host = hosts.current()
        if host is not None:
            host.check()
        await asyncio.sleep(self.rng.uniform(0.0, 0.1))
        roll = self.rng.random()
        if roll < self.fails / 2:
            raise DeliveryError("the receiver is unavailable")
        self.taken.append(message)
        if roll < self.fails:
            raise DeliveryError("the receiver's reply was lost")


async def check(store: Store, receiver: Receiver) -> list[str]:
    """Every broken promise of the outbox, as a line each."""
    kept = await store.messages(None, limit=1_000_000)
    out = [
        f"message {m.id} of saga {m.saga_id} is {m.status}" for m in kept if m.status != "delivered"
    ]
    known = {m.id: m for m in kept}
    first: dict[str, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for m in receiver.taken:
        if m.id not in known:
            out.append(f"message {m.id} was delivered, but the ledger never committed it")
        elif m.id not in seen:
            seen.add(m.id)
            first[m.saga_id].append(known[m.id].seq)
    out += [f"message {m.id} was never delivered" for m in kept if m.id not in seen]
    for saga_id, order in sorted(first.items()):
        if order != sorted(order):
            out.append(f"saga {saga_id}: its messages were first delivered out of order {order}")
    return out
