"""A person cannot settle by hand, from the command line, an undo that may still land: the
refusal says until when, and nothing is recorded."""

from __future__ import annotations

from test_cli import checkout, open_checkout

from pivotal.examples.commerce import CommerceServices, Fault


def test_resolving_a_release_that_may_still_land_is_refused_and_says_until_when(cli) -> None:
    services = CommerceServices(cli.tmp / "commerce.db")
    services.faults.next("charge", Fault.PERMANENT)
    services.faults.always("release", Fault.TIMEOUT_AFTER_EFFECT)  # its reply lost, each time
    open_checkout(services, "d1")
    cli.ok("submit", cli.plan("d1.json", checkout("d1")), "--saga-id", "d1")
    cli.ok("worker", "--until-idle", "--poll", "0.05", "--sweep-every", "3600")
    [letter] = cli.json("dead-letters", "list")

    done = cli("dead-letters", "resolve", str(letter["id"]), "--by", "bob", "--reason", "by hand")

    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "may_still_land" in said
    assert "cannot land after" in said
    assert "UTC" in said
    assert "Traceback" not in said
    [still] = cli.json("dead-letters", "list")
    assert still["status"] == "open"
    services.close()
