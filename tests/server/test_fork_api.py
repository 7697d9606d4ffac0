"""An operator forks a finished saga through the API: its plan with some arguments changed
runs as a new saga, validated against today's facts and approved anew; the reason is on
both sagas; the same request again answers the same fork; bad edits change nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from server_api import Clients, MakeClient, add_token

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus
from pivotal.declarations.plan import ArgChange, parse_plan
from pivotal.errors import FourEyesError, PlanParseError
from pivotal.examples.commerce import CommerceServices
from pivotal.orchestration.fork import fork_id, fork_plan, parse_edit
from pivotal.people.principals import Role
from pivotal.sagas.state import EventType
from pivotal.store import Store

PlanBuilder = Callable[..., Plan]
FEWER = {"0.quantity": 1, "charge_payment.amount": "24.95"}
WHY = "customer asked for fewer"


def reorder(services: CommerceServices, order_id: str, **details: Any) -> None:
    """The order system's facts of ``order_id`` changed since (``details`` replaced), and
    it is open again."""
    row = services.db.execute("SELECT details FROM orders WHERE order_id = ?", (order_id,))
    now = json.loads(row.fetchone()[0]) | details
    services.db.execute(
        "UPDATE orders SET details = ? WHERE order_id = ?", (json.dumps(now), order_id)
    )
    services.set_order_status(order_id, "open")


async def completed(orchestrator: Orchestrator, checkout_plan: PlanBuilder) -> str:
    """Saga "done": two of sku-1 for order k-1, completed; then the customer asks for one."""
    state = await orchestrator.execute(checkout_plan("k-1"), saga_id="done")
    assert state.status is SagaStatus.COMPLETED
    return "done"


async def forks_noted(orchestrator: Orchestrator, saga_id: str) -> list[dict[str, Any]]:
    events = await orchestrator.store.events(saga_id)
    return [dict(e.data) for e in events if e.type is EventType.SAGA_FORKED]


async def test_a_completed_saga_forked_with_fewer_runs_as_a_new_saga(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    original = await completed(orchestrator, checkout_plan)
    reorder(services, "k-1", amount="24.95", lines=[{"sku": "sku-1", "quantity": 1}])
    reply = await as_role[Role.OPERATOR].post(
        f"/v1/sagas/{original}/fork", json={"set": FEWER, "reason": WHY}
    )
    assert reply.status_code == 201, reply.text
    body = reply.json()
    new = body["saga_id"]
    changes = [
        ArgChange(step=0, name="reserve_stock", argument="quantity", was=2, now=1),
        ArgChange(step=1, name="charge_payment", argument="amount", was="49.90", now="24.95"),
    ]
    assert new == fork_id(original, changes, "operator")
    assert (body["status"], body["forked_from"]) == ("submitted", original)
    stored = await orchestrator.get(new)
    forked_from = stored.plan.provenance.forked_from
    assert forked_from is not None
    assert (forked_from.saga_id, forked_from.by, forked_from.reason) == (original, "operator", WHY)
    assert list(forked_from.changes) == changes
    shown = (await as_role[Role.VIEWER].get(f"/v1/sagas/{new}")).json()
    assert shown["provenance"]["forked_from"]["reason"] == WHY
    noted = await forks_noted(orchestrator, original)
    assert [(n["fork"], n["by"], n["why"]) for n in noted] == [(new, "operator", WHY)]
    assert noted[0]["changes"][0] == changes[0].model_dump(mode="json")
    assert (await orchestrator.get(original)).state.status is SagaStatus.COMPLETED

    again = await as_role[Role.OPERATOR].post(
        f"/v1/sagas/{original}/fork", json={"set": FEWER, "reason": "a second click"}
    )
    assert again.status_code == 201, again.text
    assert again.json()["saga_id"] == new  # the same request: the same fork, noted once
    assert len(await forks_noted(orchestrator, original)) == 1
    assert len(await orchestrator.store.list_sagas(None, 10)) == 2
    assert (await orchestrator.run(new)).status is SagaStatus.COMPLETED
    charged = sorted(p["amount"] for p in services.rows("payments", order_id="k-1"))
    assert charged == ["24.95", "49.90"]  # the fork charged anew, what was asked


async def test_a_fork_is_validated_against_the_facts_of_today_and_records_nothing(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    original = await completed(orchestrator, checkout_plan)
    reorder(services, "k-1", amount="24.95", lines=[{"sku": "sku-1", "quantity": 1}])
    reply = await as_role[Role.OPERATOR].post(
        f"/v1/sagas/{original}/fork", json={"set": {"0.quantity": 1}, "reason": WHY}
    )
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["code"] == "plan_rejected"
    assert {e["code"] for e in error["errors"]} == {"fact_mismatch"}
    assert len(await orchestrator.store.list_sagas(None, 10)) == 1
    assert await forks_noted(orchestrator, original) == []


@pytest.mark.parametrize(
    ("body", "status", "code", "said"),
    [
        ({"set": {"7.quantity": 1}, "reason": WHY}, 422, "plan_rejected", "unknown_step"),
        ({"set": {"0.colour": "red"}, "reason": WHY}, 422, "plan_rejected", "invalid_args"),
        ({"set": {"0.quantity": 0}, "reason": WHY}, 422, "plan_rejected", "invalid_args"),
        ({"set": {"0.quantity": "many"}, "reason": WHY}, 422, "plan_rejected", "invalid_args"),
        ({"set": {"quantity": 1}, "reason": WHY}, 422, "invalid_input", "STEP.ARGUMENT"),
        ({"set": {}, "reason": WHY}, 422, "invalid_input", ""),
        ({"set": {"0.quantity": 1}, "reason": " "}, 422, "invalid_input", "needs a reason"),
        ({"set": {"0.quantity": 1}}, 422, "invalid_input", ""),
        ({"set": {"0.quantity": 1}, "reason": "a \u202e b"}, 422, "invalid_input", "control"),
    ],
)
async def test_bad_edits_are_refused_and_change_nothing(
    as_role: Clients,
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    body: dict[str, Any],
    status: int,
    code: str,
    said: str,
) -> None:
    original = await completed(orchestrator, checkout_plan)
    reply = await as_role[Role.OPERATOR].post(f"/v1/sagas/{original}/fork", json=body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code
    assert said in json.dumps(error)
    assert len(await orchestrator.store.list_sagas(None, 10)) == 1
    assert await forks_noted(orchestrator, original) == []


async def test_a_saga_not_finished_is_not_forked(
    as_role: Clients, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="queued")
    reply = await as_role[Role.OPERATOR].post(
        "/v1/sagas/queued/fork", json={"set": {"0.quantity": 1}, "reason": WHY}
    )
    assert reply.status_code == 409, reply.text
    assert reply.json()["error"]["code"] == "saga_not_forkable"
    assert "is submitted: only a finished saga" in reply.json()["error"]["message"]
    missing = await as_role[Role.OPERATOR].post(
        "/v1/sagas/nope/fork", json={"set": {"0.quantity": 1}, "reason": WHY}
    )
    assert missing.status_code == 404
    for role in (Role.AGENT, Role.APPROVER, Role.VIEWER):
        denied = await as_role[role].post(
            "/v1/sagas/queued/fork", json={"set": {"0.quantity": 1}, "reason": WHY}
        )
        assert denied.status_code == 403, role
    assert len(await orchestrator.store.list_sagas(None, 10)) == 1


async def test_whoever_forked_a_saga_cannot_approve_the_fork(
    orchestrator: Orchestrator,
    store: Store,
    clock: FakeClock,
    client: MakeClient,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
) -> None:
    state = await orchestrator.execute(fulfilment_plan("4471"), saga_id="big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert (await orchestrator.approve("big", "ann")).status is SagaStatus.COMPLETED
    services.set_order_status("4471", "open")  # the customer asks for the e-mail again
    operator = client(await add_token(store, "olga", Role.OPERATOR, clock))
    reply = await operator.post(
        "/v1/sagas/big/fork",
        json={"set": {"send_confirmation.template": "shipment_update"}, "reason": "resend"},
    )
    assert reply.status_code == 201, reply.text
    fork = reply.json()["saga_id"]
    waiting = await orchestrator.run(fork)
    assert waiting.status is SagaStatus.AWAITING_APPROVAL  # the policy asks a person again
    for olga in ("olga", "Olga", "ol\u00adga"):
        with pytest.raises(FourEyesError, match="forked saga") as refused:
            await orchestrator.approve(fork, olga, run=False)
        assert refused.value.code == "four_eyes"
    approver = client(await add_token(store, "Olga", Role.APPROVER, clock))  # her other token
    over_http = await approver.post(
        f"/v1/approvals/{fork}/approve", content=json.dumps({"version": waiting.version})
    )
    assert over_http.status_code == 403, over_http.text
    assert over_http.json()["error"]["code"] == "four_eyes"
    # ann, who approved the first, may approve the fork
    assert (await orchestrator.approve(fork, "ann", run=False)).status is SagaStatus.RUNNING


async def test_forking_twice_with_other_edits_makes_another_saga(
    orchestrator: Orchestrator, services: CommerceServices, fulfilment_plan: PlanBuilder
) -> None:
    await orchestrator.execute(fulfilment_plan("4471"), saga_id="big")
    await orchestrator.approve("big", "ann")
    services.set_order_status("4471", "open")
    edits = [parse_edit("send_confirmation.template=shipment_update")]
    first = await orchestrator.fork("big", edits, "olga", "resend")
    other = await orchestrator.fork("big", edits, "maria", "resend too")
    back = await orchestrator.fork("big", [parse_edit("4.template=order_confirmed")], "olga", "x")
    assert len({first.saga_id, other.saga_id, back.saga_id}) == 3
    assert [n["fork"] for n in await forks_noted(orchestrator, "big")] == [
        first.saga_id,
        other.saga_id,
        back.saga_id,
    ]


def test_a_submitted_plan_cannot_claim_to_be_a_fork() -> None:
    forked = {"saga_id": "s", "by": "x", "reason": "y", "changes": []}
    plan = {"catalogue": "checkout", "steps": [], "provenance": {"forked_from": forked}}
    with pytest.raises(PlanParseError, match="forked_from"):
        parse_plan(plan)


async def test_a_fork_recorded_before_a_crash_is_noted_on_the_original_when_asked_again(
    orchestrator: Orchestrator, services: CommerceServices, checkout_plan: PlanBuilder
) -> None:
    original = await completed(orchestrator, checkout_plan)
    reorder(services, "k-1", amount="24.95", lines=[{"sku": "sku-1", "quantity": 1}])
    edits = [parse_edit(f"{k}={json.dumps(v)}") for k, v in FEWER.items()]
    stored = await orchestrator.get(original)
    catalogue = orchestrator.app.catalogue("checkout")
    plan = fork_plan(stored, edits, "ann", WHY, catalogue, orchestrator.clock.now())
    assert plan.provenance.forked_from is not None
    new = fork_id(original, list(plan.provenance.forked_from.changes), "ann")
    await orchestrator.submit(plan, saga_id=new)  # the process died before the note
    assert await forks_noted(orchestrator, original) == []
    again = await orchestrator.fork(original, edits, "Ann", "asked again")
    assert again.saga_id == new
    noted = await forks_noted(orchestrator, original)
    assert [(n["fork"], n["by"], n["why"]) for n in noted] == [(new, "ann", WHY)]
