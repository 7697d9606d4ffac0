"""The Grafana dashboard and its provisioning: a stable uid, panels that query only the
metrics Pivotal exposes, and a file provider Grafana can load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from ops_names import exposed_names, referenced

import pivotal.observability

GRAFANA = Path(pivotal.observability.__file__).parent / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "pivotal.json"
PROVIDER = GRAFANA / "provisioning" / "dashboards" / "pivotal.yml"


def dashboard() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return found


def queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every query of every panel."""
    return [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        for target in panel.get("targets", ())
    ]


def test_the_dashboard_has_a_stable_uid_and_panels() -> None:
    d = dashboard()
    assert d["uid"] == "pivotal-operations"
    assert d["title"] == "Pivotal operations"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    assert len(queries()) >= 20


def test_every_metric_in_every_panel_is_one_pivotal_exposes() -> None:
    names = exposed_names()
    used: set[str] = set()
    for title, expr in queries():
        found = referenced(expr)
        assert found, f"{title}: {expr} uses no pivotal_* metric"
        assert found <= names, (title, found - names)
        used |= found
    # and the dashboard shows every kind of metric: counters, histograms, ledger gauges
    for expected in (
        "pivotal_sagas_finished_total",
        "pivotal_saga_duration_seconds_bucket",
        "pivotal_step_call_duration_seconds_bucket",
        "pivotal_approval_wait_seconds_bucket",
        "pivotal_compensation_duration_seconds_bucket",
        "pivotal_sagas",
        "pivotal_workers_alive",
        "pivotal_outbox_oldest_age_seconds",
    ):
        assert expected in used, expected


def test_the_check_would_catch_a_misspelt_metric() -> None:
    names = exposed_names()
    assert referenced("rate(pivotal_saga_finished_total[5m])") - names == {
        "pivotal_saga_finished_total"
    }
    assert "pivotal_steps_total" in names
    assert "pivotal_saga_duration_seconds_bucket" in names
    assert "pivotal_dead_letters_open" in names  # a ledger gauge, before any snapshot


def test_quantiles_come_from_histogram_buckets_by_le() -> None:
    quantiles = [e for _, e in queries() if "histogram_quantile" in e]
    assert quantiles
    for expr in quantiles:
        assert "_bucket" in expr
        assert "le" in expr.split("sum by (")[1].split(")")[0]


def test_panels_do_not_overlap() -> None:
    taken: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        g = panel["gridPos"]
        cells = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert g["x"] + g["w"] <= 24, panel["title"]
        assert not cells & taken, panel["title"]
        taken |= cells


def test_the_provider_loads_the_dashboard_from_files() -> None:
    provider = yaml.safe_load(PROVIDER.read_text())
    assert provider["apiVersion"] == 1
    [p] = provider["providers"]
    assert p["type"] == "file"
    assert p["options"]["path"]
