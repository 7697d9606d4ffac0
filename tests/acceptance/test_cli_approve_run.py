"""``approvals approve`` records the decision and leaves the rest of the saga to a worker,
as the HTTP API and the page do; ``--run`` runs the rest in the approver's shell, and the
output says which."""

from __future__ import annotations

from cli_harness import InProcess
from test_cli import fulfilment


def _waiting(inproc: InProcess, saga_id: str) -> None:
    inproc.ok(
        "submit",
        inproc.plan(f"{saga_id}.json", fulfilment("4471", "180.00")),
        "--saga-id",
        saga_id,
        "--by",
        "desk",
    )
    inproc.ok("worker", "--until-idle", "--poll", "0.01")
    assert inproc.json("sagas", "show", saga_id)["status"] == "awaiting_approval"


def test_approve_records_the_decision_and_a_worker_runs_the_rest(inproc: InProcess) -> None:
    _waiting(inproc, "w1")
    said = inproc.ok("approvals", "approve", "w1", "--by", "ann", "--note", "ok")
    assert said.startswith("approved; a worker runs the rest: saga w1: ")
    shown = inproc.json("sagas", "show", "w1")
    assert shown["status"] != "completed"
    assert (shown["approval"]["status"], shown["approval"]["approver"]) == ("approved", "ann")
    capture = next(s for s in shown["steps"] if s["name"] == "capture_payment")
    assert capture["status"] == "pending"  # nothing ran past the gate in this process
    inproc.ok("worker", "--until-idle", "--poll", "0.01")
    assert inproc.json("sagas", "show", "w1")["status"] == "completed"


def test_approve_with_run_runs_the_rest_here(inproc: InProcess) -> None:
    _waiting(inproc, "w2")
    said = inproc.ok("approvals", "approve", "w2", "--by", "ann", "--run")
    assert said.startswith("approved and ran here: saga w2: completed")
    assert inproc.json("sagas", "show", "w2")["status"] == "completed"


def test_approve_says_which_under_json(inproc: InProcess) -> None:
    _waiting(inproc, "w3")
    recorded = inproc.json("approvals", "approve", "w3", "--by", "ann")
    assert (recorded["saga_id"], recorded["ran_here"]) == ("w3", False)
    assert recorded["status"] != "completed"
    assert recorded["approval"]["approver"] == "ann"


def test_approve_with_run_says_so_under_json(inproc: InProcess) -> None:
    _waiting(inproc, "w4")
    ran = inproc.json("approvals", "approve", "w4", "--by", "ann", "--run")
    assert (ran["status"], ran["ran_here"]) == ("completed", True)
