"""Every crash site of every commerce scenario with a real SIGKILL of a worker process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pivotal.examples.commerce import STATE_ENV
from pivotal.examples.commerce.chaos import CommerceWorld, chaos_scenarios
from pivotal.testing import Chaos, ChaosScenario, trace

SCENARIOS = chaos_scenarios()
APP = "pivotal.examples.commerce:create_app"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_sigkill_at_every_site(
    pivotal_chaos: Chaos, tmp_path: Path, scenario: ChaosScenario[CommerceWorld]
) -> None:
    sites = asyncio.run(trace(CommerceWorld.create, scenario))

    results = pivotal_chaos.explore_killed(
        tmp_path,
        CommerceWorld.create,
        scenario,
        sites,
        APP,
        env=lambda folder: {STATE_ENV: str(folder / "commerce.db")},
    )

    assert len(results) == len(sites) > 0
    not_reached = [str(r.crashes[0]) for r in results if r.fired != 1]
    assert not not_reached, f"the worker was not killed at {not_reached}"
    assert all(r.status.terminal or r.status.value == "awaiting_approval" for r in results)
