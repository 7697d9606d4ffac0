"""Every crash site of every commerce scenario with a real SIGKILL of a worker process,
on a SQLite ledger and on a PostgreSQL one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from pivotal.examples.commerce import STATE_ENV
from pivotal.examples.commerce.chaos import CommerceWorld, chaos_scenarios
from pivotal.testing import Chaos, ChaosScenario, trace

SCENARIOS = chaos_scenarios()
APP = "pivotal.examples.commerce:create_app"


def emptied(url: str, forget: Callable[[str], Awaitable[None]]) -> Callable[[Path], str]:
    """The PostgreSQL ledger at ``url``, emptied of the chaos saga before each run."""

    def ledger(folder: Path) -> str:
        asyncio.run(forget(url))
        return url

    return ledger


@pytest.mark.timeout(300)
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
