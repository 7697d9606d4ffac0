"""Relays whose clocks disagree: an outbox lease is stamped and compared on the ledger's clock,
so a relay whose own clock is far ahead neither takes a message another relay is delivering
nor sends that saga's later messages before it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from pivotal import FakeClock
from pivotal.clock import Clock, SystemClock
from pivotal.operations.relay import Relay
from pivotal.sagas.outbox import Message
from pivotal.store import Store
from pivotal.testing.skew import skewed

RunSagas = Callable[..., Awaitable[list[str]]]  # the ``sagas`` fixture
LEASE = 300.0  # never runs out during the test: only a clock that is ahead says it did
AHEAD = 2 * LEASE + 5


class Ahead(SystemClock):
    """A machine whose wall clock is ``AHEAD`` seconds ahead."""

    def now(self) -> float:
        return time.time() + AHEAD


@pytest.fixture
def clock() -> FakeClock:
    """The sagas' clock: the real time, so that their messages are due for a real relay."""
    return FakeClock(time.time() - 1)


def clocks(kind: str, fake: FakeClock) -> tuple[Clock, Clock]:
    """The holder's clock and the other relay's, ``AHEAD`` of it."""
    if kind == "host":  # real clocks: the ledger's time is asked of the store
        return SystemClock(), Ahead()
    return fake, skewed(fake, AHEAD)  # the run's fake time is the ledger's


class Holding:
    """A sink that takes a message and holds on to it until ``go`` is set."""

    name = "holding"

    def __init__(self, got: list[str]) -> None:
        self.got = got
        self.entered, self.go = asyncio.Event(), asyncio.Event()

    async def deliver(self, message: Message) -> None:
        self.got.append(message.id)
        self.entered.set()
        await self.go.wait()


class Taking:
    name = "taking"

    def __init__(self, got: list[str]) -> None:
        self.got = got

    async def deliver(self, message: Message) -> None:
        self.got.append(message.id)


@pytest.mark.parametrize("kind", ["host", "fake"])
async def test_a_relay_ahead_takes_no_message_another_relay_holds(
    store: Store, clock: FakeClock, sagas: RunSagas, kind: str
) -> None:
    (saga_id,) = await sagas(1, count=2)
    order = [m.id for m in await store.messages(saga_id=saga_id)]
    got: list[str] = []
    holding = Holding(got)
    own, ahead = clocks(kind, clock)
    holder = Relay(store, [holding], clock=own, owner="holder", lease_ttl=LEASE, timeout=60)
    other = Relay(store, [Taking(got)], clock=ahead, owner="other", lease_ttl=LEASE, timeout=60)

    running = asyncio.create_task(holder.run_once())
    await asyncio.wait_for(holding.entered.wait(), 30)  # the holder is delivering the first
    # the other's own clock says the holder's lease ran out long ago; the ledger's says not
    assert (await other.run_once()).claimed == 0

    holding.go.set()
    assert (await asyncio.wait_for(running, 30)).delivered == 1
    await other.run(until_idle=True, poll=0.0)
    assert got == order  # each once, in the saga's order
    assert all(m.status == "delivered" for m in await store.messages(saga_id=saga_id))
