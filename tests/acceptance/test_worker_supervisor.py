"""`pivotal worker --processes N`: N real worker processes over one ledger, started,
restarted, stopped and outlived by none, by the process that started them. Every wait is for
an event (a file, a line, a row); BOUND only turns a hang into a failure."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
from test_worker_signals import APP, BOUND, gated, said, submit

pytestmark = pytest.mark.timeout(300)
__all__ = ["gated"]  # the fixture, used here by name


def alive(cli: Any) -> list[dict[str, Any]]:
    return [w for w in cli.json("workers") if w["state"] == "alive"]


def pid_of(worker: dict[str, Any]) -> int:
    return int(worker["name"].rsplit("-", 1)[1])  # the default name: host-pid


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def two_in_flight(cli: Any, *options: str, name: str) -> Any:
    """Two processes, each holding one gated saga's call (one saga a process at most)."""
    submit(cli, "s1")
    submit(cli, "s2")
    base = ("worker", "--processes", "2", "--concurrency", "1", "--poll", "0.05")
    proc = cli.start(*base, *options, name=name, app=APP)
    for saga_id in ("s1", "s2"):
        cli.wait_for((cli.tmp / f"waiting-{saga_id}").exists, BOUND, what=f"{saga_id}'s call")
    return proc


def test_two_processes_share_the_work_and_one_stop_signal_stops_both(gated: Any) -> None:
    cli = gated
    proc = two_in_flight(cli, "--name", "w", name="sup")
    holders = {w["name"]: w["leases"] for w in alive(cli)}
    assert holders == {"w-1": [holders["w-1"][0]], "w-2": [holders["w-2"][0]]}
    assert sorted(holders["w-1"] + holders["w-2"]) == ["s1", "s2"]

    proc.send_signal(signal.SIGTERM)
    for n in (1, 2):
        cli.wait_for(lambda n=n: said(cli, "sup", f"worker w-{n} stopping (SIGTERM)"), BOUND)
    assert proc.poll() is None  # each waits for its call in flight
    (cli.tmp / "go").touch()
    assert proc.wait(timeout=BOUND) == 0
    out, err = cli.output("sup")
    assert "stopping 2 worker processes (SIGTERM)" in err
    assert "worker w-1 stopped: 1 passes" in out
    assert "worker w-2 stopped: 1 passes" in out
    assert "Traceback" not in err
    # each call finished and was recorded; the sagas were given back for a worker to end
    assert cli.sql("SELECT status FROM steps ORDER BY saga_id") == [("succeeded",)] * 2
    assert cli.sql("SELECT lease_owner FROM sagas") == [(None,)] * 2
    assert {w["name"]: w["state"] for w in cli.json("workers")} == {
        "w-1": "stopped",
        "w-2": "stopped",
    }


def test_a_second_signal_abandons_in_every_process_and_exits_130(gated: Any) -> None:
    cli = gated
    proc = two_in_flight(cli, "--json", name="sup")
    proc.send_signal(signal.SIGINT)
    cli.wait_for(lambda: said(cli, "sup", "stopping 2 worker processes (SIGINT)"), BOUND)
    for worker in ("s1", "s2"):  # both have heard it: each says what it waits for
        cli.wait_for(lambda w=worker: said(cli, "sup", f"({w}) to finish"), BOUND)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=BOUND) == 130
    report = json.loads(cli.output("sup")[0])
    assert (report["processes"], report["restarts"]) == (2, 0)
    left = sorted(d["saga_id"] for w in report["workers"] for d in w["abandoned"])
    assert left == ["s1", "s2"]
    assert cli.sql("SELECT status FROM steps ORDER BY saga_id") == [("started",)] * 2


def test_a_process_that_dies_is_started_again_and_named_in_the_report(gated: Any) -> None:
    cli = gated
    proc = cli.start("worker", "--processes", "2", "--poll", "0.05", "--json", name="sup", app=APP)
    first = cli.wait_for(lambda: len(w := alive(cli)) == 2 and w, BOUND, what="two workers")
    killed = pid_of(first[0])
    os.kill(killed, signal.SIGKILL)
    cli.wait_for(lambda: said(cli, "sup", "exited with status -9; starting another in 1s"), BOUND)
    names = {w["name"] for w in first}
    cli.wait_for(lambda: {w["name"] for w in alive(cli)} - names, BOUND, what="a third worker")

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=BOUND) == 0
    report = json.loads(cli.output("sup")[0])
    assert report["restarts"] == 1
    assert {"worker": first[0]["name"], "exit": -signal.SIGKILL} in report["workers"]
    stopped = [w for w in report["workers"] if "passes" in w]
    assert len(stopped) == 2  # the one that lived, and the one started in the dead one's place


def test_no_worker_outlives_the_process_that_started_them(gated: Any) -> None:
    cli = gated
    proc = cli.start("worker", "--processes", "2", "--poll", "0.05", name="sup", app=APP)
    workers = cli.wait_for(lambda: len(w := alive(cli)) == 2 and w, BOUND, what="two workers")
    proc.kill()
    proc.wait(timeout=BOUND)
    for worker in workers:
        cli.wait_for(lambda w=worker: gone(pid_of(w)), BOUND, what=f"{worker['name']} to end")
    # each was asked to stop, and stopped as asked: it gave its name and leases up
    assert {w["state"] for w in cli.json("workers")} == {"stopped"}


def test_a_process_that_cannot_start_stops_them_all_and_says_why_once(gated: Any) -> None:
    cli = gated
    done = cli("worker", "--processes", "3", "--until-idle", app="nosuchmodule:app")
    assert done.returncode == 2
    assert done.stderr.count("error [app_not_found]") == 1  # only the first was started
    assert "worker process 1 exited with status 2 before it started" in done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr


def test_a_ledger_in_memory_is_refused_with_more_than_one_process(gated: Any) -> None:
    cli = gated
    cli.url = "sqlite:///:memory:"
    done = cli("worker", "--processes", "2", "--until-idle", app=APP)
    assert done.returncode == 2
    assert "cannot share a ledger in memory" in done.stderr
    assert "--processes 1" in done.stderr


def test_by_default_one_process_a_core(gated: Any) -> None:
    cli = gated
    del cli.env["PIVOTAL_WORKER_PROCESSES"]
    submit(cli, "d1")
    (cli.tmp / "go").touch()
    report = cli.json("worker", "--until-idle", "--poll", "0.05", app=APP)
    cores = len(os.sched_getaffinity(0))
    if cores == 1:
        assert report["worker"]  # one process: the worker's own report
    else:
        assert report["processes"] == cores
        assert sum(w["finished"].get("completed", 0) for w in report["workers"]) == 1
    assert cli.sql("SELECT status FROM sagas") == [("completed",)]
