"""A process paused at a protocol point (a GC or VM freeze, SIGSTOP, a laptop lid) for longer
than its lease, while another process takes its saga over and drives it to rest.

    pause = PauseAt(CrashSite(Point.AFTER_INTENT, 0))
    orchestrator = Orchestrator(store, app, clock=clock, hook=pause)

When the paused process resumes, it must neither write (its epoch is fenced) nor call
anything: its next intent or call finds the lease gone and stops with ``LeaseLost``. A pause
during a call (the call in flight) is a ``Takeover``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field

from pivotal.errors import LeaseLost, StoreError
from pivotal.hooks import Point
from pivotal.operations.worker import Sweeper
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.testing.chaos import LEASE_TTL, until_quiet
from pivotal.testing.crash import CrashSite
from pivotal.testing.inflight import CURRENT, Process, running_as
from pivotal.testing.skew import fake_of


@dataclass
class PauseAt:
    """A hook that pauses the process at ``site`` while a second process (with its own
    owner name) takes the saga over: the clock jumps past the lease, the sweeper frees it,
    and the second process drives the saga to rest. ``outcome`` says what it did."""

    site: CrashSite
    saga_id: str = "chaos-saga"
    fired: bool = False
    outcome: str = ""
    seen: Counter[tuple[Point, int]] = field(default_factory=Counter)

    def __str__(self) -> str:
        return f"pause:{self.site}"

    def __call__(self, point: Point, index: int) -> Awaitable[None] | None:
        self.seen[(point, index)] += 1
        site = self.site
        if self.fired or (point, index) != (site.point, site.index):
            return None
        if self.seen[(point, index)] != site.occurrence:
            return None
        self.fired = True
        return self._meanwhile()

    async def _meanwhile(self) -> None:
        self.outcome = await take_over(self.saga_id)


async def take_over(saga_id: str) -> str:
    """While the current process (of ``pivotal.testing.inflight``) is held up past its
    lease, a second process takes ``saga_id`` over and drives it to rest; what it did."""
    me = CURRENT.get()
    if me is None:
        raise RuntimeError("a pause needs the run's process (pivotal.testing.inflight)")
    first = me.orchestrator
    clock = fake_of(first.clock)
    if clock is None:
        raise TypeError("a pause needs the run's FakeClock")
    second = Orchestrator(
        first.store,
        first.app,
        clock=clock,
        rng=random.Random(1),
        owner=f"{first.owner}-while-paused",
        lease_ttl=first.lease_ttl,
    )
    with running_as(Process(f"{me.name}~", second, me.approve, me.log)):
        clock.advance(first.lease_ttl + 1)
        if me.log is not None:
            me.log.fence(me.name)
        await Sweeper(second).sweep()
        try:
            await until_quiet(second, clock, saga_id, approve=me.approve)
            return "took over"
        except LeaseLost:
            return "refused"
        except StoreError as exc:  # an injected ledger fault: the second one 'crashed'
            clock.advance(LEASE_TTL + 1)
            return f"failed: {exc}"
