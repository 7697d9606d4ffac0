"""``pivotal report``: tables for people, JSON for machines, clear errors, read only."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from report_ledger import Ledger, build_ledger
from typer.testing import CliRunner

from pivotal import FakeClock, Orchestrator, SQLiteStore
from pivotal.cli import cli
from pivotal.examples.commerce import CommerceApp, Fault, Faults


def iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat()


@pytest.fixture
async def ledger_file(
    tmp_path: Path,
    app: CommerceApp,
    clock: FakeClock,
    faults: Faults,
    checkout_plan: Any,
    fulfilment_plan: Any,
) -> tuple[Path, Ledger]:
    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        orchestrator = Orchestrator(store, app, clock=clock, rng=random.Random(0))
        built = await build_ledger(
            store, clock, orchestrator, faults, checkout_plan, fulfilment_plan
        )
    return path, built


def pivotal(ledger: Path, *args: str) -> tuple[int, str, str]:
    done = CliRunner().invoke(cli, ["--db", f"sqlite:///{ledger}", *args], env={"COLUMNS": "200"})
    return done.exit_code, done.stdout, done.stderr


def week_of(built: Ledger) -> list[str]:
    return ["--since", iso(built.now - 7 * 86_400), "--until", iso(built.now + 1)]


def test_the_text_report_shows_causes_sagas_provenance_and_the_planner(
    ledger_file: tuple[Path, Ledger],
) -> None:
    path, built = ledger_file
    status, out, err = pivotal(path, "report", *week_of(built))
    assert status == 0, err
    assert "7 sagas did not complete: 4 compensated, 1 compensation_failed, 2 needs_human" in out
    assert "by cause" in out
    for label in (
        "charge_payment: permanent: 2 sagas",
        "capture_payment: approval rejected: 1 saga",
        "capture_payment: approval expired: 1 saga",
        "create_shipment: unknown after the point of no return: 1 saga",
        "poison: 1 saga",
        "undo dead-lettered: reserve_stock: 1 saga",
    ):
        assert label in out, label
    assert "agent:order-bot (gpt-test, prompt checkout-v3) for alice" in out
    assert "human:bob" in out
    assert "[started by create_shipment: permanent]" in out
    assert "old-declined" not in out
    assert (
        "planner: 2 runs (live: 1 accepted, 1 escalated), 3 rejected attempts, 1 escalation" in out
    )
    assert "unknown_step" in out
    assert "invalid_args" in out
    assert "partial" not in out


def test_json_is_the_whole_report(ledger_file: tuple[Path, Ledger]) -> None:
    path, built = ledger_file
    status, out, err = pivotal(path, "report", *week_of(built), "--json")
    assert status == 0, err
    report = json.loads(out)
    assert report["sagas"] == 7
    assert report["truncated"] is False
    labels = [g["cause"]["label"] for g in report["causes"]]
    assert labels[0] == "charge_payment: permanent"
    first = report["causes"][0]["sagas"][0]
    assert first["provenance"]["on_behalf_of"] == "alice"
    assert first["provenance"]["actor_type"] == "agent"
    assert report["planner"]["codes"][0] == {
        "code": "unknown_step",
        "errors": 2,
        "attempts": 2,
        "validator": True,
    }


def test_a_partial_report_says_so(ledger_file: tuple[Path, Ledger]) -> None:
    path, built = ledger_file
    status, out, err = pivotal(path, "report", *week_of(built), "--limit", "2")
    assert status == 0, err
    assert "partial: sagas (compensated)" in out
    assert "reached the limit of 2 rows" in out
    status, out, _ = pivotal(path, "report", *week_of(built), "--limit", "2", "--json")
    assert json.loads(out)["truncated"] is True


def test_show_caps_the_sagas_listed_per_cause(ledger_file: tuple[Path, Ledger]) -> None:
    path, built = ledger_file
    status, out, err = pivotal(path, "report", *week_of(built), "--show", "1")
    assert status == 0, err
    assert "1 more not shown" in out


def test_a_duration_counts_back_from_the_wall_clock(
    tmp_path: Path, app: CommerceApp, faults: Faults, checkout_plan: Any
) -> None:
    path = tmp_path / "ledger.db"

    async def recent() -> None:  # a checkout declined a minute ago by the wall clock
        async with SQLiteStore(path) as store:
            orchestrator = Orchestrator(store, app, clock=FakeClock(time.time() - 60))
            faults.next("charge", Fault.PERMANENT)
            await orchestrator.execute(checkout_plan("o-now"), saga_id="recent")

    asyncio.run(recent())
    status, out, err = pivotal(path, "report", "--since", "1d", "--json")
    assert status == 0, err
    assert json.loads(out)["by_status"]["compensated"] == 1
    status, out, err = pivotal(path, "report", "--since", "1d", "--until", "1h", "--json")
    assert status == 0, err
    assert json.loads(out)["sagas"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "last week"], "neither a duration"),
        (["--since", "1d", "--until", "2d"], "at or after it ends"),
        (["--limit", "0"], "--limit"),
    ],
)
def test_bad_input_is_one_error_line(tmp_path: Path, args: list[str], message: str) -> None:
    path = tmp_path / "ledger.db"
    status, _, err = pivotal(path, "report", *args)
    assert status == 2
    assert message in err
    assert err.startswith("error [")
    assert "Traceback" not in err


def test_a_missing_ledger_is_never_created(tmp_path: Path) -> None:
    path = tmp_path / "none.db"
    status, _, err = pivotal(path, "report")
    assert status == 2
    assert "no ledger at" in err
    assert not path.exists()
