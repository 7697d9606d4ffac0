"""An operator forks a finished saga from the command line: `sagas fork ID --set
STEP.ARGUMENT=VALUE ... --by NAME --reason TEXT`."""

from __future__ import annotations

import json

import pytest
from cli_harness import InProcess
from test_cli import checkout
from typer.testing import Result

from pivotal.examples.commerce import CommerceServices

FEWER = ("--set", "0.quantity=1", "--set", "charge_payment.amount=24.95")
WHO = ("--by", "alice", "--reason", "customer asked for fewer")


def failed(done: Result, code: str, status: int = 2) -> None:
    assert done.exit_code == status, (done.stdout, done.stderr)
    assert f"error [{code}]" in done.stderr
    assert "Traceback" not in done.stderr


def completed(inproc: InProcess) -> str:
    """Saga "d": two of sku-1 for order-2, completed; then the order asks for one, open."""
    done = inproc("execute", inproc.plan("d.json", checkout("order-2")), "--saga-id", "d")
    assert done.exit_code == 0, done.stderr
    services = CommerceServices(inproc.tmp / "commerce.db")
    details = {"amount": "24.95", "lines": [{"sku": "sku-1", "quantity": 1}]}
    services.db.execute(
        "UPDATE orders SET details = ? WHERE order_id = 'order-2'", (json.dumps(details),)
    )
    services.set_order_status("order-2", "open")
    services.close()
    return "d"


def test_fork_submits_the_edited_plan_once_and_notes_it_on_both(inproc: InProcess) -> None:
    completed(inproc)
    shown = inproc.json("sagas", "fork", "d", *FEWER, *WHO, "--json")
    fork = shown["saga_id"]
    assert fork.startswith("fk_")
    assert (shown["status"], shown["forked_from"]) == ("submitted", "d")
    new = inproc.json("sagas", "show", fork)
    forked_from = new["provenance"]["forked_from"]
    assert (forked_from["saga_id"], forked_from["by"]) == ("d", "alice")
    assert forked_from["reason"] == "customer asked for fewer"
    assert [(c["argument"], c["was"], c["now"]) for c in forked_from["changes"]] == [
        ("quantity", 2, 1),
        ("amount", "49.90", "24.95"),  # text it was, text it stays
    ]
    events = " ".join(inproc.ok("sagas", "events", "d").split())
    assert "saga_forked" in events
    assert fork in events
    assert "by alice: customer asked for fewer" in events
    again = inproc.json("sagas", "fork", "d", *FEWER, "--by", "alice", "--reason", "retry")
    assert again["saga_id"] == fork
    assert len(inproc.json("sagas", "list")) == 2
    other = inproc.json("sagas", "fork", "d", *FEWER, "--by", "bob", "--reason", "mine")
    assert other["saga_id"] != fork
    assert len(inproc.json("sagas", "list")) == 3


@pytest.mark.parametrize(
    ("edits", "code", "status", "said"),
    [
        (("--set", "9.quantity=1"), "plan_rejected", 1, "the plan has no call 9"),
        (("--set", "refund.amount=1"), "plan_rejected", 1, "does not call 'refund'"),
        (("--set", "0.colour=red"), "plan_rejected", 1, "has no argument 'colour'"),
        (("--set", "0.quantity=0"), "plan_rejected", 1, "quantity"),
        (("--set", "0.quantity=1"), "plan_rejected", 1, "fact_mismatch"),  # amount stale
        (("--set", "quantity=1"), "invalid_input", 2, "STEP.ARGUMENT=VALUE"),
        ((), "usage", 2, "Missing option '--set'"),
    ],
)
def test_bad_edits_are_refused_and_change_nothing(
    inproc: InProcess, edits: tuple[str, ...], code: str, status: int, said: str
) -> None:
    completed(inproc)
    done = inproc("sagas", "fork", "d", *edits, *WHO)
    failed(done, code, status)
    assert said in done.stderr
    assert len(inproc.json("sagas", "list")) == 1
    assert "saga_forked" not in inproc.ok("sagas", "events", "d")


def test_fork_needs_a_reason_and_a_finished_saga(inproc: InProcess) -> None:
    completed(inproc)
    failed(inproc("sagas", "fork", "d", *FEWER, "--by", "alice", "--reason", " "), "invalid_input")
    hidden = inproc("sagas", "fork", "d", *FEWER, "--by", "alice", "--reason", "x \x1b[2J y")
    failed(hidden, "invalid_input")
    assert "control characters" in hidden.stderr
    missing = inproc("sagas", "fork", "d", *FEWER, "--by", "alice")
    assert missing.exit_code == 2
    assert "--reason" in missing.stderr
    inproc.ok("submit", inproc.plan("q.json", checkout("order-3")), "--saga-id", "q")
    queued = inproc("sagas", "fork", "q", *FEWER, *WHO)
    failed(queued, "saga_not_forkable")
    assert "is submitted: only a finished saga" in queued.stderr
    failed(inproc("sagas", "fork", "nope", *FEWER, *WHO), "saga_not_found")
    assert len(inproc.json("sagas", "list")) == 2


def test_fork_help_says_how_to_edit_and_that_effects_are_made_anew(inproc: InProcess) -> None:
    shown = " ".join(inproc.ok("sagas", "fork", "--help").split())
    for said in ("STEP.ARGUMENT=VALUE", "--set 2.amount=1500", "anew", "--reason"):
        assert said in shown, said
