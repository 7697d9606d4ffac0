"""Real `pivotal worker` processes at start and stop: one live worker a name, the default
name ``host-pid``, and Ctrl-C: the first says what it waits for, the second stops waiting,
says what it left in doubt and exits non-zero. Every wait is for an event (a file, a line)."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
from contextlib import closing
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(300)
BOUND = 60.0  # every wait is for something to happen; this only turns a hang into a failure

# One step that says it started, then holds on until the test creates the file "go".
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
    (HERE / f"waiting-{ctx.saga_id}").touch()
    while not (HERE / "go").exists():
        await asyncio.sleep(0.02)
    return {}
"""
APP = "gatedapp:app"


@pytest.fixture
def gated(cli: Any) -> Any:
    (cli.tmp / "gatedapp.py").write_text(GATED_APP)
    return cli


def submit(cli: Any, saga_id: str) -> None:
    plan = {"catalogue": "gated", "steps": [{"name": "wait_for_go", "args": {}}]}
    cli.ok("submit", cli.plan(f"{saga_id}.json", plan), "--saga-id", saga_id, app=APP)


def write(cli: Any, statement: str) -> None:
    with closing(sqlite3.connect(cli.ledger, timeout=10)) as conn, conn:
        conn.execute(statement)


def said(cli: Any, name: str, text: str) -> bool:
    return text in cli.output(name)[1]


def test_ctrl_c_once_says_what_it_waits_for_twice_abandons_and_says_what_is_in_doubt(
    gated: Any,
) -> None:
    cli = gated
    submit(cli, "s1")
    submit(cli, "s2")
    proc = cli.start("worker", "--name", "w", "--poll", "0.05", name="w", app=APP)
    for saga_id in ("s1", "s2"):
        cli.wait_for((cli.tmp / f"waiting-{saga_id}").exists, BOUND, what=f"{saga_id}'s call")

    proc.send_signal(signal.SIGINT)
    cli.wait_for(lambda: said(cli, "w", "stopping (SIGINT)"), BOUND, what="the first answer")
    err = cli.output("w")[1]
    assert "waiting for 2 sagas in flight (s1, s2) to finish their current calls" in err
    assert "release their leases" in err
    assert "Ctrl-C again to stop waiting" in err
    assert proc.poll() is None  # it waits for the calls in flight

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=BOUND) == 130
    out, err = cli.output("w")
    assert "Traceback" not in err
    assert "stop waiting: the calls in flight are abandoned" in err
    assert (
        "worker w stopped waiting: left in doubt s1 (in doubt: 0 wait_for_go); "
        "s2 (in doubt: 0 wait_for_go)"
    ) in out
    assert "their leases lapse within 30s" in out
    # the ledger says the same: intents without outcomes, leases held until they lapse
    rows = cli.sql("SELECT saga_id, status FROM steps ORDER BY saga_id")
    assert rows == [("s1", "started"), ("s2", "started")]
    leases = cli.sql("SELECT saga_id, lease_owner FROM sagas ORDER BY saga_id")
    assert leases == [("s1", "w"), ("s2", "w")]
    [listed] = cli.json("workers")
    assert (listed["name"], listed["state"], listed["leases"]) == ("w", "stopped", ["s1", "s2"])


def test_ctrl_c_with_nothing_in_flight_stops_at_once_and_exits_zero(gated: Any) -> None:
    cli = gated
    proc = cli.start("worker", "--name", "idle", "--poll", "0.05", name="idle", app=APP)
    cli.wait_for(lambda: said(cli, "idle", "worker idle started"), BOUND, what="its start")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=BOUND) == 0
    err = cli.output("idle")[1]
    assert "worker idle stopping (SIGINT): no saga in flight" in err
    assert "Traceback" not in err


