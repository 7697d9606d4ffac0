"""A relay process SIGKILLed at every point of its work (after claiming, after the sink got
a message, inside the settle transaction, after settling) loses nothing: the next relay
delivers every message, in order per saga, and a message delivered twice has the same id.

Each relay process is killed the n-th time it reaches the point, n = 1, 2, ... so every
kill falls later in the work, until a process finishes without reaching it."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from itertools import groupby
from pathlib import Path

import pytest

from pivotal import FakeClock
from pivotal.operations.relay import Relay
from pivotal.store import Store
from pivotal.store.postgres import PostgresStore

RunSagas = Callable[..., Awaitable[list[str]]]  # the ``sagas`` fixture
CHILD = str(Path(__file__).with_name("relay_child.py"))
LEASE = 30.0  # the child's lease; each child's clock runs past its predecessors' leases
POINTS = ["claimed", "received", "settling", "settled"]


@pytest.fixture
def clock() -> FakeClock:
    """The sagas' clock: the real time, so that their messages are due for a real relay."""
    return FakeClock(time.time() - 1)


async def relay_process(url: str, received: Path, point: str, nth: int) -> int:
    """Run a relay process that dies the ``nth`` time it reaches ``point``; its status."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        CHILD,
        url,
        str(received),
        point,
        str(nth),
        str((nth - 1) * (LEASE + 1)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 40)
    assert proc.returncode in (0, -signal.SIGKILL), stderr.decode()
    return proc.returncode


@pytest.mark.timeout(120)
@pytest.mark.parametrize("point", POINTS)
async def test_a_relay_killed_at_any_point_loses_nothing(
    store: Store,
    sagas: RunSagas,
    point: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    url = (
        request.getfixturevalue("postgres_url")
        if isinstance(store, PostgresStore)
        else f"sqlite:///{tmp_path / 'ledger.db'}"
    )
    ids = await sagas(3, count=1)
    kept = {saga_id: [m.id for m in await store.messages(saga_id=saga_id)] for saga_id in ids}
    received = tmp_path / "received.txt"

    kills = 0
    for nth in range(1, 20):
        if await relay_process(url, received, point, nth) == 0:
            break
        kills += 1
    else:
        pytest.fail("the relay never finished")
    assert kills >= 2  # it died at this point, at least twice, before finishing

    # a new relay, once every lease ran out, finds nothing left to do
    later = FakeClock(time.time() + 100 * LEASE)
    report = await Relay(store, [_Nothing()], clock=later).run(until_idle=True)
    assert report.claimed == 0
    assert all(m.status == "delivered" for m in await store.messages())

    got = received.read_text().split()
    assert set(got) == {mid for ids_ in kept.values() for mid in ids_}  # nothing lost
    for saga_id, order in kept.items():
        mine = [mid for mid in got if mid.rsplit(":", 2)[0] == saga_id]
        # duplicates are repeats of one id, and never out of order
        assert [mid for mid, _ in groupby(mine)] == order
    if point in ("received", "settling"):
        assert len(got) > len(set(got))  # the kills made the relay deliver again


class _Nothing:
    name = "nothing"

    async def deliver(self, message: object) -> None:
        raise AssertionError(f"nothing should be left to deliver: {message}")
