"""Crash for real: a worker process SIGKILLs itself at a site; a fresh one recovers."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from pivotal.clock import FakeClock
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.store import open_store
from pivotal.testing.chaos import SAGA_ID, ChaosScenario, RunResult, World, recover
from pivotal.testing.crash import CrashSite
from pivotal.testing.crashworker import work
from pivotal.testing.invariants import check_invariants

W = TypeVar("W", bound=World)
CHILD_LEASE_TTL = 5.0


def run_killed(
    folder: Path,
    make_world: Callable[[Path], W],
    scenario: ChaosScenario[W],
    site: CrashSite,
    app_spec: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    ledger: str | None = None,
    *,
    fresh_interpreter: bool = False,
) -> RunResult:
    """Submit on files in ``folder``; a worker subprocess dies by SIGKILL at ``site``;
    then a fresh worker (this process) recovers on the same files. ``make_world(folder)``
    must open the same providers that ``app_spec`` loads in the subprocess.

    ``ledger`` is the URL of an empty ledger; by default a SQLite file in ``folder``.

    The worker is forked from this process (fast: nothing is imported again; ``env`` is set
    before ``app_spec`` is loaded), unless this process runs other threads (forking them
    is unsafe) or ``fresh_interpreter`` is given: then it is ``python -m
    pivotal.testing.crashworker``, as a deployment would start it.
    """
    folder.mkdir(parents=True, exist_ok=True)
    ledger = ledger or f"sqlite:///{folder / 'ledger.db'}"
    world = make_world(folder)
    try:
        scenario.prepare(world)
        asyncio.run(_submit(ledger, world, scenario))
        if fresh_interpreter or threading.active_count() > 1:
            returncode, stderr = _exec_worker(
                ledger, app_spec, site, scenario.approve, env, timeout
            )
        else:
            returncode, stderr = _fork_worker(
                ledger, app_spec, site, scenario.approve, env, timeout
            )
        if returncode not in (0, -signal.SIGKILL):
            raise RuntimeError(f"crash worker failed ({returncode}):\n{stderr}")
        fired = int(returncode == -signal.SIGKILL)
        return asyncio.run(_recover(ledger, world, scenario, site, fired))
    finally:
        world.close()


def _exec_worker(
    ledger: str,
    app_spec: str,
    site: CrashSite,
    approve: bool,
    env: Mapping[str, str] | None,
    timeout: float,
) -> tuple[int, str]:
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pivotal.testing.crashworker",
            "--db",
            ledger,
            "--app",
            app_spec,
            "--crash-at",
            str(site),
            "--lease-ttl",
            str(CHILD_LEASE_TTL),
            *(["--approve"] if approve else []),
        ],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return child.returncode, child.stderr


_FORKS = multiprocessing.get_context("fork")


def _fork_worker(
    ledger: str,
    app_spec: str,
    site: CrashSite,
    approve: bool,
    env: Mapping[str, str] | None,
    timeout: float,
) -> tuple[int, str]:
    child = _FORKS.Process(
        target=_forked,
        args=(ledger, app_spec, str(site), approve, dict(env or {})),
        name="pivotal-crashworker",
    )
    child.start()
    child.join(timeout)
    if child.exitcode is None:
        child.kill()
        child.join()
        raise RuntimeError(f"crash worker did not finish within {timeout}s")
    return child.exitcode, "(forked worker: see the captured output for its traceback)"


def _forked(ledger: str, app_spec: str, site: str, approve: bool, env: dict[str, str]) -> None:
    """The forked worker's body: the same as ``python -m pivotal.testing.crashworker``."""
    os.environ.update(env)
    asyncio.run(work(ledger, app_spec, CrashSite.parse(site), approve, CHILD_LEASE_TTL))


async def _submit(ledger: str, world: World, scenario: ChaosScenario[W]) -> None:
    async with open_store(ledger) as store:
        await Orchestrator(store, world.app).submit(scenario.plan, saga_id=SAGA_ID)


async def _recover(
    ledger: str, world: World, scenario: ChaosScenario[W], site: CrashSite, fired: int
) -> RunResult:
    async with open_store(ledger) as store:
        # A fresh worker, started after the dead one's lease ran out.
        clock = FakeClock(start=time.time() + CHILD_LEASE_TTL + 1)
        state, _ = await recover(store, world.app, clock, SAGA_ID, approve=scenario.approve)
        violations = await check_invariants(store, world.probe, [SAGA_ID])
    return RunResult(scenario.name, (site,), fired, state.status, violations)
