"""Crash for real: a worker subprocess SIGKILLs itself at a site; a fresh one recovers."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from pivotal.clock import FakeClock
from pivotal.orchestrator import Orchestrator
from pivotal.store import open_store
from pivotal.testing.chaos import SAGA_ID, ChaosScenario, RunResult, World, recover
from pivotal.testing.crash import CrashSite
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
) -> RunResult:
    """Submit on files in ``folder``; a worker subprocess dies by SIGKILL at ``site``;
    then a fresh worker (this process) recovers on the same files. ``make_world(folder)``
    must open the same providers that ``app_spec`` loads in the subprocess.

    ``ledger`` is the URL of an empty ledger; by default a SQLite file in ``folder``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    ledger = ledger or f"sqlite:///{folder / 'ledger.db'}"
    world = make_world(folder)
    try:
        scenario.prepare(world)
        asyncio.run(_submit(ledger, world, scenario))
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
                *(["--approve"] if scenario.approve else []),
            ],
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if child.returncode not in (0, -signal.SIGKILL):
            raise RuntimeError(f"crash worker failed ({child.returncode}):\n{child.stderr}")
        fired = int(child.returncode == -signal.SIGKILL)
        return asyncio.run(_recover(ledger, world, scenario, site, fired))
    finally:
        world.close()


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
