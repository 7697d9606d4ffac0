"""A person resumes a parked saga from a step on the command line: `sagas resume ID --from
STEP --by NAME --reason TEXT`."""

from __future__ import annotations

import pytest
from cli_harness import InProcess
from test_cli import fulfilment, open_fulfilment

from pivotal.examples.commerce import CommerceServices, Fault

WHO = ("--by", "ops", "--reason", "shipped by hand")


def parked(inproc: InProcess) -> CommerceServices:
    """Saga "h": a fulfilment whose shipment the carrier keeps refusing, parked."""
    services = CommerceServices(inproc.tmp / "commerce.db")
    open_fulfilment(services, "n1", "120")
    services.faults.always("ship", Fault.PERMANENT)
    done = inproc("execute", inproc.plan("h.json", fulfilment("n1", "120")), "--saga-id", "h")
    assert done.exit_code == 12, done.stderr  # needs_human
    return services


def test_resume_from_a_step_settles_those_before_it_and_goes_on(inproc: InProcess) -> None:
    services = parked(inproc)
    shown = inproc.json(
        "sagas", "resume", "h", "--from", "send_confirmation", *WHO, "--run", "--json"
    )
    assert shown["status"] == "completed"  # the shipment was not called again
    steps = inproc.json("sagas", "show", "h")["steps"]
    assert steps[3]["status"] == "succeeded"
    assert steps[3]["result"] == {"settled_by": "ops", "why": "shipped by hand"}
    events = " ".join(inproc.ok("sagas", "events", "h").split())
    assert "by ops from step 4 (settled by hand: 3): shipped by hand" in events
    assert len(services.rows("emails")) == 1
    services.close()


@pytest.mark.parametrize(
    ("start", "code", "said"),
    [
        ("2", "resume_from_refused", "capture_payment (step 2): it succeeded already"),
        ("nine", "invalid_input", "has no step 'nine'"),
        ("9", "invalid_input", "has no step 9"),
    ],
)
def test_resume_from_a_step_the_machine_refuses_changes_nothing(
    inproc: InProcess, start: str, code: str, said: str
) -> None:
    parked(inproc).close()
    before = len(inproc.json("sagas", "events", "h", "--json")["events"])
    done = inproc("sagas", "resume", "h", "--from", start, *WHO)
    assert done.exit_code == 2, done.stderr
    assert f"error [{code}]" in done.stderr
    assert said in " ".join(done.stderr.split())
    assert inproc.json("sagas", "show", "h")["status"] == "needs_human"
    assert len(inproc.json("sagas", "events", "h", "--json")["events"]) == before


def test_resume_help_says_what_from_does(inproc: InProcess) -> None:
    shown = " ".join(inproc.ok("sagas", "resume", "--help").split())
    for said in ("--from", "settled the steps before it", "point of no return"):
        assert said in shown, said
