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


def test_the_compensation_failed_alert_watches_the_ledger_not_a_process() -> None:
    """It reads the ledger gauge, which every serving process reports whoever ended the saga,
    never the per-process counter (blind to unscraped, killed and newly started processes)."""
    [rule] = [r for r in rules() if r["alert"] == "PivotalSagaCompensationFailed"]
    assert referenced(str(rule["expr"])) == {"pivotal_sagas"}


def unit_tests_with(expr: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``alerts_test.yml`` run against the shipped rules with another critical expression."""
    groups = yaml.safe_load(RULES.read_text())
    for rule in groups["groups"][0]["rules"]:
        if rule["alert"] == "PivotalSagaCompensationFailed":
            rule["expr"] = expr
    rules_copy = tmp_path / "alerts.yml"
    rules_copy.write_text(yaml.safe_dump(groups, sort_keys=False))
    cases = yaml.safe_load(TESTS.read_text())
    cases["rule_files"] = [str(rules_copy)]
    tests_copy = tmp_path / "alerts_test.yml"
    tests_copy.write_text(yaml.safe_dump(cases, sort_keys=False))
    return run("test", "rules", str(tests_copy))


def test_the_unit_tests_pass_the_shipped_rule_through_the_same_copy(tmp_path: Path) -> None:
    [rule] = [r for r in rules() if r["alert"] == "PivotalSagaCompensationFailed"]
    done = unit_tests_with(str(rule["expr"]), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


COUNTER_ONLY = (
    'sum by (catalogue) (increase(pivotal_sagas_finished_total{status="compensation_failed"}[15m]))'
    " > 0"
)


@pytest.mark.parametrize(
    "expr",
    [
        COUNTER_ONLY,
        f'({COUNTER_ONLY}) or on() (max(pivotal_sagas{{status="compensation_failed"}}) > 0)',
        'max(pivotal_sagas{status="compensation_failed"}) > 0',
    ],
    ids=["counter-only", "counter-or-gauge", "gauge-without-last-over-time"],
)
def test_the_unit_tests_fail_a_weaker_compensation_failed_rule(expr: str, tmp_path: Path) -> None:
    """The promtool cases catch a rule gone back to the per-process counter (it misses the
    unscraped, new and killed processes and fires on after a settlement), one that adds the
    counter to the gauge (it fires on after a settlement), and a bare gauge (it goes silent
    over a missed read of the ledger)."""
    done = unit_tests_with(expr, tmp_path)
    assert done.returncode != 0, done.stdout
    assert "PivotalSagaCompensationFailed" in done.stdout + done.stderr
    assert "PivotalDeadLettersOpen" not in done.stdout + done.stderr  # only this rule failed


def test_the_rules_use_only_metrics_pivotal_exposes() -> None:
    names = exposed_names()
    for rule in rules():
        used = referenced(str(rule["expr"]))
        assert used, rule["alert"]
        assert used <= names, (rule["alert"], used - names)
