"""What a check records, and what a worker says at start when the catalogue it serves
declares less than its providers were seen to need; the helper for a team's own tests."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from sandbox_providers import SANDBOX, Knobs, Provider, payments

from pivotal import FakeClock, Orchestrator, SQLiteStore
from pivotal.errors import InvalidInput
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.provider_check import Findings, Options, check_provider, drift
from pivotal.store import Store
from pivotal.testing.providers import assert_promises_kept

QUICK = Options(wait=10.0, poll=0.1, window=0.0)


async def recorded(knobs: Knobs, path: Path) -> Findings:
    clock = FakeClock()
    report = await check_provider(
        payments(Provider(clock, knobs)), "payments", sandbox=SANDBOX, options=QUICK, clock=clock
    )
    report.findings().write(path)
    return Findings.read(path)


async def test_findings_round_trip_and_name_every_drift(tmp_path: Path) -> None:
    path = tmp_path / "payments.checked.json"
    findings = await recorded(Knobs(lag=2.0, lands_after=5.0, replays=False), path)
    assert json.loads(path.read_text())["catalogue"] == "payments"
    catalogue = payments(Provider(FakeClock())).catalogues["payments"]

    said = drift(catalogue, findings)

    assert len(said) == 3, said
    assert "declares lookup_lag=0.5" in said[0]
    assert "declare lookup_lag=3" in said[0]
    assert "doubt_grace is 2 s" in said[1]
    assert "declare doubt_grace=7.5" in said[1]
    assert "declare repeatable=False" in said[2]


async def test_an_honest_provider_leaves_nothing_to_say(tmp_path: Path) -> None:
    findings = await recorded(Knobs(), tmp_path / "ok.json")
    catalogue = payments(Provider(FakeClock())).catalogues["payments"]
    assert drift(catalogue, findings) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not what `pivotal check-provider --record` writes"),
        ('{"catalogue": "payments", "checked_at": "x", "steps": {}, "more": 1}', "more"),
        (None, "No such file"),
    ],
)
def test_findings_that_cannot_be_read_say_why(
    tmp_path: Path, text: str | None, message: str
) -> None:
    path = tmp_path / "findings.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(InvalidInput, match=message):
        Findings.read(path)


async def test_a_worker_warns_at_start_where_its_catalogue_declares_less(
    store: Store, clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "payments.checked.json"
    await recorded(Knobs(lag=2.0), path)
    missing = tmp_path / "none.json"
    for checked, expected in ((path, "declare lookup_lag=3"), (missing, "No such file")):
        app = payments(Provider(clock), checked=str(checked))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pivotal.orchestrator"):
            orch = Orchestrator(store, app, clock=clock, owner=f"w-{checked.stem}")
            await asyncio.wait_for(
                Worker(orch, WorkerConfig(poll_interval=0.001)).run(until_idle=True), 30
            )
        said = [r.getMessage() for r in caplog.records if r.name == "pivotal.orchestrator"]
        assert any(expected in m and m.startswith(f"w-{checked.stem}: ") for m in said), said


def test_every_path_that_runs_sagas_is_told_where_it_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``execute``, the ADK agent and the API build an orchestrator as a worker does: the
    warning is said where it is made, once for each."""
    path = tmp_path / "payments.checked.json"
    asyncio.run(recorded(Knobs(replays=False), path))
    app = payments(Provider(FakeClock()), checked=str(path))
    with caplog.at_level(logging.WARNING, logger="pivotal.orchestrator"):
        Orchestrator(SQLiteStore(tmp_path / "never-opened.db"), app, owner="o-1")
    said = [r.getMessage() for r in caplog.records if r.name == "pivotal.orchestrator"]
    assert len(said) == 1
    assert "o-1: " in said[0]
    assert "declare repeatable=False" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pivotal.orchestrator"):
        Orchestrator(
            SQLiteStore(tmp_path / "never-opened.db"), payments(Provider(FakeClock())), owner="o-2"
        )
    assert caplog.records == []  # nothing recorded, nothing said


def test_the_helper_fails_naming_the_broken_promise_and_passes_the_honest() -> None:
    clock = FakeClock()
    report = assert_promises_kept(
        payments(Provider(clock)), "payments", sandbox=SANDBOX, options=QUICK, clock=clock
    )
    assert report.broken == []
    with pytest.raises(AssertionError, match="one key, one effect"):
        assert_promises_kept(
            payments(Provider(clock, Knobs(replays=False))),
            "payments",
            sandbox=SANDBOX,
            options=QUICK,
            clock=clock,
        )
