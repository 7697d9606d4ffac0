"""A chaos report made in a pytest-xdist worker adds up in the controller's: the summary
counts every worker's runs and failures."""

from __future__ import annotations

import json

from pivotal.testing.report import ChaosReport


def report(runs: int, failed: int, scenario: str) -> ChaosReport:
    made = ChaosReport()
    made.cells[("random", scenario, "none")] = [runs, failed]
    made.kinds[("random", "takeover")] = [runs, failed]
    made.failures = [f"{scenario}: broke"] * failed
    made.runs = runs
    return made


def test_two_workers_reports_add_up() -> None:
    total = ChaosReport()
    for worker in (report(5, 1, "demo-1"), report(3, 0, "demo-1"), report(2, 0, "demo-2")):
        total.merge(json.loads(json.dumps(worker.dump())))  # as execnet carries it
    assert total.runs == 10
    assert total.cells == {
        ("random", "demo-1", "none"): [8, 1],
        ("random", "demo-2", "none"): [2, 0],
    }
    assert total.kinds == {("random", "takeover"): [10, 1]}
    assert total.failures == ["demo-1: broke"]
