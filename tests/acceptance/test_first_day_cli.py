"""The first day with the command line: one meaning for ``--submit``, the proposer a CLI
submission records, errors as JSON under ``--json``, a late approval that says who decided
it, and a refused webhook that names the flag to type."""

from __future__ import annotations

import getpass
import json
from typing import Any

import pytest
from cli_harness import InProcess
from test_cli import fulfilment

from pivotal.cli import _shared
from pivotal.operations.webhooks import new_secret

TEXT = "ship from the closer warehouse, I expect something for the delay"


def provenance(inproc: InProcess, saga_id: str) -> dict[str, Any]:
    return dict(inproc.json("sagas", "show", saga_id)["provenance"])


# -- plan --submit records, plan --run runs ---------------------------------------------


def test_plan_submit_records_the_saga_and_leaves_it_to_a_worker(inproc: InProcess) -> None:
    planned = inproc.json("plan", TEXT, "--order", "4471", "--submit")
    assert planned["saga_status"] == "submitted"
    shown = inproc.json("sagas", "show", planned["saga_id"])
    assert shown["status"] == "submitted"
    assert {s["status"] for s in shown["steps"]} == {"pending"}  # nothing ran


def test_plan_run_records_the_saga_and_runs_it_here(inproc: InProcess) -> None:
    planned = inproc.json("plan", TEXT, "--order", "4471", "--run")
    assert planned["saga_status"] == "awaiting_approval"  # 180 > 150: it ran to the gate


def test_plan_run_needs_an_app_like_every_writer(inproc: InProcess) -> None:
    before = inproc.ledger.read_bytes()
    done = inproc.raw("--db", inproc.url, "plan", TEXT, "--order", "4471", "--run")
    assert done.exit_code == 2
    assert done.stderr.startswith("error [app_required]: `pivotal plan --run` ")
    assert inproc.ledger.read_bytes() == before  # nothing was written


# -- who a CLI submission records as its proposer ----------------------------------------


def test_submit_records_the_os_user_not_unknown(inproc: InProcess) -> None:
    plan = inproc.plan("plan.json", fulfilment("4471", "180.00"))
    inproc.ok("submit", plan, "--saga-id", "mine")
    recorded = provenance(inproc, "mine")
    assert recorded["actor_id"] == getpass.getuser()
    assert recorded["actor_id"] != "unknown"
    assert recorded["actor_type"] == "human"


def test_submit_and_execute_record_by_when_given(inproc: InProcess) -> None:
    plan = inproc.plan("plan.json", fulfilment("4471", "180.00"))
    inproc.ok("submit", plan, "--saga-id", "by-ann", "--by", "ann")
    assert provenance(inproc, "by-ann")["actor_id"] == "ann"
    done = inproc("execute", plan, "--saga-id", "by-bo", "--by", "bo")
    assert done.exit_code == 13, done.stderr  # awaiting approval
    assert provenance(inproc, "by-bo")["actor_id"] == "bo"
    # and, like any submitter, bo cannot approve what he submitted
    refused = inproc("approvals", "approve", "by-bo", "--by", "bo")
    assert refused.exit_code == 2
    assert "[four_eyes]" in refused.stderr


def test_a_plan_that_names_its_proposer_keeps_it(inproc: InProcess) -> None:
    plan = fulfilment("4471", "180.00") | {
        "provenance": {"actor_type": "agent", "actor_id": "planner-bot"}
    }
    inproc.ok("submit", inproc.plan("plan.json", plan), "--saga-id", "agent")
    recorded = provenance(inproc, "agent")
    assert (recorded["actor_type"], recorded["actor_id"]) == ("agent", "planner-bot")


