"""Clocks that disagree: lease stamps and expiries, retry due times and approval expiries are
read from the ledger's clock, so a process whose own clock is ahead (or behind) by more than
a lease neither takes leases that are held nor lets its own look expired."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import Catalogue, LeaseLost, Orchestrator, SagaStatus, StepContext, parse_plan
from pivotal.clock import LedgerClock, SystemClock
from pivotal.operations.worker import Sweeper
from pivotal.store import Store

LEASE = 30.0


class SkewedClock(SystemClock):
    """A machine whose wall clock is off by ``offset`` seconds."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def now(self) -> float:
        return time.time() + self.offset


class Item(BaseModel):
    n: int = 0


def slow_catalogue(entered: asyncio.Event, go: asyncio.Event) -> Catalogue:
    catalogue = Catalogue("skew")

    async def nothing(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=nothing)
    async def wait(args: Item, ctx: StepContext) -> dict[str, bool]:
        entered.set()
        await go.wait()
        return {"done": True}

    return catalogue


@pytest.mark.parametrize(
    ("holder", "other"),
    [(0.0, 2 * LEASE + 5), (-(2 * LEASE + 5), 0.0)],
    ids=["the other is ahead", "the holder is behind"],
)
async def test_a_lease_held_by_one_clock_is_held_for_every_other(
    store: Store, holder: float, other: float
) -> None:
    entered, go = asyncio.Event(), asyncio.Event()
    catalogue = slow_catalogue(entered, go)
    a = Orchestrator(store, catalogue, clock=SkewedClock(holder), owner="a", lease_ttl=LEASE)
    b = Orchestrator(store, catalogue, clock=SkewedClock(other), owner="b", lease_ttl=LEASE)
    assert isinstance(a.clock, LedgerClock)
    plan = parse_plan({"catalogue": "skew", "steps": [{"name": "wait", "args": {}}]})
    running = asyncio.create_task(a.execute(plan, saga_id="s"))
    await asyncio.wait_for(entered.wait(), 30)  # a holds the lease, its call in flight

    # b's own clock says the lease ran out long ago; the ledger's says it has not
    assert (await Sweeper(b).sweep()).leases_recovered == []
    with pytest.raises(LeaseLost):
        await b.run("s")

    go.set()
    state = await asyncio.wait_for(running, 30)
    assert state.status is SagaStatus.COMPLETED
    # every stamp is the ledger's time, whoever wrote it
    events = await store.events("s")
    ledger_now = await store.ledger_time()
    assert all(abs(e.at - ledger_now) < LEASE for e in events)


async def test_a_clock_follows_the_ledger_s_time(store: Store) -> None:
    ahead = LedgerClock(SkewedClock(3600.0), store, every=0.0)
    await ahead.sync()
    assert abs(ahead.now() - await store.ledger_time()) < 5.0
    assert ahead.offset == pytest.approx(-3600.0, abs=5.0)


async def test_an_unreachable_ledger_keeps_the_last_offset() -> None:
    class Down:
        async def ledger_time(self) -> float:
            raise ConnectionError("the ledger is down")

    clock = LedgerClock(SkewedClock(100.0), Down(), every=0.0)
    await clock.sync()
    assert clock.offset == 0.0
