"""What `pivotal worker` says while it runs (that it started, and how its work goes), as
text or JSON lines, and what `pivotal migrate` says it did."""

from __future__ import annotations

import itertools
import json
import signal
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)
BOUND = 60.0  # every wait is for something to happen; this only turns a hang into a failure

# One step that holds on until the test creates the file "go", and one that does not.
GATED_APP = """
import asyncio
from pathlib import Path

from pydantic import BaseModel

from pivotal import Catalogue, StepContext

HERE = Path(__file__).parent


class Args(BaseModel):
    n: int = 1


async def forget(args: Args, result: object, ctx: StepContext) -> None:
    return None


app = Catalogue("gated")


@app.compensable(undo=forget)
async def wait_for_go(args: Args, ctx: StepContext) -> dict:
    (HERE / "waiting").touch()
    while not (HERE / "go").exists():
        await asyncio.sleep(0.02)
    return {}


@app.compensable(undo=forget)
async def quick(args: Args, ctx: StepContext) -> dict:
    return {}
"""
APP = "gatedapp:app"


def submit(cli: Any, saga_id: str, step: str) -> None:
    plan = {"catalogue": "gated", "steps": [{"name": step, "args": {}}]}
    cli.ok("submit", cli.plan(f"{saga_id}.json", plan), "--saga-id", saga_id, app=APP)


def json_lines(cli: Any, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in cli.output(name)[1].splitlines() if line.strip()]


def progress(cli: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in json_lines(cli, name) if e.get("event") == "worker_progress"]


def test_the_worker_says_it_started_and_how_its_work_goes_as_json_lines(cli) -> None:
    (cli.tmp / "gatedapp.py").write_text(GATED_APP)
    submit(cli, "slow", "wait_for_go")
    options = ("--name", "w1", "--concurrency", "3", "--log-format", "json")
    proc = cli.start("worker", *options, "--progress-every", "0.05", name="w1", app=APP)

    cli.wait_for(lambda: progress(cli, "w1"), BOUND, what="a progress line")
    started = json_lines(cli, "w1")[0]
    assert started["event"] == "worker_started"
    assert (started["worker"], started["app"], started["concurrency"]) == ("w1", APP, 3)
    assert started["ledger"] == cli.url
    assert "worker w1 started: ledger" in started["message"]

    def holding() -> bool:
        return any(p["in_flight"] == 1 and p["claimed"] == 1 for p in progress(cli, "w1"))

    cli.wait_for(holding, BOUND, what="the slow saga in flight")
    submit(cli, "fast", "quick")

    def fast_done() -> bool:
        return any(p["finished"] == {"completed": 1} for p in progress(cli, "w1"))

    cli.wait_for(fast_done, BOUND, what="the quick saga to finish while the slow one waits")
    (cli.tmp / "go").touch()

    def both_done() -> bool:
        return any(
            p["finished"] == {"completed": 2} and p["in_flight"] == 0 for p in progress(cli, "w1")
        )

    cli.wait_for(both_done, BOUND, what="both sagas finished")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=BOUND) == 0
    lines = json_lines(cli, "w1")
    assert lines[-1]["event"] == "worker_stopped"
    assert (lines[-1]["passes"], lines[-1]["finished"]) == (2, {"completed": 2})
    assert all(line["level"] in ("info", "warning") for line in lines)
    shown = progress(cli, "w1")
    assert all(a != b for a, b in itertools.pairwise(shown))  # only changes are said
    assert "stopped: 2 passes, finished completed 2" in cli.output("w1")[0]


def test_the_worker_says_it_started_and_how_its_work_goes_as_text(cli) -> None:
    (cli.tmp / "gatedapp.py").write_text(GATED_APP)
    submit(cli, "fast", "quick")
    proc = cli.start("worker", "--name", "w2", "--progress-every", "0.05", name="w2", app=APP)

    def said(text: str) -> bool:
        return text in cli.output("w2")[1]

    cli.wait_for(lambda: said("finished completed 1"), BOUND, what="a progress line")
    err = cli.output("w2")[1]
    assert f"worker w2 started: ledger {cli.url}, app {APP}, concurrency 8, lease 30.0s" in err
    assert "worker w2: claimed 1, in flight 0, finished completed 1; 0 leases lost" in err
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=BOUND) == 0
    out, err = cli.output("w2")
    assert "worker w2 stopped: 1 passes, finished completed 1; 0 leases lost, 0 errors" in out
    assert "Traceback" not in err


def test_the_example_worker_names_where_its_services_live(cli) -> None:
    err = cli("worker", "--until-idle", "--name", "w3").stderr
    state = cli.tmp / "commerce.db"
    assert f"app the bundled commerce example (services in {state})" in err


def test_migrate_says_from_which_version_to_which(any_cli: Any, request: Any) -> None:
    cli = any_cli
    if cli.postgres:  # the shared fixture is migrated already: start from an empty database
        cli.url = request.getfixturevalue("postgres_empty_url")
        refused = cli("sagas", "list")
        assert refused.returncode == 2
        assert refused.stderr.startswith("error [schema_mismatch]: ")
    else:  # the fixture's ledger is made: a new file
        cli.url = f"sqlite:///{cli.tmp / 'new.db'}"
    first = cli.json("migrate")
    assert first["from_version"] == 0
    assert first["to_version"] >= 1
    assert first["ledger"] == cli.url
    again = cli.ok("migrate")
    version = first["to_version"]
    assert f"schema version {version}, already up to date" in again
    assert cli.json("sagas", "list") == []


def test_migrate_names_the_versions_in_text(cli) -> None:
    cli.url = f"sqlite:///{cli.tmp / 'new.db'}"
    out = cli.ok("migrate")
    assert out.startswith(f"ledger {cli.url}: schema migrated from version 0 to ")
