"""An operator acts on a saga from the command line (in this process): `sagas abort`,
`sagas rerun`, `sagas events`."""

from __future__ import annotations

import json

import pytest
from cli_harness import InProcess
from test_cli import checkout, fulfilment
from typer.testing import Result

from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.orchestration.rerun import rerun_id


def failed(done: Result, code: str) -> None:
    assert done.exit_code == 2, (done.stdout, done.stderr)
    assert f"error [{code}]" in done.stderr
    assert "Traceback" not in done.stderr


def test_abort_records_it_for_a_worker_or_runs_the_undos_here(inproc: InProcess) -> None:
    for saga in ("s1", "s2"):
        inproc.ok("submit", inproc.plan(f"{saga}.json", checkout("order-1")), "--saga-id", saga)
    shown = inproc.json("sagas", "abort", "s1", "--by", "ops", "--reason", "a duplicate")
    assert shown["status"] == "compensating"  # a worker runs the undos
    assert (shown["aborted_by"], shown["reason"]) == ("ops", "aborted by ops: a duplicate")
    assert "compensated" in inproc.ok(
        "sagas", "abort", "s2", "--by", "ops", "--reason", "dup", "--run"
    )
    failed(inproc("sagas", "abort", "s2", "--by", "ops", "--reason", "again"), "saga_not_abortable")


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["s1", "--by", "ops", "--reason", " "], "invalid_input"),
        (["s1", "--by", "ops", "--reason", "wipe \x1b[2J the screen"], "invalid_input"),
        (["s1", "--by", "ops", "--reason", "turn \u202e around"], "invalid_input"),
        (["s1", "--by", " ", "--reason", "why"], "invalid_input"),
        (["nope", "--by", "ops", "--reason", "why"], "saga_not_found"),
    ],
)
def test_abort_refuses_hostile_reasons_and_unknown_sagas(
    inproc: InProcess, args: list[str], code: str
) -> None:
    inproc.ok("submit", inproc.plan("s1.json", checkout("order-1")), "--saga-id", "s1")
    failed(inproc("sagas", "abort", *args), code)
    assert inproc.json("sagas", "show", "s1")["status"] == "submitted"


def test_abort_of_a_completed_saga_says_why_not_and_a_waiting_one_stops(inproc: InProcess) -> None:
    inproc("execute", inproc.plan("done.json", checkout("order-2")), "--saga-id", "done")
    inproc("execute", inproc.plan("big.json", fulfilment("4471", "180")), "--saga-id", "big")
    done = inproc("sagas", "abort", "done", "--by", "ops", "--reason", "late")
    failed(done, "saga_not_abortable")
    assert "is completed: it cannot be aborted" in done.stderr
    inproc.ok("sagas", "abort", "big", "--by", "ops", "--reason", "late")  # waiting: it stops
    assert inproc.json("sagas", "show", "big")["status"] == "compensating"


def test_rerun_submits_a_compensated_plan_again_once(inproc: InProcess) -> None:
    services = CommerceServices(inproc.tmp / "commerce.db")
    services.faults.next("charge", Fault.PERMANENT)
    services.close()
    declined = inproc("execute", inproc.plan("c.json", checkout("order-3")), "--saga-id", "c")
    assert declined.exit_code == 10, declined.stderr  # compensated
    inproc("execute", inproc.plan("d.json", checkout("order-4")), "--saga-id", "d")

    shown = inproc.json("sagas", "rerun", "c", "--by", "ops")
    assert shown["saga_id"] == rerun_id("c")
    assert (shown["status"], shown["rerun_of"]) == ("submitted", "c")
    again = inproc.json("sagas", "show", rerun_id("c"))
    assert again["provenance"]["rerun_of"] == {"saga_id": "c", "by": "ops"}
    assert inproc.json("sagas", "rerun", "c", "--by", "ann")["saga_id"] == rerun_id("c")
    assert len(inproc.json("sagas", "list")) == 3
    done = inproc("sagas", "rerun", "d", "--by", "ops")
    failed(done, "saga_not_rerunnable")
    assert "is completed: only a compensated saga" in done.stderr
    failed(inproc("sagas", "rerun", "nope", "--by", "ops"), "saga_not_found")


def test_rerun_of_a_saga_whose_undo_was_partial_names_the_step(inproc: InProcess) -> None:
    services = CommerceServices(inproc.tmp / "commerce.db")
    services.faults.always("ship", Fault.PERMANENT)
    services.resell("order-3", "sku-1", 1)  # the release restores one unit of two
    services.close()
    ended = inproc("execute", inproc.plan("p.json", checkout("order-3")), "--saga-id", "p")
    assert ended.exit_code == 10, ended.stderr  # compensated
    refused = inproc("sagas", "rerun", "p", "--by", "ops")
    failed(refused, "saga_not_rerunnable")
    assert "reserve_stock (step 0)" in refused.stderr
    assert len(inproc.json("sagas", "list")) == 1


def test_events_print_the_log_redacted(inproc: InProcess) -> None:
    inproc.ok("submit", inproc.plan("e.json", checkout("order-5")), "--saga-id", "e")
    leaked = "see postgresql://app:hunter2@db/x and api_key=k-123"
    inproc.ok("sagas", "abort", "e", "--by", "ops", "--reason", leaked)
    found = inproc.json("sagas", "events", "e")
    assert found["saga_id"] == "e"
    assert [e["type"] for e in found["events"]] == ["saga_submitted", "compensation_started"]
    dumped = json.dumps(found)
    assert "hunter2" not in dumped
    assert "k-123" not in dumped
    assert "postgresql://app:***@db/x" in found["events"][1]["data"]["reason"]
    text = inproc.ok("sagas", "events", "e")
    assert "compensation_started" in text
    assert "hunter2" not in text
    for shown in (inproc.ok("sagas", "show", "e"), inproc.ok("sagas", "show", "e", "--json")):
        assert "aborted by ops" in shown  # the reason, as every view of the saga shows it
        assert "hunter2" not in shown
        assert "k-123" not in shown
    failed(inproc("sagas", "events", "nope"), "saga_not_found")
