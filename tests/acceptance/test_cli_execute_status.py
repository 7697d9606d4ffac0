"""`pivotal execute` ends with a status that tells how the saga ended."""

from __future__ import annotations

import json

from cli_harness import InProcess
from test_cli import checkout, fulfilment, open_checkout, open_fulfilment

from pivotal.cli.ops import EXECUTE_EXIT, EXECUTE_NOT_AT_REST
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.sagas.state import SagaStatus


def test_the_documented_statuses() -> None:
    assert {s.value: code for s, code in EXECUTE_EXIT.items()} == {
        "completed": 0,
        "compensated": 10,
        "compensation_failed": 11,
        "needs_human": 12,
        "awaiting_approval": 13,
        "resolved": 14,
    }
    assert EXECUTE_NOT_AT_REST == 15
    at_rest = {s for s in SagaStatus if s.terminal} | {SagaStatus.AWAITING_APPROVAL}
    assert set(EXECUTE_EXIT) == at_rest


def test_execute_exits_with_the_outcome(inproc: InProcess) -> None:
    services = CommerceServices(inproc.tmp / "commerce.db")
    for order in ("ok", "comp", "cfail"):
        open_checkout(services, order)
    for order in ("f1", "n1"):
        open_fulfilment(services, order, "120")

    def execute(saga: str, plan: dict[str, object]) -> tuple[int, str]:
        done = inproc("execute", inproc.plan(f"{saga}.json", plan), "--saga-id", saga, "--json")
        assert "error [" not in done.stderr, done.stderr
        shown = json.loads(done.stdout)
        assert shown["saga_id"] == saga
        return done.exit_code, shown["status"]

    assert execute("ok", checkout("ok")) == (0, "completed")
    services.faults.next("charge", Fault.PERMANENT)
    assert execute("comp", checkout("comp")) == (10, "compensated")
    services.faults.next("charge", Fault.PERMANENT)
    services.faults.always("release", Fault.PERMANENT)
    assert execute("cfail", checkout("cfail")) == (11, "compensation_failed")
    services.faults.clear()
    assert execute("wait", fulfilment("4471", "180")) == (13, "awaiting_approval")
    services.faults.always("ship", Fault.PERMANENT)
    assert execute("human", fulfilment("n1", "120")) == (12, "needs_human")
    inproc.ok("sagas", "resolve", "human", "--by", "ops", "--reason", "shipped by hand")
    # executing the same plan under the same id again finds the saga as it now is
    assert execute("human", fulfilment("n1", "120")) == (14, "resolved")
    services.close()


def test_an_invalid_plan_exits_1(inproc: InProcess) -> None:
    bad = {"catalogue": "checkout", "steps": [{"name": "teleport", "args": {}}]}
    done = inproc("execute", inproc.plan("bad.json", bad))
    assert done.exit_code == 1
    assert done.stderr.startswith("error [plan_rejected]: the plan has 1 error; nothing was")
    assert "[unknown_step] steps[0]" in done.stderr
