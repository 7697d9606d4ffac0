"""The demo plays each source document's scenario in full, and ends with commands that work."""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from pivotal import EventType, SagaStatus, SQLiteStore, StepStatus
from pivotal.examples.commerce import CommerceServices
from pivotal.examples.commerce.demo import PLANNED, Outcome, run_demo, scenarios

PIVOTAL = Path(sys.executable).parent / "pivotal"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One run of the demo: its folder and what it printed."""
    folder = tmp_path_factory.mktemp("demo") / "out"
    console = Console(file=io.StringIO(), width=200, record=True)
    asyncio.run(run_demo(folder, console))
    return folder, console.export_text()


async def outcome(folder: Path, saga_id: str) -> Outcome:
    async with SQLiteStore(folder / "pivotal.db") as store:
        stored = await store.load(saga_id)
        assert stored is not None
        events = await store.events(saga_id)
    return Outcome(stored.state, events, CommerceServices(folder / "commerce.db"))


def test_every_scenario_ends_as_documented_with_its_whole_story(demo: tuple[Path, str]) -> None:
    _, text = demo
    titles = [s.title for s in scenarios()] + [PLANNED]
    rows = [line for line in text.splitlines() if "│ demo-" in line]
    assert len(rows) == len(titles) == 9
    for n, (title, row) in enumerate(zip(titles, rows, strict=True), 1):
        cells = [c.strip() for c in row.strip("│ ").split("│")]
        assert cells[0] == title
        assert cells[1] == f"demo-{n}"
        assert cells[3] == "yes", row
    assert text.count("  ✓ ") >= 25
    assert "  ✗ " not in text


async def test_an_order_that_cannot_ship_refunds_then_releases_and_never_emails(
    demo: tuple[Path, str],
) -> None:
    folder, _ = demo
    o = await outcome(folder, "demo-4")
    try:
        assert o.state.status is SagaStatus.COMPENSATED
        assert [r.name for r in o.state.steps] == [
            "reserve_stock",
            "charge_payment",
            "create_shipment",
            "send_confirmation",
        ]
        undos = [e.step for e in o.events if e.type is EventType.UNDO_STARTED]
        assert undos == [1, 0]  # the refund before the release
        refund, release = o.calls("refund"), o.calls("release")
        assert refund == ["demo-4:1:undo"]
        assert release == ["demo-4:0:undo"]
        order = [c["key"] for c in o.services.calls() if c["key"].startswith("demo-4:")]
        assert order.index(refund[0]) < order.index(release[0])
        assert o.state.steps[3].status is StepStatus.PENDING  # send_confirmation never ran
        assert o.calls("email") == []
        assert o.calls("cancel_shipment") == []  # the refused shipment took no effect
    finally:
        o.services.close()


async def test_a_failed_authorisation_releases_once_though_the_first_release_timed_out(
    demo: tuple[Path, str],
) -> None:
    folder, _ = demo
    o = await outcome(folder, "demo-6")
    try:
        assert o.state.status is SagaStatus.COMPENSATED
        assert o.state.steps[1].status is StepStatus.FAILED  # the authorisation
        calls = o.services.calls("release")
        mine = [c for c in calls if c["key"].startswith("demo-6:")]
        assert [c["key"] for c in mine] == ["demo-6:0:undo"] * 2
        assert [c["fault"] for c in mine] == ["timeout_after_effect", None]
        assert o.effects("release") == ["demo-6:0:undo"]  # the retry changed nothing
        reservations = o.services.rows("reservations", key="demo-6:0")
        assert [r["status"] for r in reservations] == ["released"]
        retried = [e for e in o.events if e.type is EventType.UNDO_RETRY_SCHEDULED]
        assert [(e.step, e.attempt) for e in retried] == [(0, 1)]
        assert o.calls("void") == []  # the declined authorisation took no effect
        assert o.calls("capture") == []
    finally:
        o.services.close()


def test_the_commands_the_demo_ends_with_work_as_printed(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    env |= {"COLUMNS": "250", "NO_COLOR": "1"}
    shown = subprocess.run(
        [str(PIVOTAL), "demo", "--out", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    tail = shown[shown.index("9 sagas in") :]
    commands = [line.strip() for line in tail.splitlines() if line.startswith("  ")]
    assert [re.sub(r"^\S+ ", "pivotal ", c) for c in commands] == [
        "pivotal --db sqlite:///demo/pivotal.db --example-app approvals approve demo-9 --by you "
        "--run",
        "pivotal --db sqlite:///demo/pivotal.db --example-app dead-letters retry 1 --by you",
        "pivotal --db sqlite:///demo/pivotal.db --example-app sagas resume demo-7 --by you "
        "--reason 'carrier is back' --run",
        "pivotal --db sqlite:///demo/pivotal.db sagas list",
    ]
    said = []
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        said.append(done.stdout)
    assert "completed" in said[0]
    assert "settled" in said[1]
    assert "completed" in said[2]
    statuses = dict(re.findall(r"│ (demo-\d) +│ \S+ +│ (\w+)", said[3]))
    assert statuses["demo-9"] == "completed"
    assert statuses["demo-7"] == "completed"
    assert statuses["demo-8"] == "compensated"