def test_an_os_that_cannot_say_who_runs_it_is_contained(
    inproc: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_user() -> str:
        raise OSError("No username set in the environment")

    monkeypatch.setattr(getpass, "getuser", no_user)
    assert _shared.os_user() == _shared.OS_USER_UNKNOWN
    plan = inproc.plan("plan.json", fulfilment("4471", "180.00"))
    inproc.ok("submit", plan, "--saga-id", "nobody")
    assert provenance(inproc, "nobody")["actor_id"] == _shared.OS_USER_UNKNOWN


# -- errors under --json ----------------------------------------------------------------


def one_json_error(stderr: str) -> dict[str, Any]:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    found = json.loads(lines[0])
    assert set(found) >= {"error", "message"}
    return dict(found)


def test_an_error_under_json_is_one_json_object_on_stderr(inproc: InProcess) -> None:
    inproc.ok("migrate")
    text = inproc("sagas", "show", "no-such-saga")
    as_json = inproc("sagas", "show", "no-such-saga", "--json")
    assert as_json.exit_code == text.exit_code == 2
    assert text.stderr.startswith("error [saga_not_found]: ")
    assert as_json.stdout == ""
    found = one_json_error(as_json.stderr)
    assert found["error"] == "saga_not_found"
    assert found["message"] == text.stderr.split(": ", 1)[1].strip()


def test_a_usage_error_under_json_is_json_too(inproc: InProcess) -> None:
    done = inproc("sagas", "list", "--limit", "0", "--json")
    assert done.exit_code == 2
    assert one_json_error(done.stderr)["error"] == "usage"


def test_a_rejected_plan_under_json_lists_its_errors(inproc: InProcess) -> None:
    bad = fulfilment("4471", "180.00")
    bad["steps"][2]["args"]["amount"] = "18.00"
    text = inproc("submit", inproc.plan("bad.json", bad))
    done = inproc("submit", inproc.plan("bad.json", bad), "--json")
    assert done.exit_code == text.exit_code == 1
    found = one_json_error(done.stderr)
    assert found["error"] == "plan_rejected"
    assert found["errors"]
    assert {"code", "index", "path", "message"} <= set(found["errors"][0])
    assert not inproc.json("sagas", "list")  # nothing was recorded


def test_json_after_a_double_dash_is_an_argument_not_the_flag() -> None:
    assert _shared.wants_json(["sagas", "show", "x", "--json"])
    assert not _shared.wants_json(["sagas", "show", "--", "--json"])
    assert not _shared.wants_json(["sagas", "show", "x"])


# -- a decision that comes too late says who decided ------------------------------------


def test_approving_a_decided_approval_says_who_decided_it(inproc: InProcess) -> None:
    plan = inproc.plan("plan.json", fulfilment("4471", "180.00"))
    inproc.ok("submit", plan, "--saga-id", "late", "--by", "desk")
    inproc.ok("worker", "--until-idle")
    first = inproc.json("approvals", "approve", "late", "--by", "ann", "--run")
    assert first["status"] == "completed"
    again = inproc("approvals", "approve", "late", "--by", "ann")
    assert again.exit_code == 2
    assert again.stderr.startswith("error [approval_invalid]: saga late was already decided: ")
    assert "the approval of capture_payment was approved by ann at " in again.stderr
    assert "must approve" not in again.stderr
    other = inproc("approvals", "reject", "late", "--by", "bo")
    assert "was approved by ann" in other.stderr


def test_deciding_a_saga_that_never_asked_keeps_the_plain_refusal(inproc: InProcess) -> None:
    plan = inproc.plan("plan.json", fulfilment("4471", "180.00"))
    inproc.ok("submit", plan, "--saga-id", "fresh", "--by", "desk")
    done = inproc("approvals", "approve", "fresh", "--by", "ann")
    assert done.exit_code == 2
    assert "not awaiting an approval decision" in done.stderr


# -- a refused webhook names the flag ---------------------------------------------------


def test_outbox_relay_names_its_allow_insecure_flag(inproc: InProcess) -> None:
    inproc.ok("migrate")
    done = inproc.raw(
        "--db",
        inproc.url,
        "outbox",
        "relay",
        "--until-idle",
        "--webhook",
        "http://hooks.example.com/pivotal",
        "--secret",
        new_secret(),
    )
    assert done.exit_code == 2
    assert done.stderr.startswith("error [webhook_unsafe]: refusing webhook ")
    assert "only https is allowed; --allow-insecure allows it" in done.stderr
    assert "allow_insecure=True" not in done.stderr


def test_worker_names_its_relay_allow_insecure_flag(inproc: InProcess) -> None:
    inproc.env["SHOP_HOOK_SECRET"] = new_secret()
    done = inproc(
        "worker",
        "--until-idle",
        "--relay-webhook",
        "http://hooks.example.com/pivotal",
        "--relay-secret-env",
        "SHOP_HOOK_SECRET",
    )
    assert done.exit_code == 2
    assert "[webhook_unsafe]" in done.stderr
    assert "--relay-allow-insecure allows it" in done.stderr
    assert "allow_insecure=True" not in done.stderr
