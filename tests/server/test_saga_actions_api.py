"""An operator acts on a saga through the API: abort it before its pivot, run a compensated
plan again, download its events (redacted). Each call only records; a worker (here the
test's orchestrator) does the running."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from server_api import Clients

from pivotal import Orchestrator, Plan, SagaStatus
from pivotal.engine import RunOptions
from pivotal.errors import InvalidInput
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.orchestration.rerun import rerun_id
from pivotal.people.principals import Role

PlanBuilder = Callable[..., Plan]
PAUSE = RunOptions(max_inline_wait=0)  # a retry not yet due ends the pass: it stays running


async def status_of(orchestrator: Orchestrator, saga_id: str) -> SagaStatus:
    return (await orchestrator.get(saga_id)).state.status


async def compensated(
    orchestrator: Orchestrator, services: CommerceServices, checkout_plan: PlanBuilder
) -> str:
    """Saga "c1": a checkout whose card was declined, compensated."""
    services.faults.next("charge", Fault.PERMANENT)
    state = await orchestrator.execute(checkout_plan("k-1"), saga_id="c1")
    assert state.status is SagaStatus.COMPENSATED
    services.faults.clear()
    return "c1"


# -- abort -------------------------------------------------------------------------------


async def test_a_submitted_saga_aborted_compensates_in_a_worker(
    as_role: Clients, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="a1")
    reply = await as_role[Role.OPERATOR].post(
        "/v1/sagas/a1/abort", json={"reason": "the order is a duplicate\nof k-0"}
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "compensating"
    assert body["reason"] == "aborted by operator: the order is a duplicate\nof k-0"
    assert await status_of(orchestrator, "a1") is SagaStatus.COMPENSATING  # nothing ran here
    assert (await orchestrator.run("a1")).status is SagaStatus.COMPENSATED


async def test_a_running_saga_before_its_pivot_is_aborted(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    services.faults.always("charge", Fault.TRANSIENT)
    await orchestrator.submit(checkout_plan("k-1"), saga_id="a2")
    state = await orchestrator.run("a2", options=PAUSE)
    assert state.status is SagaStatus.RUNNING
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/a2/abort", json={"reason": "stop"})
    assert reply.status_code == 200, reply.text
    services.faults.clear()
    assert (await orchestrator.run("a2")).status is SagaStatus.COMPENSATED


async def test_abort_after_the_point_of_no_return_began_is_409_and_records_nothing(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
) -> None:
    services.faults.always("ship", Fault.TRANSIENT)  # captured (the pivot), not yet shipped
    await orchestrator.submit(fulfilment_plan(), saga_id="a3")
    before = await orchestrator.run("a3", options=PAUSE)
    assert before.status is SagaStatus.RUNNING
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/a3/abort", json={"reason": "too late"})
    assert reply.status_code == 409, reply.text
    error = reply.json()["error"]
    assert error["code"] == "saga_not_abortable"
    assert "point of no return" in error["message"]
    assert (await orchestrator.get("a3")).state.version == before.version


async def test_abort_of_a_saga_that_is_over_is_409(
    as_role: Clients, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    state = await orchestrator.execute(checkout_plan("k-1"), saga_id="a4")
    assert state.status is SagaStatus.COMPLETED
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/a4/abort", json={"reason": "no"})
    assert reply.status_code == 409, reply.text
    assert reply.json()["error"]["code"] == "saga_not_abortable"
    assert "is completed: it cannot be aborted" in reply.json()["error"]["message"]


async def test_an_operator_aborts_a_saga_waiting_for_approval(
    as_role: Clients, orchestrator: Orchestrator, fulfilment_plan: PlanBuilder
) -> None:
    state = await orchestrator.execute(fulfilment_plan("4471"), saga_id="a4")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/a4/abort", json={"reason": "no"})
    assert reply.status_code == 200, reply.text
    after = (await orchestrator.get("a4")).state
    assert after.status is SagaStatus.COMPENSATING
    assert (after.reason or "").startswith("aborted by ")
    assert after.approval is not None
    assert after.approval.status.value == "rejected"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"reason": ""},
        {"reason": "   \n "},
        {"reason": "clear \x1b[2J the screen"},
        {"reason": "bell \x07"},
        {"reason": "reordered \u202e text"},
        {"reason": "x" * 4001},
        {"reason": "ok", "run": True},  # no other field
    ],
)
async def test_abort_refuses_a_reason_that_says_nothing_or_hides_something(
    as_role: Clients,
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    body: dict[str, object],
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="a5")
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/a5/abort", json=body)
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["code"] == "invalid_input"
    assert await status_of(orchestrator, "a5") is SagaStatus.SUBMITTED


async def test_unknown_sagas_are_404_on_every_action(as_role: Clients) -> None:
    operator = as_role[Role.OPERATOR]
    for reply in (
        await operator.post("/v1/sagas/nope/abort", json={"reason": "why"}),
        await operator.post("/v1/sagas/nope/rerun"),
        await operator.get("/v1/sagas/nope/events"),
    ):
        assert reply.status_code == 404, reply.text
        assert reply.json()["error"]["code"] == "saga_not_found"


async def test_only_operators_act_and_readers_read_the_events(
    as_role: Clients, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="a6")
    for role in (Role.AGENT, Role.APPROVER, Role.VIEWER):
        abort = await as_role[role].post("/v1/sagas/a6/abort", json={"reason": "mine"})
        rerun = await as_role[role].post("/v1/sagas/a6/rerun")
        assert (abort.status_code, rerun.status_code) == (403, 403), role
        assert abort.json()["error"]["code"] == "forbidden"
    assert (await as_role[Role.AGENT].get("/v1/sagas/a6/events")).status_code == 403
    assert (await as_role[Role.VIEWER].get("/v1/sagas/a6/events")).status_code == 200
    assert await status_of(orchestrator, "a6") is SagaStatus.SUBMITTED


# -- rerun -------------------------------------------------------------------------------


async def test_a_compensated_saga_runs_its_plan_again_as_a_new_saga(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    original = await compensated(orchestrator, services, checkout_plan)
    reply = await as_role[Role.OPERATOR].post(f"/v1/sagas/{original}/rerun")
    assert reply.status_code == 201, reply.text
    body = reply.json()
    new = body["saga_id"]
    assert new == rerun_id(original) != original
    assert (body["status"], body["rerun_of"]) == ("submitted", original)
    stored = await orchestrator.get(new)
    first = await orchestrator.get(original)
    assert stored.plan.steps == first.plan.steps
    rerun_of = stored.plan.provenance.rerun_of
    assert rerun_of is not None
    assert (rerun_of.saga_id, rerun_of.by) == (original, "operator")
    assert stored.plan.provenance.actor_id == first.plan.provenance.actor_id
    shown = (await as_role[Role.VIEWER].get(f"/v1/sagas/{new}")).json()
    assert shown["provenance"]["rerun_of"] == {"saga_id": original, "by": "operator"}

    again = await as_role[Role.OPERATOR].post(f"/v1/sagas/{original}/rerun")
    assert again.status_code == 201
    assert again.json()["saga_id"] == new  # one rerun per saga: a second click changes nothing
    assert len(await orchestrator.store.list_sagas(None, 10)) == 2
    assert (await orchestrator.run(new)).status is SagaStatus.COMPLETED


async def test_the_rerun_is_approved_anew(
    as_role: Clients, orchestrator: Orchestrator, fulfilment_plan: PlanBuilder
) -> None:
    state = await orchestrator.execute(fulfilment_plan("4471"), saga_id="big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert (await orchestrator.reject("big", "ann", "not now")).status is SagaStatus.COMPENSATED
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/big/rerun")
    assert reply.status_code == 201, reply.text
    again = await orchestrator.run(reply.json()["saga_id"])
    assert again.status is SagaStatus.AWAITING_APPROVAL  # the policy asks a person again


async def test_a_rerun_is_validated_against_the_facts_of_today(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    original = await compensated(orchestrator, services, checkout_plan)
    row = services.db.execute("SELECT details FROM orders WHERE order_id = 'k-1'").fetchone()
    details = json.loads(row[0]) | {"amount": "59.90"}  # the order changed since
    services.db.execute(
        "UPDATE orders SET details = ? WHERE order_id = 'k-1'", (json.dumps(details),)
    )
    reply = await as_role[Role.OPERATOR].post(f"/v1/sagas/{original}/rerun")
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["code"] == "plan_rejected"
    assert await orchestrator.store.load(rerun_id(original)) is None


async def test_rerun_of_a_completed_or_running_saga_is_refused(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    await orchestrator.execute(checkout_plan("k-1"), saga_id="done")
    services.faults.always("charge", Fault.TRANSIENT)
    await orchestrator.submit(checkout_plan("k-2"), saga_id="busy")
    assert (await orchestrator.run("busy", options=PAUSE)).status is SagaStatus.RUNNING
    for saga_id, status in (("done", "completed"), ("busy", "running")):
        reply = await as_role[Role.OPERATOR].post(f"/v1/sagas/{saga_id}/rerun")
        assert reply.status_code == 409, reply.text
        error = reply.json()["error"]
        assert error["code"] == "saga_not_rerunnable"
        assert f"is {status}: only a compensated saga" in error["message"]
    assert len(await orchestrator.store.list_sagas(None, 10)) == 2


async def test_rerun_of_a_compensated_saga_whose_undo_was_partial_is_refused(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    """One of the two reserved units was re-sold: its release restored only part. Running
    the plan again would reserve and charge in full while the first saga's effect stays."""
    services.faults.always("ship", Fault.PERMANENT)
    services.resell("k-1", "sku-1", 1)
    state = await orchestrator.execute(checkout_plan("k-1"), saga_id="part")
    assert state.status is SagaStatus.COMPENSATED
    services.faults.clear()
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/part/rerun")
    assert reply.status_code == 409, reply.text
    error = reply.json()["error"]
    assert error["code"] == "saga_not_rerunnable"
    assert "reserve_stock (step 0)" in error["message"]
    assert "undone only in part" in error["message"]
    assert await orchestrator.store.load(rerun_id("part")) is None


