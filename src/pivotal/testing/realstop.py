"""Pause for real: a worker process is stopped (SIGSTOP) at a site past its lease, another
takes its saga over and drives it to rest, then the stopped one is continued (SIGCONT).

The worker reaches the site and waits there, its heartbeat still beating, until this
process has stopped it at a moment when it holds no write transaction on the ledger (a
process frozen inside one would hold every other writer up, which is a different fault).
Once its lease has run out on the ledger's clock, this process recovers the saga; then it
lets the stopped worker go on. The invariants are checked after the worker has exited: it
must neither have written nor called anything after losing its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import TypeVar

from pivotal.clock import FakeClock
from pivotal.hooks import Point
from pivotal.store import open_store
from pivotal.testing.chaos import SAGA_ID, ChaosScenario, RunResult, World, recover
from pivotal.testing.crash import CrashSite
from pivotal.testing.crashworker import work
from pivotal.testing.invariants import Violation, check_invariants
from pivotal.testing.realkill import _submit

W = TypeVar("W", bound=World)
STOP_LEASE_TTL = 1.0  # the stopped worker's lease: how long this process waits it out
_FORKS = multiprocessing.get_context("fork")


@dataclass
class WaitAt:
    """A hook that, at ``site``, tells the harness (``reached`` appears) and waits there
    until it may go on (``go`` appears); the harness stops the process meanwhile."""

    site: CrashSite
    folder: Path
    seen: dict[tuple[Point, int], int] = field(default_factory=dict)

    def __call__(self, point: Point, index: int) -> Awaitable[None] | None:
        key = (point, index)
        self.seen[key] = self.seen.get(key, 0) + 1
        if key != (self.site.point, self.site.index) or self.seen[key] != self.site.occurrence:
            return None
        return self._wait()

    async def _wait(self) -> None:
        (self.folder / "reached").touch()
        while not (self.folder / "go").exists():  # noqa: ASYNC110 (another process says)
            await asyncio.sleep(0.01)


def run_stopped(
    folder: Path,
    make_world: Callable[[Path], W],
    scenario: ChaosScenario[W],
    site: CrashSite,
    app_spec: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    ledger: str | None = None,
) -> RunResult:
    """Submit on files in ``folder``; a forked worker is stopped at ``site`` past its lease
    while this process recovers the saga, then continued; the invariants are checked over
    the ledger and the providers once it has exited. ``make_world(folder)`` must open the
    same providers that ``app_spec`` loads in the worker; ``ledger``: an empty ledger's URL
    (by default a SQLite file in ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    ledger = ledger or f"sqlite:///{folder / 'ledger.db'}"
    world = make_world(folder)
    try:
        scenario.prepare(world)
        asyncio.run(_submit(ledger, world, scenario))
        child = _FORKS.Process(
            target=_forked,
            args=(ledger, app_spec, str(site), scenario.approve, dict(env or {}), folder),
            name="pivotal-stopworker",
        )
        child.start()
        try:
            fired = _stop_at_site(child, folder, ledger, timeout)
            if fired:
                time.sleep(STOP_LEASE_TTL + 0.3)  # its lease runs out on the ledger's clock
            result = asyncio.run(_recover(ledger, world, scenario, site, fired))
        finally:
            (folder / "go").touch()
            if child.pid is not None and child.exitcode is None:
                os.kill(child.pid, signal.SIGCONT)
            child.join(timeout)
            if child.exitcode is None:
                child.kill()
                child.join()
                raise RuntimeError(f"the stopped worker did not finish within {timeout}s")
        if child.exitcode != 0:
            raise RuntimeError(f"the stopped worker failed ({child.exitcode})")
        violations = asyncio.run(_violations(ledger, world))
        return RunResult(result.scenario, (site,), fired, result.status, violations)
    finally:
        world.close()


def _forked(
    ledger: str, app_spec: str, site: str, approve: bool, env: dict[str, str], folder: Path
) -> None:
    os.environ.update(env)
    hook = WaitAt(CrashSite.parse(site), folder)
    asyncio.run(work(ledger, app_spec, None, approve, STOP_LEASE_TTL, hook=hook))


def _stop_at_site(child: BaseProcess, folder: Path, ledger: str, timeout: float) -> int:
    """1 once the worker waits at the site and is stopped outside a write transaction; 0
    when it ended without reaching the site."""
    deadline = time.monotonic() + timeout
    while not (folder / "reached").exists():
        if child.exitcode is not None:
            return 0
        if time.monotonic() > deadline:
            raise RuntimeError(f"the worker reached no site within {timeout}s")
        time.sleep(0.01)
    assert child.pid is not None
    while time.monotonic() < deadline:
        os.kill(child.pid, signal.SIGSTOP)
        _until_stopped(child.pid, deadline)
        if not _writing(ledger):
            return 1
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.02)  # let it finish its transaction (a heartbeat), then try again
    raise RuntimeError("the worker was never found outside a write transaction")


def _until_stopped(pid: int, deadline: float) -> None:
    """Wait until the kernel reports ``pid`` stopped (its threads all halted)."""
    stat = Path(f"/proc/{pid}/stat")
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):
            if stat.read_text().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.005)
    raise RuntimeError(f"process {pid} did not stop")


def sqlite_write_locked(path: str | Path) -> bool:
    """Whether some process keeps a write transaction open on the SQLite file ``path``."""
    conn = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


def _writing(ledger: str) -> bool:
    """Whether some process keeps a write transaction open on ``ledger``."""
    if ledger.startswith("sqlite:///"):
        return sqlite_write_locked(ledger.removeprefix("sqlite:///"))
    import psycopg  # PostgreSQL ledgers only

    with psycopg.connect(ledger, autocommit=True) as pg:
        row = pg.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
        ).fetchone()
    return bool(row and row[0])


async def _recover(
    ledger: str, world: World, scenario: ChaosScenario[W], site: CrashSite, fired: int
) -> RunResult:
    async with open_store(ledger) as store:
        clock = FakeClock(start=time.time())
        state, _ = await recover(store, world.app, clock, SAGA_ID, approve=scenario.approve)
    return RunResult(scenario.name, (site,), fired, state.status)


async def _violations(ledger: str, world: World) -> list[Violation]:
    async with open_store(ledger) as store:
        return await check_invariants(store, world.probe, [SAGA_ID])
