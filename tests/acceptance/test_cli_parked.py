"""Sagas parked for a person, through the command line: resume, resolve, and undo notes."""

from __future__ import annotations

from test_cli import checkout, fulfilment, open_checkout, open_fulfilment

from pivotal.examples.commerce import CommerceServices, Fault


def test_resume_and_resolve_a_parked_saga(cli) -> None:
    services = CommerceServices(cli.tmp / "commerce.db")
    services.faults.always("ship", Fault.PERMANENT)
    for saga in ("r1", "r2"):
        open_fulfilment(services, saga, "120")
        cli.ok("submit", cli.plan(f"{saga}.json", fulfilment(saga, "120")), "--saga-id", saga)
    cli.ok("worker", "--until-idle", "--poll", "0.05")
    assert {s["saga_id"]: s["status"] for s in cli.json("sagas", "list")} == {
        "r1": "needs_human",
        "r2": "needs_human",
    }

    refused = cli("sagas", "resume", "r1", "--by", "ops", "--reason", " ")
    assert refused.returncode != 0
    assert "error [invalid_input]" in refused.stderr
    services.faults.clear()  # the carrier is reachable again
    assert "running" in cli.ok("sagas", "resume", "r1", "--by", "ops", "--reason", "carrier back")
    cli.ok("worker", "--until-idle", "--poll", "0.05")
    assert "resolved" in cli.ok(
        "sagas", "resolve", "r2", "--by", "[red]ops[/red]", "--reason", "shipped by hand"
    )
    again = cli("sagas", "resolve", "r2", "--by", "ops", "--reason", "twice")
    assert again.returncode != 0
    assert "error [saga_not_parked]" in again.stderr

    statuses = {k: v.status.value for k, v in cli.audit().items()}
    assert statuses == {"r1": "completed", "r2": "resolved"}
    shown = cli.ok("sagas", "show", "r1")
    assert "saga_resumed" in shown
    assert "by ops: carrier back" in shown
    r2 = cli.json("sagas", "show", "r2")
    assert r2["reason"] == "resolved by [red]ops[/red]: shipped by hand"
    assert "by [red]ops[/red]: shipped by hand" in cli.ok("sagas", "show", "r2")  # not markup
    services.close()


def test_sagas_show_prints_what_an_undo_reported(cli) -> None:
    services = CommerceServices(cli.tmp / "commerce.db")
    services.faults.always("ship", Fault.PERMANENT)
    open_checkout(services, "n1")
    cli.ok("submit", cli.plan("n.json", checkout("n1")), "--saga-id", "n1")
    cli.ok("worker", "--until-idle", "--poll", "0.05")
    shown = cli.ok("sagas", "show", "n1")
    assert "note: refunded charge" in shown
    assert "note: released reservation" in shown
    services.close()
