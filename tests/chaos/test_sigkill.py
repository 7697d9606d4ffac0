"""Every crash site of every commerce scenario with a real SIGKILL of a worker process, and
with a real SIGSTOP past its lease (another process takes the saga over and drives it to
rest; the stopped worker, continued, neither writes nor calls anything), on a SQLite ledger
and on a PostgreSQL one."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from pivotal.examples.commerce import STATE_ENV
from pivotal.examples.commerce.chaos import CommerceWorld, chaos_scenarios
from pivotal.testing import Chaos, ChaosScenario, trace
from pivotal.testing.plugin import _REPORT
from pivotal.testing.realstop import run_stopped

SCENARIOS = chaos_scenarios()
APP = "pivotal.examples.commerce:create_app"


def emptied(url: str, forget: Callable[[str], Awaitable[None]]) -> Callable[[Path], str]:
    """The PostgreSQL ledger at ``url``, emptied of the chaos saga before each run."""

    def ledger(folder: Path) -> str:
        asyncio.run(forget(url))
        return url

    return ledger


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_sigkill_at_every_site(
    pivotal_chaos: Chaos,
    tmp_path: Path,
    scenario: ChaosScenario[CommerceWorld],
    backend: str,
    request: pytest.FixtureRequest,
) -> None:
    sites = asyncio.run(trace(CommerceWorld.create, scenario))
    ledger = (
        emptied(request.getfixturevalue("postgres_url"), request.getfixturevalue("forget_saga"))
        if backend == "postgres"
        else None
    )

    results = pivotal_chaos.explore_killed(
        tmp_path,
        CommerceWorld.create,
        scenario,
        sites,
        APP,
        env=lambda folder: {STATE_ENV: str(folder / "commerce.db")},
        ledger=ledger,
        mode="sigkill" if ledger is None else "sigkill-postgres",
    )

    assert len(results) == len(sites) > 0
    not_reached = [str(r.crashes[0]) for r in results if r.fired != 1]
    assert not not_reached, f"the worker was not killed at {not_reached}"
    assert all(r.status.terminal or r.status.value == "awaiting_approval" for r in results)


# The suite stops the worker at every site of a fulfilment on SQLite and of a checkout on
# PostgreSQL; with PIVOTAL_CHAOS_SOAK=1 (make chaos-sigstop) at every site of every other
# scenario on SQLite, and of a parallel group on PostgreSQL.
_SUITE = {("demo-7", "sqlite"), ("demo-1", "postgres")}
_SOAK = {(s.name, "sqlite") for s in SCENARIOS} | {("parallel-refused", "postgres")}
_STOPPED = _SOAK - _SUITE if os.environ.get("PIVOTAL_CHAOS_SOAK") == "1" else _SUITE
STOPPED = [(s, b) for s in SCENARIOS for b in ("sqlite", "postgres") if (s.name, b) in _STOPPED]


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(
    ("scenario", "backend"), STOPPED, ids=[f"{s.name}-{b}" for s, b in STOPPED]
)
def test_sigstop_at_every_site(
    tmp_path: Path,
    scenario: ChaosScenario[CommerceWorld],
    backend: str,
    request: pytest.FixtureRequest,
) -> None:
    report = request.config.stash[_REPORT]
    sites = asyncio.run(trace(CommerceWorld.create, scenario))
    ledger = (
        emptied(request.getfixturevalue("postgres_url"), request.getfixturevalue("forget_saga"))
        if backend == "postgres"
        else None
    )
    results = []
    for n, site in enumerate(sites):
        folder = tmp_path / f"{n:03d}"
        result = run_stopped(
            folder,
            CommerceWorld.create,
            scenario,
            site,
            APP,
            env={STATE_ENV: str(folder / "commerce.db")},
            ledger=ledger(folder) if ledger else None,
        )
        report.add("sigstop" if ledger is None else "sigstop-postgres", result)
        results.append(result)
    Chaos.assert_clean(results)
    not_reached = [str(r.crashes[0]) for r in results if r.fired != 1]
    assert not not_reached, f"the worker was not stopped at {not_reached}"
