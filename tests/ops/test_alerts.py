"""The shipped alert rules: promtool accepts them, its unit tests (``alerts_test.yml``: each
alert firing and staying silent) pass, and every metric they use is one Pivotal exposes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from ops_names import exposed_names, referenced

import pivotal.observability

RULES = Path(pivotal.observability.__file__).parent / "alerts.yml"
TESTS = Path(__file__).parent / "alerts_test.yml"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is required in CI and is not on PATH")
        pytest.skip("promtool is not installed")
    return found


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=50, check=False
    )


def test_promtool_accepts_the_rules() -> None:
    done = run("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout


def test_every_alert_fires_and_stays_silent_as_its_unit_tests_say() -> None:
    done = run("test", "rules", str(TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def rules() -> list[dict[str, object]]:
    found: list[dict[str, object]] = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    return found


def test_each_alert_has_a_unit_test_that_fires_it_and_one_where_it_is_silent() -> None:
    tested = yaml.safe_load(TESTS.read_text())["tests"]
    cases = [case for group in tested for case in group["alert_rule_test"]]
    for rule in rules():
        name = rule["alert"]
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c["exp_alerts"] for c in mine), f"{name} is never expected to fire"
        assert any(not c["exp_alerts"] for c in mine), f"{name} is never expected silent"


def test_each_alert_has_a_severity_a_summary_and_a_runbook() -> None:
    for rule in rules():
        labels, notes = rule["labels"], rule["annotations"]
        assert isinstance(labels, dict)
        assert isinstance(notes, dict)
        assert labels["severity"] in {"critical", "warning"}, rule["alert"]
        for field in ("summary", "description", "runbook"):
            assert notes[field], (rule["alert"], field)


def test_the_compensation_failed_alert_fires_at_once() -> None:
    [rule] = [r for r in rules() if r["alert"] == "PivotalSagaCompensationFailed"]
    assert "for" not in rule
    assert re.search(r'status="compensation_failed"', str(rule["expr"]))


def test_the_rules_use_only_metrics_pivotal_exposes() -> None:
    names = exposed_names()
    for rule in rules():
        used = referenced(str(rule["expr"]))
        assert used, rule["alert"]
        assert used <= names, (rule["alert"], used - names)
