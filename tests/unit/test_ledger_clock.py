"""The ledger's clock between two syncs runs on a monotonic clock: a step of the host's
wall clock (back or forward) changes neither its time nor when the offset is asked again."""

from __future__ import annotations

import time

import pytest

from pivotal.clock import ROUND_TRIP, LedgerClock, SystemClock

AHEAD = 50.0  # the ledger's clock is this far ahead of the host's


class Host(SystemClock):
    """This machine's wall clock, which an administrator (or NTP) may step."""

    def __init__(self) -> None:
        self.step = 0.0

    def now(self) -> float:
        return time.time() + self.step


class Ledger:
    """A ledger whose clock is ``AHEAD`` of the real time; counts how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    async def ledger_time(self) -> float:
        self.asked += 1
        return time.time() + AHEAD


@pytest.mark.parametrize("step", [-3600.0, 3600.0], ids=["back", "forward"])
async def test_a_step_of_the_host_clock_leaves_the_ledger_s_time_alone(step: float) -> None:
    host, ledger = Host(), Ledger()
    clock = LedgerClock(host, ledger)
    await clock.sync()
    before = clock.now()
    host.step = step
    after = clock.now()
    assert 0.0 <= after - before < 5.0  # only the time that passed on the monotonic clock
    assert abs(after - (time.time() + AHEAD)) < 5.0


async def test_the_offset_is_asked_again_after_the_host_clock_stepped_back() -> None:
    host, ledger = Host(), Ledger()
    clock = LedgerClock(host, ledger, every=0.0)  # asked at every sync
    await clock.sync()
    host.step = -3600.0
    await clock.sync()
    assert ledger.asked == 2
    assert abs(clock.now() - (time.time() + AHEAD)) < 5.0


class Wall:
    """A host's wall clock that only the test moves (and steps)."""

    def __init__(self) -> None:
        self.at = 1_800_000_000.0

    def now(self) -> float:
        return self.at

    async def sleep(self, seconds: float) -> None:
        self.at += seconds


class Ticks:
    """A monotonic clock that only the test moves."""

    def __init__(self) -> None:
        self.at = 1000.0

    def __call__(self) -> float:
        return self.at


class FixedLedger:
    """A ledger whose time the test sets; counts how often it is asked."""

    def __init__(self, at: float) -> None:
        self.at = at
        self.asked = 0

    async def ledger_time(self) -> float:
        self.asked += 1
        return self.at


def ledger_clock() -> tuple[LedgerClock, Wall, Ticks, FixedLedger]:
    wall, ticks = Wall(), Ticks()
    ledger = FixedLedger(wall.at + AHEAD)
    return LedgerClock(wall, ledger, every=10.0, monotonic=ticks), wall, ticks, ledger


def elapse(seconds: float, wall: Wall, ticks: Ticks, ledger: FixedLedger) -> None:
    """Time passes for everyone alike."""
    wall.at += seconds
    ticks.at += seconds
    ledger.at += seconds


@pytest.mark.parametrize("step", [-3600.0, 3600.0], ids=["back", "forward"])
async def test_between_syncs_the_time_runs_on_the_monotonic_clock(step: float) -> None:
    clock, wall, ticks, ledger = ledger_clock()
    await clock.sync()
    synced = clock.now()
    assert synced == ledger.at
    wall.at += step
    assert clock.now() == synced
    ticks.at += 4.0
    assert clock.now() == synced + 4.0


async def test_the_offset_is_asked_again_on_the_monotonic_schedule() -> None:
    clock, wall, ticks, ledger = ledger_clock()
    await clock.sync()
    elapse(9.5, wall, ticks, ledger)
    await clock.sync()
    assert ledger.asked == 1  # younger than ``every``
    elapse(0.5, wall, ticks, ledger)
    await clock.sync()
    assert ledger.asked == 2


async def test_a_step_back_neither_delays_the_next_sync_nor_is_trusted() -> None:
    clock, wall, ticks, ledger = ledger_clock()
    await clock.sync()
    wall.at -= 3600.0  # the host's clock stepped back: it is asked again at once
    await clock.sync()
    assert ledger.asked == 2
    assert clock.now() == ledger.at
    elapse(5.0, wall, ticks, ledger)
    await clock.sync()
    assert ledger.asked == 2
    elapse(5.0, wall, ticks, ledger)  # ten seconds since, on the monotonic clock
    await clock.sync()
    assert ledger.asked == 3
    assert clock.now() == ledger.at


async def test_a_suspend_the_monotonic_clock_did_not_count_is_asked_about() -> None:
    clock, wall, _, ledger = ledger_clock()
    await clock.sync()
    wall.at += 600.0  # the machine slept: the wall clock and the ledger's moved on
    ledger.at += 600.0
    await clock.sync()
    assert ledger.asked == 2
    assert clock.now() == ledger.at


async def test_an_unreachable_ledger_leaves_the_host_s_time() -> None:
    class Down:
        async def ledger_time(self) -> float:
            raise ConnectionError("the ledger is down")

    wall, ticks = Wall(), Ticks()
    clock = LedgerClock(wall, Down(), monotonic=ticks)
    await clock.sync()
    assert clock.now() == wall.at
    assert clock.offset == 0.0


class FrozenMidway(FixedLedger):
    """A ledger whose answer comes back ``pauses`` seconds late, in turn (the process was
    frozen, or the link stalled, after its request left): time passes meanwhile."""

    def __init__(self, at: float, ticks: Ticks, wall: Wall, pauses: list[float]) -> None:
        super().__init__(at)
        self.ticks, self.wall, self.pauses = ticks, wall, pauses

    async def ledger_time(self) -> float:
        answer = await super().ledger_time()  # read at once, then the reply is held back
        pause = self.pauses.pop(0) if self.pauses else 0.0
        elapse(pause, self.wall, self.ticks, self)
        return answer


async def test_an_answer_held_back_past_a_round_trip_is_not_believed() -> None:
    """Answered at once, the reply held back 8 s: taken for the middle of the round trip,
    the reading would be 4 s ahead, and a deadline would pass 4 s early (the simulation
    found a charge made twice this way). It is not taken; the reading before stays."""
    clock, wall, ticks, _ = ledger_clock()
    await clock.sync()
    assert clock.now() == wall.at + AHEAD
    ledger = FrozenMidway(wall.at + AHEAD, ticks, wall, [8.0, 8.0, 8.0])
    clock.ledger = ledger
    elapse(10.0, wall, ticks, ledger)

    await clock.sync()

    assert ledger.asked == 3  # asked again, for an answer that comes back in time
    assert clock.now() == ledger.at  # still the earlier reading, run on: exact


async def test_a_first_reading_is_asked_again_until_one_comes_back_in_time() -> None:
    wall, ticks = Wall(), Ticks()
    ledger = FrozenMidway(wall.at + AHEAD, ticks, wall, [8.0, 0.2])
    clock = LedgerClock(wall, ledger, every=10.0, monotonic=ticks)

    await clock.sync()

    assert ledger.asked == 2
    assert abs(clock.now() - ledger.at) <= 0.1 + 1e-6  # off by half its round trip at most


def test_a_deadline_recorded_on_the_ledger_s_clock_allows_for_another_reading() -> None:
    assert LedgerClock.margin == ROUND_TRIP  # two readings each within half of it
