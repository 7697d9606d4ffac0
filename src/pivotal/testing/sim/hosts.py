"""Simulated hosts: each a process of its own over the shared ledger (its own orchestrator,
its own clock, perhaps a worker), which the world can pause, step the clock of, or take away
between any two of its awaits or ledger writes.

A host that is gone has every task it started cancelled at once, and everything it asks
afterwards (the ledger, a provider) raises ``HostGone``: nothing it would still do reaches
the world, as for a process killed with SIGKILL. What it had already sent (a provider call
on its way) may still land."""

from __future__ import annotations

import asyncio
import contextvars
import random
from collections.abc import Callable, Coroutine
from typing import Any

from pivotal.clock import LedgerClock
from pivotal.declarations.app import App
from pivotal.declarations.retry import RetryPolicy
from pivotal.errors import StoreError, StoreUnreachable
from pivotal.operations.relay import Relay, Sink
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.testing.sim.ledger import SimLedger
from pivotal.testing.sim.loop import HostClock


class HostGone(BaseException):
    """The host went away: nothing it does now reaches the world (``BaseException``: no
    ``except Exception`` of the program under test takes it for an outcome)."""


HOST: contextvars.ContextVar[Host | None] = contextvars.ContextVar("sim_host", default=None)


def current() -> Host | None:
    return HOST.get()


class Host:
    """One simulated process."""

    def __init__(
        self,
        name: str,
        conn: Any,
        app: App,
        rng: random.Random,
        *,
        offset: float = 0.0,
        lease_ttl: float,
        latency: float = 0.0,
        flaky: float = 0.0,
        poison_after: int = 5,
    ) -> None:
        self.name = name
        self.rng = rng
        self.host_clock = HostClock(offset)
        self.store = SimLedger(conn, self)
        loop = asyncio.get_running_loop()
        self.clock = LedgerClock(self.host_clock, self.store, monotonic=loop.time)
        self.orchestrator = Orchestrator(
            self.store,
            app,
            clock=self.clock,
            rng=random.Random(rng.random()),
            owner=name,
            lease_ttl=lease_ttl,
            poison_after=poison_after,
            ledger_clock=False,
        )
        self.alive = True
        self.paused_until = 0.0  # the loop's time until which it makes no request
        self.latency = latency  # the most a request, or its reply, takes on the way
        self.flaky = flaky  # the chance that a request finds the ledger unreachable
        self.gone_after_writes: int | None = None  # it goes away after this many writes
        self.pause_after_intent = 0.0  # it pauses this long once its next intent landed
        self.intent = False  # the write under way holds an intent
        self.bad_writes_until = 0.0  # until then, most of its writes fail (a disk error)
        self.writes = 0
        self.tasks: set[asyncio.Task[Any]] = set()
        self.worker: Worker | None = None
        # what this host runs (a worker, a relay): started again on the host that replaces it
        self.job: Callable[[Host], asyncio.Task[Any]] | None = None

    # -- its tasks ----------------------------------------------------------------------

    def start(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` as a task of this host (and every task it starts is this host's)."""
        context = contextvars.copy_context()
        context.run(HOST.set, self)
        return asyncio.get_running_loop().create_task(coro, name=name, context=context)

    def relay(self, receiver: Sink, stop: asyncio.Event) -> asyncio.Task[Any]:
        """Start an outbox relay on this host, delivering to ``receiver`` until ``stop``."""
        relay = Relay(
            self.store,
            [receiver],
            clock=self.clock,
            owner=self.name,
            lease_ttl=60.0,
            timeout=10.0,
            retry=RetryPolicy(max_attempts=30, base_delay=1.0, max_delay=20.0),
            rng=random.Random(self.rng.random()),
        )
        return self.start(relay.run(poll=2.0, stop=stop), f"{self.name} relay")

    def work(self, config: WorkerConfig) -> asyncio.Task[Any]:
        """Start a worker on this host."""
        self.worker = Worker(self.orchestrator, config)
        return self.start(self.worker.run(), f"{self.name} worker")

    def go_away(self) -> None:
        """Take the host away now: its tasks are cancelled, and nothing it asks afterwards
        is done."""
        if not self.alive:
            return
        self.alive = False
        for task in list(self.tasks):
            task.cancel()

    # -- what it asks of the world ---------------------------------------------------------

    def check(self) -> None:
        if not self.alive:
            raise HostGone(self.name)

    async def request(self, *, write: bool = False) -> None:
        """A request to the ledger leaves (once the host is not paused) and is on its way for a
        while; the ledger may be out of reach, or fail a write."""
        await self._paused()
        if self.latency:
            await asyncio.sleep(self.rng.uniform(0.0, self.latency))
            self.check()
        if self.flaky and self.rng.random() < self.flaky:
            raise StoreUnreachable(f"{self.name}: the simulated ledger is out of reach")
        loop = asyncio.get_running_loop()
        if write and loop.time() < self.bad_writes_until and self.rng.random() < 0.6:
            raise StoreError(f"{self.name}: the simulated ledger failed the write (disk I/O)")

    async def reply(self, *, wrote: bool = False) -> None:
        """The ledger's reply comes back; the host may go away meanwhile (the write landed,
        its reply is lost), or be paused when it arrives."""
        if wrote:
            self.writes += 1
            if self.gone_after_writes is not None and self.writes >= self.gone_after_writes:
                self.go_away()
            if self.pause_after_intent and self.intent:  # frozen before its call begins
                loop = asyncio.get_running_loop()
                self.paused_until = loop.time() + self.pause_after_intent
                self.pause_after_intent = 0.0
        if self.latency:
            await asyncio.sleep(self.rng.uniform(0.0, self.latency))
        await self._paused()

    async def _paused(self) -> None:
        """Wait while the host is paused (frozen: a GC, a VM, SIGSTOP); raise once it is
        gone."""
        self.check()
        loop = asyncio.get_running_loop()
        while self.paused_until > loop.time():
            await asyncio.sleep(self.paused_until - loop.time())
            self.check()


def track(loop: asyncio.AbstractEventLoop) -> None:
    """Make every task the loop starts belong to the host whose task started it."""

    def factory(
        loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        context = kwargs.get("context")
        host = context.get(HOST) if context is not None else HOST.get()
        if host is not None:
            host.tasks.add(task)
            task.add_done_callback(host.tasks.discard)
            if not host.alive:
                task.cancel()
        return task

    loop.set_task_factory(factory)  # type: ignore[arg-type]
