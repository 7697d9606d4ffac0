"""Exploring crash sites and summing up: crash point x scenario -> runs, failures."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

from pivotal.hooks import Point
from pivotal.testing.chaos import (
    ChaosScenario,
    LedgerFactory,
    RunResult,
    World,
    memory_ledger,
    run_in_process,
    trace,
)
from pivotal.testing.crash import CrashSite
from pivotal.testing.realkill import run_killed

W = TypeVar("W", bound=World)
NO_CRASH = "no_crash"
SHORT = {
    NO_CRASH: "none",
    Point.BEFORE_INTENT.value: "pre-int",
    Point.AFTER_INTENT.value: "int",
    Point.AFTER_EFFECT.value: "effect",
    Point.BEFORE_UNDO_INTENT.value: "pre-undo",
    Point.AFTER_UNDO_INTENT.value: "undo-int",
    Point.AFTER_UNDO_EFFECT.value: "undo-eff",
    Point.AWAITING_APPROVAL.value: "approval",
}
# What each column of the crash-point table means: its caption, and the legend on the
# testing how-to page.
LEGEND = {
    "none": "no crash",
    "pre-int": "before a step's intent was committed",
    "int": "after the intent was committed, before the action was called",
    "effect": "after the action returned, before its result was recorded",
    "pre-undo": "before an undo's intent was committed",
    "undo-int": "after an undo's intent, before the undo was called",
    "undo-eff": "after the undo returned, before its result was recorded",
    "approval": "after the approval request was committed",
}
CELLS = (
    "runs/failures: how many runs crashed at that point (none: did not crash), and how "
    "many of them broke an invariant"
)


def legend() -> str:
    """The crash-point table's caption: what a cell holds, then each column's abbreviation
    on a line of its own."""
    width = max(map(len, LEGEND))
    return "\n".join([CELLS, *(f"{short:<{width}}  {what}" for short, what in LEGEND.items())])


@dataclass
class ChaosReport:
    """Runs and invariant failures per (mode, scenario, crash point)."""

    cells: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    runs: int = 0
    kinds: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (mode, kind)

    def add(self, mode: str, result: RunResult) -> None:
        """Count the run under each crash point it met (a run may crash several times)."""
        self.runs += 1
        points = {s.point.value for s in result.crashes[: result.fired]} or {NO_CRASH}
        for point in points:
            cell = self.cells.setdefault((mode, result.scenario, point), [0, 0])
            cell[0] += 1
            cell[1] += bool(result.violations)
        for kind in set(result.kinds) or {"crashes only"}:
            cell = self.kinds.setdefault((mode, kind), [0, 0])
            cell[0] += 1
            cell[1] += bool(result.violations)
        crashes = ", ".join(map(str, result.crashes)) or "none"
        self.failures += [f"{result.scenario} @ {crashes}: {v}" for v in result.violations]

    def dump(self) -> dict[str, Any]:
        """The report as plain data (what a pytest-xdist worker sends its controller)."""
        return {
            "cells": [[*key, *counts] for key, counts in self.cells.items()],
            "kinds": [[*key, *counts] for key, counts in self.kinds.items()],
            "failures": list(self.failures),
            "runs": self.runs,
        }

    def merge(self, data: dict[str, Any]) -> None:
        """Add a report ``dump`` made elsewhere to this one."""
        for mode, scenario, point, runs, failed in data["cells"]:
            cell = self.cells.setdefault((mode, scenario, point), [0, 0])
            cell[0], cell[1] = cell[0] + runs, cell[1] + failed
        for mode, kind, runs, failed in data["kinds"]:
            cell = self.kinds.setdefault((mode, kind), [0, 0])
            cell[0], cell[1] = cell[0] + runs, cell[1] + failed
        self.failures += data["failures"]
        self.runs += data["runs"]

    def table(self) -> Table:
        points = [NO_CRASH, *(p.value for p in Point)]
        table = Table(
            title="pivotal chaos: runs/failures by crash point",
            caption=legend(),
            caption_justify="left",
            header_style="dim",
            box=None,
        )
        table.add_column("mode", no_wrap=True)
        table.add_column("scenario", no_wrap=True)
        for p in points:
            table.add_column(SHORT[p], justify="right", no_wrap=True)
        rows = sorted({(m, s) for m, s, _ in self.cells})
        for mode, scenario in rows:
            cells = [self.cells.get((mode, scenario, p)) for p in points]
            table.add_row(mode, scenario, *(f"{c[0]}/{c[1]}" if c else "" for c in cells))
        return table

    def kinds_table(self) -> Table:
        """Runs and failures per mode and fault kind (a run counts under each it met)."""
        table = Table(
            title="pivotal chaos: runs/failures by fault kind", header_style="dim", box=None
        )
        kinds = sorted({k for _, k in self.kinds})
        table.add_column("mode", no_wrap=True)
        for kind in kinds:
            table.add_column(kind, justify="right", no_wrap=True)
        for mode in sorted({m for m, _ in self.kinds}):
            cells = [self.kinds.get((mode, k)) for k in kinds]
            table.add_row(mode, *(f"{c[0]}/{c[1]}" if c else "" for c in cells))
        return table

    def totals(self) -> tuple[int, int]:
        """(runs, runs with failures): a run is counted once, whatever it crashed at."""
        return self.runs, len({f.split(": [")[0] for f in self.failures})

    def render(self, width: int = 160) -> str:
        console = Console(width=width, record=True, file=io.StringIO())
        console.print(self.table())
        console.print(self.kinds_table())
        runs, bad = self.totals()
        console.print(f"{runs} runs, {bad} with invariant failures")
        return console.export_text()


class Chaos:
    """What the ``pivotal_chaos`` fixture gives a test."""

    def __init__(self, report: ChaosReport | None = None) -> None:
        self.report = report or ChaosReport()

    async def explore(
        self,
        make_world: Callable[[], W],
        scenarios: Iterable[ChaosScenario[W]],
        *,
        ledger: LedgerFactory = memory_ledger,
        mode: str = "in-process",
    ) -> list[RunResult]:
        """Each scenario without a crash, then crashed in-process at every site it reaches,
        each run on an empty ledger from ``ledger``.

        Raises ``AssertionError`` listing every broken invariant.
        """
        results = []
        for scenario in scenarios:
            sites: Sequence[CrashSite | None] = [None, *await trace(make_world, scenario)]
            for site in sites:
                crashes = [site] if site else []
                result = await run_in_process(make_world, scenario, crashes, ledger=ledger)
                self.report.add(mode, result)
                results.append(result)
        self.assert_clean(results)
        return results

    def explore_killed(
        self,
        folder: Path,
        make_world: Callable[[Path], W],
        scenario: ChaosScenario[W],
        sites: Iterable[CrashSite],
        app_spec: str,
        env: Callable[[Path], Mapping[str, str]] | None = None,
        *,
        ledger: Callable[[Path], str] | None = None,
        mode: str = "sigkill",
    ) -> list[RunResult]:
        """The scenario with a real SIGKILL at each site, each run in its own sub-folder.

        ``env(run_folder)`` gives the worker subprocess's extra environment, e.g. where
        ``app_spec`` finds the providers' state. ``ledger(run_folder)`` gives the URL of an
        empty ledger for the run; by default a SQLite file in the run folder.
        """
        results = []
        for n, site in enumerate(sites):
            run_folder = folder / f"{n:03d}"
            extra = env(run_folder) if env else None
            url = ledger(run_folder) if ledger else None
            result = run_killed(run_folder, make_world, scenario, site, app_spec, extra, ledger=url)
            self.report.add(mode, result)
            results.append(result)
        self.assert_clean(results)
        return results

    @staticmethod
    def assert_clean(results: Iterable[RunResult]) -> None:
        broken = [
            f"{r.scenario} @ {', '.join(map(str, r.crashes)) or 'no crash'}: {v}"
            for r in results
            for v in r.violations
        ]
        if broken:
            raise AssertionError("invariants broken:\n  " + "\n  ".join(broken))
