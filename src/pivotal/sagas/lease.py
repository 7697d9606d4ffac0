"""Leases: the exclusive right of one process to run one saga.

Every way to run a saga (a worker, the sweeper, ``Orchestrator.run``, a decision that goes
on running) holds a lease. An acquisition gets a new epoch from the store, which fences
every write of the pass; the lease is renewed by its process's heartbeat, and when a
heartbeat finds it taken over, the work done under it is cancelled at once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pivotal.clock import Clock, synced
from pivotal.errors import LeaseLost, PivotalError, SagaNotFound

if TYPE_CHECKING:
    from pivotal.store.base import Store


log = logging.getLogger("pivotal.lease")
T = TypeVar("T")


@dataclass(eq=False)
class Lease:
    """One acquisition: the saga, the epoch that fences its writes, its length."""

    saga_id: str
    epoch: int
    ttl: float
    lost: bool = False  # taken over by another holder
    released: bool = False  # freed by the commit that ended its pass
    # False until the saga exists in the ledger with this lease: a saga created by the
    # first commit of its pass (``Orchestrator.execute``) has nothing to renew or release
    # before that commit, and must never touch a lease of an existing saga of the same id
    in_ledger: bool = True
    # when it runs out unless renewed (the keeper's clock), from the time its claim or last
    # renewal was sent: this process takes it for held only until then
    expires: float = -math.inf
    _work: asyncio.Task[Any] | None = None  # the task running ``guard``, while it does

    def lose(self) -> None:
        """The lease was taken over: stop the work done under it now."""
        if self.lost:
            return
        self.lost = True
        if self._work is not None:
            self._work.cancel()


class LeaseKeeper:
    """The leases one process holds, renewed together (one store call per beat)."""

    def __init__(self, store: Store, owner: str, clock: Clock) -> None:
        self.store = store
        self.owner = owner
        self.clock = clock
        self._held: dict[str, Lease] = {}
        self._beating: asyncio.Task[None] | None = None
        self._adopted = asyncio.Event()  # wakes the heartbeat to reconsider its interval
        self._shortest = math.inf  # the shortest ttl the heartbeat's interval allows for

    @property
    def held(self) -> dict[str, Lease]:
        return dict(self._held)

    async def acquire(self, saga_id: str, ttl: float) -> Lease | None:
        """Take the saga's lease if nobody holds it; None when somebody does."""
        now = self.clock.now()
        epoch = await self.store.claim(saga_id, self.owner, ttl, now)
        return None if epoch is None else self.adopt(saga_id, epoch, ttl, since=now)

    def adopt(self, saga_id: str, epoch: int, ttl: float, *, since: float | None = None) -> Lease:
        """Keep renewing a lease this process has just claimed (its claim sent at
        ``since``, by default now)."""
        return self.keep(Lease(saga_id, epoch, ttl), since=since)

    def keep(self, lease: Lease, *, since: float | None = None) -> Lease:
        """Keep renewing ``lease``, now in the ledger (claimed, or created with its saga,
        at ``since``, by default now)."""
        lease.in_ledger = True
        lease.expires = (self.clock.now() if since is None else since) + lease.ttl
        saga_id, epoch, ttl = lease.saga_id, lease.epoch, lease.ttl
        older = self._held.get(saga_id)
        if older is not None and older.epoch != epoch:  # our own older lease lapsed
            older.lose()
        self._held[saga_id] = lease
        if self._beating is None or self._beating.done():
            self._shortest = ttl
            self._beating = asyncio.create_task(self._beat_while_held(), name="pivotal heartbeat")
        elif ttl < self._shortest:  # only a shorter lease needs an earlier beat
            self._shortest = ttl
            self._adopted.set()
        return lease

    def forget(self, lease: Lease) -> None:
        """Stop renewing the lease without releasing it (the process is going away)."""
        if self._held.get(lease.saga_id) is lease:
            del self._held[lease.saga_id]

    def freed(self, lease: Lease) -> None:
        """The store freed the lease with the commit that ended its pass: stop renewing it
        at once (before any heartbeat can take it for lost), and do not release it again."""
        lease.released = True
        self.forget(lease)

    async def release(self, lease: Lease, error: str | None = None) -> None:
        """Give the lease up; ``error`` says why the pass ended badly (None: it ended well).

        A lease already freed by its pass's last commit needs no release, unless the pass
        failed after it: the error is still recorded (fenced by the same epoch).
        """
        self.forget(lease)
        if lease.lost or not lease.in_ledger or (lease.released and error is None):
            return
        await self.store.release(lease.saga_id, lease.epoch, error)

    @asynccontextmanager
    async def hold(self, saga_id: str, ttl: float) -> AsyncIterator[Lease]:
        """Hold the saga's lease for the block: released when it ends, with the error when it
        raised; forgotten but kept when the process is going away (a crash, a cancel)."""
        lease = await self.acquire(saga_id, ttl)
        if lease is None:
            if await self.store.lease_of(saga_id) is None:
                raise SagaNotFound(f"no saga {saga_id!r}")
            raise LeaseLost(f"saga {saga_id} is leased by another process")
        async with self.holding(lease):
            yield lease

    @asynccontextmanager
    async def holding(self, lease: Lease) -> AsyncIterator[Lease]:
        """``hold`` for a lease this process already has (adopted after a claim, or taken
        with the saga's creation)."""
        try:
            yield lease
        except LeaseLost:
            self.forget(lease)
            raise
        except Exception as exc:
            await self.release(lease, f"{type(exc).__name__}: {exc}")
            raise
        except BaseException:
            self.forget(lease)
            raise
        await self.release(lease)

    async def guard(self, lease: Lease, work: Awaitable[T]) -> T:
        """Run ``work`` under ``lease``: cancelled, and ``LeaseLost`` raised, when the
        heartbeat finds the lease taken over.

        The work runs in the calling task (no task of its own per saga); a loss cancels that
        task, and the cancellation is taken back here, as ``asyncio.timeout`` does, unless
        somebody else cancelled the task too: then the cancellation goes on.
        """
        task = asyncio.current_task()
        if task is None or lease.lost:
            if inspect.iscoroutine(work):
                work.close()  # never started: nothing to warn about
            if task is None:
                raise RuntimeError("guard must run in a task")
            raise LeaseLost(f"lease on saga {lease.saga_id} was taken over")
        lease._work = task
        try:
            return await work
        except asyncio.CancelledError:
            if lease.lost and task.uncancel() == 0:
                raise LeaseLost(f"lease on saga {lease.saga_id} was taken over") from None
            raise
        finally:
            lease._work = None

    async def report(self, lease: Lease, index: int, record: dict[str, Any]) -> None:
        """Keep a progress report of step ``index`` under ``lease``, renewing the lease with
        it; a lease taken over is lost (its work cancelled) and ``LeaseLost`` raised."""
        if lease.lost:
            raise LeaseLost(f"lease on saga {lease.saga_id} was taken over")
        now = self.clock.now()
        held = await self.store.record_progress(
            lease.saga_id,
            index,
            record,
            epoch=lease.epoch if lease.in_ledger else None,
            renew=(self.owner, now + lease.ttl) if lease.in_ledger else None,
        )
        if not held:
            self.forget(lease)
            lease.lose()
            raise LeaseLost(f"lease on saga {lease.saga_id} was taken over")
        if lease.in_ledger:
            lease.expires = max(lease.expires, now + lease.ttl)

    async def ensure(self, lease: Lease) -> None:
        """Before a call that can take effect: ``LeaseLost`` unless this process still
        holds ``lease`` for at least a third of its length. A lease that is about to run
        out, or ran out while the process was paused (a GC or VM freeze, SIGSTOP, a
        laptop lid), is renewed first; one taken over meanwhile is lost."""
        if lease.lost:
            raise LeaseLost(f"lease on saga {lease.saga_id} was taken over")
        if not lease.in_ledger or self.clock.now() + lease.ttl / 3 < lease.expires:
            return
        now = self.clock.now()
        try:
            held = await self.store.heartbeat(
                self.owner, {lease.saga_id: lease.epoch}, lease.ttl, now
            )
        except PivotalError as exc:
            raise LeaseLost(
                f"lease on saga {lease.saga_id} could not be renewed before a call: {exc}"
            ) from exc
        if lease.saga_id not in held:
            self.forget(lease)
            lease.lost = True  # this task stops by the error, not by a cancellation
            raise LeaseLost(f"lease on saga {lease.saga_id} was taken over")
        lease.expires = now + lease.ttl

    async def beat(self) -> None:
        """Renew every held lease; the ones found taken over are lost."""
        await synced(self.clock)
        by_ttl: dict[float, dict[str, int]] = defaultdict(dict)
        for lease in list(self._held.values()):
            by_ttl[lease.ttl][lease.saga_id] = lease.epoch
        for ttl, leases in by_ttl.items():
            now = self.clock.now()
            try:
                held = await self.store.heartbeat(self.owner, leases, ttl, now)
            except PivotalError as exc:  # the leases still run; the next beat tries again
                log.warning("%s: heartbeat failed: %s", self.owner, exc)
                continue
            for saga_id in held:
                renewed = self._held.get(saga_id)
                if renewed is not None and renewed.epoch == leases[saga_id]:
                    renewed.expires = now + ttl
            for saga_id in set(leases) - held:
                gone = self._held.get(saga_id)
                if gone is not None and gone.epoch == leases[saga_id]:
                    log.warning("%s: lease on saga %s was taken over", self.owner, saga_id)
                    self.forget(gone)
                    gone.lose()

    def _interval(self) -> float:
        self._shortest = min((lease.ttl for lease in self._held.values()), default=math.inf)
        return 0.0 if self._shortest == math.inf else self._shortest / 3

    async def _beat_while_held(self) -> None:
        """Beat every third of the shortest held lease, until none is held."""
        loop = asyncio.get_running_loop()
        due = loop.time() + self._interval()
        while self._held:
            self._adopted.clear()
            try:
                await asyncio.wait_for(self._adopted.wait(), max(0.0, due - loop.time()))
            except TimeoutError:  # due: the loop fires a timer up to its clock's resolution
                due = loop.time()  # early, and a clock that did not move on must not spin
            due = min(due, loop.time() + self._interval())  # a shorter lease was adopted
            if loop.time() < due or not self._held:
                continue
            try:
                await self.beat()
            except Exception:  # never let one bad beat end the heartbeat
                log.exception("%s: heartbeat failed", self.owner)
            due = loop.time() + self._interval()
