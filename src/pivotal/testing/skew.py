"""Processes whose clocks disagree: each sees the run's fake time off by its own offset,
and reads the ledger's time (the run's fake time itself) through a ``LedgerClock``, as every
Pivotal process reads a real ledger's.

    clock = FakeClock()
    ahead = skewed(clock, +65.0)  # this process's wall clock is 65 s ahead
    Orchestrator(store, app, clock=ahead)
"""

from __future__ import annotations

from pivotal.clock import Clock, FakeClock, LedgerClock


class SkewedClock:
    """``base``'s time off by ``offset`` seconds; sleeping moves ``base``."""

    def __init__(self, base: FakeClock, offset: float) -> None:
        self.base = base
        self.offset = offset

    def now(self) -> float:
        return self.base.now() + self.offset

    async def sleep(self, seconds: float) -> None:
        await self.base.sleep(seconds)


class FakeLedger:
    """The ledger's clock of a run: the run's fake time."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    async def ledger_time(self) -> float:
        return self.clock.now()


def skewed(clock: FakeClock, offset: float) -> LedgerClock:
    """A process's clock, ``offset`` seconds off, reading the run's time as its ledger's."""
    return LedgerClock(SkewedClock(clock, offset), FakeLedger(clock), every=0.0)


def fake_of(clock: Clock) -> FakeClock | None:
    """The run's fake clock behind ``clock`` (through skews and ledger clocks), if any."""
    while not isinstance(clock, FakeClock):
        inner = getattr(clock, "base", None)
        if inner is None:
            return None
        clock = inner
    return clock
