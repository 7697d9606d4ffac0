"""A second process with the same owner name, let in while a call is in flight.

    takeover = Takeover(index=1)  # during the first call of step 1's action
    await run_in_process(make_world, scenario, interludes=[takeover])

``expire=True`` (the default) models a slow call: the provider has answered, but before the
reply arrives the clock jumps past the lease, the sweeper frees it, and a second process
under the *same owner name* drives the saga to rest. The first then resumes: its next ledger
write must be refused (``LeaseLost``), or, with ``heartbeat=True``, its heartbeat finds the
lease gone and its work is cancelled. ``expire=False`` lets the second process in while
the lease is still valid, before the call reaches the provider: it must be refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass, field

from pivotal.clock import FakeClock
from pivotal.declarations.catalogue import StepContext
from pivotal.errors import LeaseLost, StoreError
from pivotal.operations.worker import Sweeper
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.sagas.lease import Lease
from pivotal.testing.chaos import LEASE_TTL, until_quiet
from pivotal.testing.inflight import CURRENT, Process, running_as
from pivotal.testing.skew import fake_of


@dataclass
class Takeover:
    """While the ``occurrence``-th call of step ``index``'s action (its undo with ``undo``)
    is in flight, a second process with the same owner name tries to run the saga."""

    index: int
    occurrence: int = 1
    undo: bool = False
    expire: bool = True  # the lease runs out first (a slow call); else it is still valid
    heartbeat: bool = False  # the first process's heartbeat runs before it resumes
    fired: bool = False
    outcome: str = ""  # what the second process did: "took over", "refused", "failed: ..."
    lapsed: bool = False  # a lease meant to be valid was given up or ran out meanwhile
    _lease: Lease | None = field(default=None, repr=False)  # the first's, when it came
    _seen: int = field(default=0, repr=False)

    def __str__(self) -> str:
        what = "undo" if self.undo else "action"
        how = "expired" if self.expire else "lapsed" if self.lapsed else "valid"
        beat = "+heartbeat" if self.heartbeat else ""
        return f"takeover:{what}:{self.index}:{self.occurrence}:{how}{beat}"

    async def __call__(self, ctx: StepContext, *, undo: bool, applied: bool) -> None:
        # An expired lease meets the call after the provider answered (the reply is slow);
        # a valid one before the call reaches the provider.
        if self.fired or (ctx.index, undo, applied) != (self.index, self.undo, self.expire):
            return
        self._seen += 1
        me = CURRENT.get()
        if self._seen != self.occurrence or me is None:
            return
        self.fired = True
        first = me.orchestrator
        clock = fake_of(first.clock)
        if clock is None:
            raise TypeError("a takeover needs the run's FakeClock")
        self._lease = first.leases.held.get(ctx.saga_id)
        second = Orchestrator(
            first.store,
            first.app,
            clock=clock,
            rng=random.Random(self.index),
            owner=first.owner,  # the same name: leases must not be re-entrant by name
            lease_ttl=first.lease_ttl,
        )
        # The second process is a process of its own: stopping the first (a sibling call
        # refused, a crash) must not stop it, so it runs in its own task, awaited to the end.
        second_run = asyncio.ensure_future(self._second(me, second, clock, ctx.saga_id))
        try:
            await asyncio.shield(second_run)
        except asyncio.CancelledError:
            while not second_run.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(second_run)
            raise
        if self.heartbeat:
            await first.leases.beat()  # finds the lease taken: cancels the first's work
            await asyncio.sleep(0)

    def _still_held(self, me: Process, clock: FakeClock, saga_id: str) -> bool:
        """Whether the first process held, all along, the lease it held when the second
        came: other faults of the schedule may have ended its pass meanwhile (a failed
        commit in a parallel sibling releases the lease) or moved the clock past it (retry
        waits, stalls): then a second process may rightly take the saga over."""
        lease = me.orchestrator.leases.held.get(saga_id)
        return (
            lease is not None
            and lease is self._lease
            and not (lease.released or lease.lost)
            and clock.now() < lease.expires
        )

    async def _second(
        self, me: Process, second: Orchestrator, clock: FakeClock, saga_id: str
    ) -> None:
        with running_as(Process(f"{me.name}'", second, me.approve, me.log)):
            if self.expire:
                clock.advance(me.orchestrator.lease_ttl + 1)
                if me.log is not None:
                    me.log.fence(me.name)
                await Sweeper(second).sweep()
            try:
                await until_quiet(second, clock, saga_id, approve=me.approve)
                self.outcome = "took over"
                self.lapsed = not self.expire and not self._still_held(me, clock, saga_id)
            except LeaseLost:
                self.outcome = "refused"
            except StoreError as exc:  # an injected ledger fault: the second one 'crashed'
                self.outcome = f"failed: {exc}"
                # it wrote, so it held the lease: the first's must have lapsed meanwhile
                self.lapsed = not self.expire and not self._still_held(me, clock, saga_id)
                clock.advance(LEASE_TTL + 1)
