"""Time, injectable so that backoff and expiry can be tested instantly."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

log = logging.getLogger("pivotal.clock")


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall-clock time and real sleeping."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when told to; ``sleep`` advances it instantly."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)


class LedgerTime(Protocol):
    async def ledger_time(self) -> float: ...


class LedgerClock:
    """The ledger's time, read through a local clock: lease stamps and expiries, retry due
    times and approval expiries all come from it, so that workers whose clocks disagree
    (one ahead by more than a lease sees every lease as expired) agree on what has expired.

    ``sync()`` asks the ledger for its time and keeps the offset from ``base`` (the middle
    of the round trip: off by at most half of it); ``now()`` is ``base``'s time plus that
    offset. The offset is asked again once it is older than ``every`` seconds, by whoever
    calls ``sync()`` (each pass, each heartbeat). A ledger that cannot be asked leaves the
    last offset in place (or none: then this process's own clock is used, and a warning
    is logged).
    """

    def __init__(self, base: Clock, ledger: LedgerTime, *, every: float = 10.0) -> None:
        self.base = base
        self.ledger = ledger
        self.every = every
        self.offset = 0.0
        self._synced: float | None = None  # ``base``'s time of the last sync

    def now(self) -> float:
        return self.base.now() + self.offset

    async def sleep(self, seconds: float) -> None:
        await self.base.sleep(seconds)

    async def sync(self) -> None:
        """Measure the offset again, when it is older than ``every`` seconds."""
        start = self.base.now()
        if self._synced is not None and start - self._synced < self.every:
            return
        try:
            ledger = await self.ledger.ledger_time()
        except Exception as exc:  # the ledger is unreachable: keep what is known
            log.warning("the ledger's clock could not be read: %s", exc)
            return
        end = self.base.now()
        self.offset = ledger - (start + end) / 2
        self._synced = end


async def synced(clock: Clock) -> None:
    """Bring ``clock`` in step with the ledger, when it is a ``LedgerClock``."""
    if isinstance(clock, LedgerClock):
        await clock.sync()
