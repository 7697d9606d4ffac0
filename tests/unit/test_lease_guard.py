"""``LeaseKeeper.guard`` runs the work in the caller's task and stops it when the lease is lost.

The loss cancels the caller's task and takes the cancellation back (as ``asyncio.timeout``
does): the caller sees ``LeaseLost``, and its task is not left cancelling. A cancellation
from anyone else goes on as a cancellation, even when the lease is lost too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pivotal import SQLiteStore
from pivotal.clock import FakeClock
from pivotal.errors import LeaseLost
from pivotal.sagas.lease import Lease, LeaseKeeper


async def test_a_lost_lease_stops_the_work_with_lease_lost(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "l.db") as store:
        keeper = LeaseKeeper(store, "me", FakeClock())
        lease = Lease("s", 1, 30.0)
        started, stopped = asyncio.Event(), asyncio.Event()

        async def work() -> str:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                stopped.set()
            return "never"

        async def guarded() -> int:
            with pytest.raises(LeaseLost):
                await keeper.guard(lease, work())
            task = asyncio.current_task()
            assert task is not None
            await asyncio.sleep(0)  # the task goes on: the cancellation was taken back
            return task.cancelling()

        running = asyncio.create_task(guarded())
        await started.wait()
        lease.lose()
        assert await running == 0
        assert stopped.is_set()
        with pytest.raises(LeaseLost):  # a lease lost already never starts work
            await keeper.guard(lease, work())


async def test_a_cancellation_from_elsewhere_stays_a_cancellation(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "l.db") as store:
        keeper = LeaseKeeper(store, "me", FakeClock())
        lease = Lease("s", 1, 30.0)
        started = asyncio.Event()

        async def work() -> None:
            started.set()
            await asyncio.Event().wait()

        running = asyncio.create_task(keeper.guard(lease, work()))
        await started.wait()
        running.cancel()
        lease.lose()
        with pytest.raises(asyncio.CancelledError):
            await running


async def test_work_that_ends_returns_its_result_and_leaves_no_hold(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "l.db") as store:
        keeper = LeaseKeeper(store, "me", FakeClock())
        lease = Lease("s", 1, 30.0)

        async def work() -> str:
            await asyncio.sleep(0)
            return "done"

        assert await keeper.guard(lease, work()) == "done"
        lease.lose()  # too late to matter: nothing is cancelled
        assert lease.lost
