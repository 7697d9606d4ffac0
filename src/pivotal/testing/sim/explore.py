"""Many simulated runs, one seed each: what they came to together, the machine's rows
they took (measured on the real driver), and each failure with the command that replays it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from pivotal.engine.machine import REACHABLE, TABLE
from pivotal.testing.sim.run import Report, Settings, simulate


@dataclass
class Exploration:
    """What a set of runs came to."""

    runs: int = 0
    sagas: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    rows: Counter[str] = field(default_factory=Counter)
    first: dict[str, int] = field(default_factory=dict)  # a seed that took each row
    acts: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    failed: list[Report] = field(default_factory=list)

    def add(self, report: Report) -> None:
        self.runs += 1
        self.sagas += report.sagas
        self.statuses.update(report.statuses)
        self.rows.update(report.rows)
        for row in report.rows:
            self.first.setdefault(row, report.seed)
        self.acts.update(report.acts)
        self.faults.update(report.faults)
        if report.violations:
            self.failed.append(report)

    def merge(self, other: Exploration) -> None:
        """Take in what another set of runs came to."""
        self.runs += other.runs
        self.sagas += other.sagas
        self.statuses.update(other.statuses)
        self.rows.update(other.rows)
        for row, seed in other.first.items():
            self.first[row] = min(seed, self.first.get(row, seed))
        self.acts.update(other.acts)
        self.faults.update(other.faults)
        self.failed += other.failed

    def missed(self) -> list[str]:
        """The reachable rows of the machine no run took."""
        return [row.id for row in REACHABLE if row.id not in self.rows]

    def taken_unreachable(self) -> list[str]:
        """The rows declared unreachable that a run took all the same."""
        return [row.id for row in TABLE if row.unreachable and row.id in self.rows]

    def failures(self) -> list[str]:
        """Each failed run: its first violations and the command that replays it."""
        out = []
        for report in self.failed:
            said = "\n    ".join(report.violations[:5])
            more = len(report.violations) - 5
            out.append(
                f"seed {report.seed}: {said}"
                + (f"\n    ... and {more} more" if more > 0 else "")
                + f"\n  replay: {report.replay()}"
            )
        return out


def explore(
    seeds: Sequence[int], settings: Settings | None = None, *, jobs: int = 1
) -> Exploration:
    """Run every seed of ``seeds`` and gather what they came to; ``jobs`` processes share
    them (each run is its own world: the answer is the same however they are shared)."""
    if jobs <= 1 or len(seeds) < 2:
        found = Exploration()
        for seed in seeds:
            found.add(simulate(seed, settings))
        return found
    with ProcessPoolExecutor(jobs) as pool:
        parts = pool.map(explore, [seeds[i::jobs] for i in range(jobs)], [settings] * jobs)
        found = Exploration()
        for part in parts:
            found.merge(part)
    return found