# -- events ------------------------------------------------------------------------------


async def test_the_events_come_as_json_with_secrets_redacted(
    as_role: Clients, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="e1")
    leaked = "see postgresql://app:hunter2@db/x?password=s3cret and token=abc123"
    await orchestrator.abort("e1", "ops", leaked)
    reply = await as_role[Role.VIEWER].get("/v1/sagas/e1/events")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["saga_id"] == "e1"
    assert [e["type"] for e in body["events"]] == ["saga_submitted", "compensation_started"]
    assert [e["seq"] for e in body["events"]] == [1, 2]
    text = json.dumps(body)
    assert "hunter2" not in text
    assert "s3cret" not in text
    assert "abc123" not in text
    assert "postgresql://app:***@db/x?password=***" in body["events"][1]["data"]["reason"]
    assert body["events"][0]["data"]["catalogue"] == "checkout"  # the rest as it is


async def test_rerun_after_a_failed_compensation_is_refused_and_needs_a_name(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    services.faults.next("charge", Fault.PERMANENT).always("release", Fault.PERMANENT)
    state = await orchestrator.execute(checkout_plan("k-1"), saga_id="cf")
    assert state.status is SagaStatus.COMPENSATION_FAILED  # the stock is still held
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/cf/rerun")
    assert reply.status_code == 409, reply.text
    assert "is compensation_failed: only a compensated saga" in reply.json()["error"]["message"]
    with pytest.raises(InvalidInput, match="who asked"):
        await orchestrator.rerun("cf", " ")
    assert await orchestrator.store.load(rerun_id("cf")) is None


def test_a_submitted_plan_cannot_claim_to_rerun_a_saga() -> None:
    """``rerun_of`` is recorded by the orchestrator's rerun only: every surface parses an
    outside plan with ``parse_plan``, which refuses it."""
    from pivotal import PlanParseError, parse_plan

    forged = {
        "catalogue": "checkout",
        "steps": [],
        "rationale": "r",
        "provenance": {"actor_id": "bot", "rerun_of": {"saga_id": "s-1", "by": "ana"}},
    }
    with pytest.raises(PlanParseError, match="cannot claim it"):
        parse_plan(forged)
