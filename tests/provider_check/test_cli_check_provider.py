"""``pivotal check-provider`` on the bundled commerce example (its services are
simulations: a sandbox) with the example's sandbox file; and what it refuses."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from manual import page
from pivotal.cli import cli
from pivotal.examples.commerce import CommerceApp, CommerceServices
from pivotal.provider_check import Findings, StepFindings, drift

ROOT = Path(__file__).parents[2]
SANDBOX = ROOT / "examples" / "provider_check" / "checkout-sandbox.json"


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIVOTAL_COMMERCE_STATE", str(tmp_path / "commerce.db"))
    monkeypatch.setenv("COLUMNS", "100")
    return CliRunner()


def check(runner: CliRunner, *args: str) -> tuple[int, str, str]:
    """``pivotal --db ... [--example-app] check-provider ARGS`` (``--example-app`` is a
    global option; the command has its own ``--app``)."""
    chosen = ["--example-app"] if "--example-app" in args else []
    rest = [a for a in args if a != "--example-app"]
    done = runner.invoke(
        cli,
        ["--db", "sqlite:///ledger.db", *chosen, "check-provider", *rest],
        catch_exceptions=False,
    )
    return done.exit_code, done.stdout, done.stderr


def test_the_commerce_checkout_keeps_its_promises(runner: CliRunner, tmp_path: Path) -> None:
    record = tmp_path / "checkout.checked.json"
    code, out, _ = check(
        runner,
        "--example-app",
        "--catalogue",
        "checkout",
        "--sandbox",
        str(SANDBOX),
        "--window",
        "0",
        "--wait",
        "1",
        "--record",
        str(record),
    )
    assert code == 0, out
    assert "no promise it relies on broken" in out
    for step in ("reserve_stock", "charge_payment", "create_shipment", "send_confirmation"):
        assert step in out
    assert "more than the warehouse holds: refused with Permanent" in out
    # an email cannot be unsent: the check says what it left (the first call's, the
    # concurrent pair's, and one a cut-off point at least)
    left = [line for line in out.splitlines() if line.startswith("left in the sandbox: ")]
    assert len(left) >= 3
    assert all("send_confirmation:" in line for line in left), left
    assert "send_confirmation:0 (a retriable step has no undo)" in out
    findings = Findings.read(record)
    assert findings.catalogue == "checkout"
    assert findings.steps["charge_payment"].lookup_lag == 0
    assert findings.steps["charge_payment"].replays is True


def test_json_holds_every_row(runner: CliRunner) -> None:
    code, out, _ = check(
        runner,
        "--example-app",
        "--catalogue",
        "checkout",
        "--step",
        "charge_payment",
        "--sandbox",
        str(SANDBOX),
        "--window",
        "0",
        "--json",
    )
    assert code == 0, out
    report = json.loads(out)
    [step] = report["steps"]
    assert step["step"] == "charge_payment"
    assert len(step["rows"]) == 9
    assert {row["verdict"] for row in step["rows"]} <= {"kept", "unknown"}
    assert step["left"] == []


def test_an_app_not_declared_a_sandbox_is_refused(runner: CliRunner) -> None:
    code, out, err = check(runner, "--app", "sandbox_providers:unmarked", "--catalogue", "payments")
    assert code == 2
    assert out == ""
    assert "error [not_a_sandbox]: app 'payments' is not declared a sandbox" in err


def test_the_commerce_example_is_taken_only_on_purpose(runner: CliRunner) -> None:
    code, _, err = check(runner, "--catalogue", "checkout")
    assert code == 2
    assert "--example-app" in err


def test_a_sandbox_file_that_is_not_one_says_where(runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"steps": {"charge_payment": {"arg": {}}}}')
    code, _, err = check(runner, "--example-app", "--catalogue", "checkout", "--sandbox", str(bad))
    assert code == 2
    assert "steps.charge_payment.arg: Extra inputs are not permitted" in err


def test_the_example_test_for_a_teams_ci_passes(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            str(ROOT / "examples" / "provider_check" / "test_sandbox_promises.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def verdict_rows(text: str) -> list[tuple[str, str, str]]:
    """(step, promise, verdict) of every row of a check's table, as printed."""
    rows: list[tuple[str, str, str]] = []
    step = ""
    for line in text.splitlines():
        found = re.match(
            r"^(\w*)\s+(key, in turn|key, at once|lookup lag|lookup, unmade|key window|"
            r"undo twice|undo, unmade|cut-off call|refusal)\s+(kept|broken|covered|unknown)\s",
            line,
        )
        if found:
            step = found.group(1) or step
            rows.append((step, found.group(2), found.group(3)))
    return rows


def test_the_pages_table_is_what_the_check_prints(runner: CliRunner) -> None:
    text = page("how-to/check-providers.md")
    shown = text[text.index("```text\nstep") : text.index("left in the sandbox")]
    code, out, _ = check(
        runner, "--example-app", "--catalogue", "checkout", "--sandbox", str(SANDBOX)
    )
    assert code == 0
    assert verdict_rows(out) == verdict_rows(shown)
    assert len(verdict_rows(out)) == 36
    assert "no promise it relies on broken" in shown


def test_the_pages_warning_is_what_a_worker_says() -> None:
    services = CommerceServices(":memory:")
    catalogue = CommerceApp(services).catalogues["checkout"]
    findings = Findings(
        catalogue="checkout",
        checked_at="2026-12-05T03:40:00+00:00",
        steps={"charge_payment": StepFindings(lookup_lag=2.0)},
    )
    [said] = drift(catalogue, findings)
    folded = " ".join(page("how-to/check-providers.md").split())
    assert f"WARNING pivotal.orchestrator: w-1: {said}" in folded
    services.close()


def test_a_record_into_a_missing_folder_is_refused_before_any_call(
    runner: CliRunner, tmp_path: Path
) -> None:
    code, out, err = check(
        runner,
        "--example-app",
        "--catalogue",
        "checkout",
        "--sandbox",
        str(SANDBOX),
        "--record",
        str(tmp_path / "no" / "such" / "f.json"),
    )
    assert code == 2
    assert out == ""
    assert "its folder does not exist" in err
    services = CommerceServices(tmp_path / "commerce.db")
    assert [r for r in services.rows("calls") if "check-" in str(r)] == []
    services.close()
