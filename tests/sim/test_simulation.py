"""The engine's main test: the real program simulated, seed after seed.

Each run is the real driver, orchestrator, workers and a person's acts on the real SQLite
ledger, under virtual time, with providers, hosts and clocks that misbehave
(``pivotal.testing.sim``). The shards below run some 20,000 sagas together; a failure
prints the one command that replays its run. ``make explore`` runs many more, from a seed
that changes from run to run.
"""

from __future__ import annotations

import pytest

from pivotal.testing.sim import Settings, simulate
from pivotal.testing.sim.explore import explore

SHARDS = 12
RUNS = 110  # runs a shard: each submits 12 sagas, and a person's re-runs and forks add more
SAGAS = 20_000  # at least, over every shard


@pytest.mark.timeout(600)  # virtual time: a run cannot wait, only loop; this is for a loop
@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_run_keeps_every_invariant(shard: int) -> None:
    found = explore(range(shard * RUNS, (shard + 1) * RUNS))

    assert not found.failed, "\n".join(found.failures())
    assert found.sagas * SHARDS >= SAGAS, f"only {found.sagas} sagas in this shard"
    assert not found.taken_unreachable()
    assert found.faults["a host went away"] > 0
    assert found.faults["a host paused between an intent and its call"] > 0


def test_a_seed_replays_its_run_exactly() -> None:
    first, again = simulate(7), simulate(7)

    assert first.sagas > 0
    assert (first.statuses, first.calls, first.rows, first.acts, first.violations) == (
        again.statuses,
        again.calls,
        again.rows,
        again.acts,
        again.violations,
    )
    assert first.replay().startswith("python -m pivotal.testing.sim --seed 7 ") or (
        "PYTHONHASHSEED=" in first.replay()
    )


def test_a_calm_world_completes_what_needs_no_person() -> None:
    report = simulate(3, Settings(faults=False, person=False))

    assert report.violations == []
    assert set(report.statuses) <= {"completed", "compensated"}
    assert report.statuses["completed"] > 0


def test_the_replay_command_replays_the_run_whatever_the_hash_seed() -> None:
    """The command a failure prints replays its run in a new process, with another hash
    seed too: nothing of a run depends on the order of a set of strings."""
    import os
    import subprocess
    import sys

    said = []
    for hashed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-m", "pivotal.testing.sim", "--seed", "5"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": hashed},
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        said.append(done.stdout)
    assert said[0] == said[1]
    assert said[0].startswith("seed 5: ")
