"""Time, injectable so that backoff and expiry can be tested instantly."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
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


# How far the host's clock may move apart from the monotonic one between two syncs before
# it counts as stepped (NTP slews at most 0.5 ms a second; a step or a suspend is more).
STEPPED = 1.0
# The longest round trip a reading of the ledger's time may take to be believed: the answer
# was given somewhere within it, so a reading is off by up to half of it (a process frozen,
# or a link stalled, mid-way makes it long). Two processes whose readings are believed
# disagree by at most this much: each deadline a process records allows for it.
ROUND_TRIP = 1.0
_TRIES = 3  # readings a sync asks for at most, while they come back slower than that


@dataclass(frozen=True, slots=True)
class Reading:
    """One answer of the ledger, and where the local clocks stood when it was given (the
    middle of the round trip)."""

    ledger: float  # the ledger's time
    monotonic: float  # the monotonic clock's
    host: float  # ``base``'s


class LedgerClock:
    """The ledger's time, read through a local clock: lease stamps and expiries, retry due
    times and approval expiries all come from it, so that workers whose clocks disagree
    (one ahead by more than a lease sees every lease as expired) agree on what has expired.

    ``sync()`` asks the ledger for its time (off by at most half the round trip); ``now()``
    is that time plus what elapsed since on a monotonic clock, so a step of the host's wall
    clock (back or forward) changes nothing between two syncs. The ledger is asked again
    by whoever calls ``sync()`` (each pass, each heartbeat) once the last answer is
    ``every`` seconds old on the monotonic clock, or at once when the host's clock moved
    apart from the monotonic one (a step, or a suspend that the monotonic clock did not
    count). A ledger that cannot be asked leaves the last answer in place (or none: then
    this process's own clock is used, and a warning is logged).

    The monotonic clock is ``time.monotonic`` under a ``SystemClock``; a clock of a test's
    own (a fake) is its own monotonic clock, unless ``monotonic`` is given.
    """

    def __init__(
        self,
        base: Clock,
        ledger: LedgerTime,
        *,
        every: float = 10.0,
        monotonic: Callable[[], float] | None = None,
    ) -> None:
        self.base = base
        self.ledger = ledger
        self.every = every
        self.monotonic = monotonic or (
            time.monotonic if isinstance(base, SystemClock) else base.now
        )
        self.reading: Reading | None = None  # the last sync's

    # what a deadline recorded with this clock's time allows for (see ``ROUND_TRIP``)
    margin = ROUND_TRIP

    def now(self) -> float:
        if self.reading is None:
            return self.base.now()
        return self.reading.ledger + (self.monotonic() - self.reading.monotonic)

    @property
    def offset(self) -> float:
        """How far the ledger's time is ahead of ``base``'s (0.0 before a first answer)."""
        return 0.0 if self.reading is None else self.now() - self.base.now()

    async def sleep(self, seconds: float) -> None:
        await self.base.sleep(seconds)

    async def sync(self) -> None:
        """Ask the ledger for its time again, when the last answer is stale."""
        if not self._stale():
            return
        best: tuple[float, Reading] | None = None
        for _ in range(_TRIES):  # a slow answer may be off by half its round trip: again
            start, host = self.monotonic(), self.base.now()
            try:
                ledger = await self.ledger.ledger_time()
            except Exception as exc:  # the ledger is unreachable: keep what is known
                log.warning("the ledger's clock could not be read: %s", exc)
                return
            took = self.monotonic() - start
            if best is None or took < best[0]:
                best = (took, Reading(ledger, start + took / 2, (host + self.base.now()) / 2))
            if took <= ROUND_TRIP:
                break
        assert best is not None
        if best[0] > ROUND_TRIP and self.reading is not None:
            # a frozen process, or a stalled link: the last answer is the better one
            log.info("the ledger's clock answered after %.1fs at best: not taken", best[0])
            return
        self.reading = best[1]

    def _stale(self) -> bool:
        """Whether the last answer is ``every`` seconds old, or the host's clock stepped."""
        if self.reading is None:
            return True
        elapsed = self.monotonic() - self.reading.monotonic
        stepped = abs(self.base.now() - self.reading.host - elapsed) > STEPPED
        return elapsed >= self.every or stepped


def follow_ledger(clock: Clock | None, ledger: LedgerTime) -> Clock:
    """The ledger's time, read through ``clock`` (this process's own by default). A clock
    that is not a ``SystemClock`` (a test's fake) is taken as the ledger's time itself."""
    base = clock or SystemClock()
    return LedgerClock(base, ledger) if isinstance(base, SystemClock) else base


async def synced(clock: Clock) -> None:
    """Bring ``clock`` in step with the ledger, when it is a ``LedgerClock``."""
    if isinstance(clock, LedgerClock):
        await clock.sync()
