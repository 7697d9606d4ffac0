"""Virtual time: an event loop whose clock jumps to its next timer whenever nothing is ready
to run, so a day passes in milliseconds and one seed replays one story exactly. Every clock
of a simulation reads it: the loop's own (sleeps, the bounds on calls, waits), the ledger's,
and each simulated host's wall clock, which may be off by its own skew.

``looptime`` does the same for tests that wait on real I/O too; here nothing may (a thread,
a socket, an executor's future would make a run depend on real time, and two runs of one
seed differ): the loop refuses them, and a run in which nothing is ready and nothing is
scheduled fails at once (``Deadlock``) instead of waiting. It costs a quarter less than
``looptime``'s checks for real I/O on every turn of the loop, which a simulation pays some
hundred thousand times a minute.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable
from typing import Any

from pivotal.clock import SystemClock

T0 = 1_800_000_000.0  # the ledger's time when the loop's reads 0


class Deadlock(RuntimeError):
    """Nothing was ready and nothing was scheduled: every task waits for what nobody will
    do."""


class _Virtual(selectors.DefaultSelector):
    """The loop's selector: it never waits, it moves the loop's clock to the next timer."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:
            raise Deadlock("nothing is ready and nothing is scheduled")
        self.now += timeout
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time, for one simulated run."""

    def __init__(self) -> None:
        self._virtual = _Virtual()
        super().__init__(self._virtual)

    def time(self) -> float:
        return self._virtual.now

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        raise RuntimeError("a simulated run uses no thread: its timing would be real")


def now() -> float:
    """The true time of the running simulation: what the ledger's clock reads."""
    return T0 + asyncio.get_running_loop().time()


class HostClock(SystemClock):
    """A simulated host's wall clock: the true time, off by ``offset`` seconds (a skew; a
    step of the clock changes it). A ``SystemClock``, so that each process reads the
    ledger's time through it, as a real one does (``pivotal.clock.LedgerClock``)."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def now(self) -> float:
        return now() + self.offset

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