def test_json_lines_say_the_stop_and_the_abandon_as_events(gated: Any) -> None:
    cli = gated
    submit(cli, "j1")
    options = ("--name", "wj", "--poll", "0.05", "--log-format", "json", "--json")
    proc = cli.start("worker", *options, name="wj", app=APP)
    cli.wait_for((cli.tmp / "waiting-j1").exists, BOUND, what="j1's call")
    proc.send_signal(signal.SIGTERM)
    cli.wait_for(lambda: said(cli, "wj", '"worker_stopping"'), BOUND, what="the first answer")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=BOUND) == 130
    out, err = cli.output("wj")
    events = {e.get("event"): e for e in map(json.loads, err.splitlines()) if e}
    assert events["worker_stopping"]["in_flight"] == ["j1"]
    assert events["worker_stopping"]["signal"] == "SIGTERM"
    assert "worker_abandoning" in events
    assert events["worker_abandoned"]["abandoned"] == [
        {"saga_id": "j1", "in_doubt": ["0 wait_for_go"]}
    ]
    assert json.loads(out)["abandoned"] == [{"saga_id": "j1", "in_doubt": ["0 wait_for_go"]}]


def test_a_second_worker_with_a_live_ones_name_says_so_and_waits(gated: Any) -> None:
    cli = gated
    first = cli.start("worker", "--name", "dup", "--poll", "0.05", name="dup", app=APP)
    cli.wait_for(lambda: said(cli, "dup", "worker dup started"), BOUND, what="its start")

    second = cli.start("worker", "--name", "dup", "--until-idle", name="dup2", app=APP)
    cli.wait_for(lambda: said(cli, "dup2", "waiting to start"), BOUND, what="the second's word")

    assert second.poll() is None  # it waits: neither refused nor running beside the first
    _, err = cli.output("dup2")
    assert "a worker named 'dup' is already running" in err
    assert "give this one another --name, or stop that one first" in err
    assert "worker dup started" not in err  # it claims nothing while the name is taken
    assert "Traceback" not in err
    [listed] = cli.json("workers")
    assert (listed["name"], listed["state"]) == ("dup", "alive")
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=BOUND) == 0
    # once the first one stopped, the name is free: the second one starts, then ends idle
    assert second.wait(timeout=BOUND) == 0
    assert "worker dup started" in cli.output("dup2")[1]


def test_a_crashed_workers_name_is_taken_over_once_its_heartbeat_is_stale(gated: Any) -> None:
    cli = gated
    cli.ok("worker", "--name", "phoenix", "--until-idle", app=APP)
    [(first_start,)] = cli.sql("SELECT started_at FROM workers")
    # as a worker that was killed leaves it: not stopped, its last beat long ago
    write(cli, "UPDATE workers SET stopped_at = NULL, heartbeat_at = heartbeat_at - 3600")
    taken = cli("worker", "--name", "phoenix", "--until-idle", app=APP)
    assert taken.returncode == 0, taken.stderr
    [(started, stopped)] = cli.sql("SELECT started_at, stopped_at FROM workers")
    assert stopped is not None
    assert started > first_start  # a new start under the old name
    # and one killed a moment ago may be alive (frozen, or slow): it waits, saying so,
    # and starts once that one's heartbeat is stale
    write(cli, "UPDATE workers SET stopped_at = NULL")
    options = ("--name", "phoenix", "--until-idle", "--lease-ttl", "0.3")
    waiting = cli.start("worker", *options, name="phoenix", app=APP)
    cli.wait_for(lambda: said(cli, "phoenix", "waiting to start"), BOUND, what="its word")
    assert "more than 30s old (it crashed), gives its name up" in cli.output("phoenix")[1]
    assert waiting.poll() is None
    write(cli, "UPDATE workers SET heartbeat_at = heartbeat_at - 3600")
    assert waiting.wait(timeout=BOUND) == 0
    assert "worker phoenix started" in cli.output("phoenix")[1]


def test_the_default_name_is_host_and_pid(gated: Any) -> None:
    cli = gated
    proc = cli.start("worker", "--until-idle", name="default", app=APP)
    assert proc.wait(timeout=BOUND) == 0
    name = f"{socket.gethostname()}-{proc.pid}"
    assert f"worker {name} stopped" in cli.output("default")[0]
    [listed] = cli.json("workers")
    assert (listed["name"], listed["state"], listed["catalogues"]) == (name, "stopped", ["gated"])
