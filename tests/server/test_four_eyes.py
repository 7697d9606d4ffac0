"""Four-eyes through the API: the person an agent asked on behalf of cannot approve, and an
approval that needs two approvers needs two distinct ones."""

from __future__ import annotations

from typing import Any

from server_api import Clients, add_token, approval_plan, as_json

from pivotal import FakeClock, Orchestrator, SagaStatus
from pivotal.examples.commerce import CommerceApp
from pivotal.policy import ThresholdPolicy
from pivotal.principals import Role
from pivotal.store import Store


async def pending(client: Any, orchestrator: Orchestrator, plan: dict[str, Any]) -> int:
    reply = await client.post("/v1/sagas?saga_id=big", content=as_json(plan))
    assert reply.status_code == 201, reply.text
    state = await orchestrator.run("big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state.version


async def test_the_person_asked_on_behalf_of_cannot_approve(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    plan = approval_plan() | {"provenance": {"on_behalf_of": "maria"}}
    version = await pending(as_role[Role.AGENT], orchestrator, plan)
    stored = await store.load("big")
    assert stored is not None
    assert stored.plan.provenance.on_behalf_of == "maria"
    assert stored.plan.provenance.actor_id == "agent"
    maria = client(await add_token(store, "maria", Role.APPROVER, clock))
    refused = await maria.post("/v1/approvals/big/approve", content=as_json({"version": version}))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "four_eyes"
    assert "on behalf of maria" in refused.json()["error"]["message"]
    after = await store.load("big")
    assert after is not None
    assert (after.state.status, after.state.version) == (SagaStatus.AWAITING_APPROVAL, version)
    # she may still reject it; another approver may approve it
    ok = await as_role[Role.APPROVER].post(
        "/v1/approvals/big/approve", content=as_json({"version": version})
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["approval"]["status"] == "approved"
    assert (await orchestrator.run("big")).status is SagaStatus.COMPLETED


async def test_the_person_asked_on_behalf_of_may_reject(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    plan = approval_plan() | {"provenance": {"on_behalf_of": "maria"}}
    version = await pending(as_role[Role.AGENT], orchestrator, plan)
    maria = client(await add_token(store, "maria", Role.APPROVER, clock))
    reply = await maria.post(
        "/v1/approvals/big/reject", content=as_json({"version": version, "reason": "no"})
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["approval"]["status"] == "rejected"


async def test_two_distinct_approvers_through_the_api(
    as_role: Clients,
    orchestrator: Orchestrator,
    store: Store,
    clock: FakeClock,
    client: Any,
    app: CommerceApp,
) -> None:
    app.catalogue("fulfilment").approval = ThresholdPolicy(
        threshold=150, two_approvers_above=160, steps=frozenset({"capture_payment"})
    )
    version = await pending(as_role[Role.AGENT], orchestrator, approval_plan())
    approver = as_role[Role.APPROVER]
    [item] = (await approver.get("/v1/approvals")).json()["items"]
    assert (item["required"], item["approved_by"]) == (2, [])
    first = await approver.post("/v1/approvals/big/approve", content=as_json({"version": version}))
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["status"] == "awaiting_approval"
    assert body["approval"]["status"] == "pending"
    assert body["approval"]["approved_by"] == ["approver"]
    # the same approver again, on the version now shown: refused, nothing recorded
    again = await approver.post(
        "/v1/approvals/big/approve", content=as_json({"version": body["version"]})
    )
    assert again.status_code == 403
    assert again.json()["error"]["code"] == "four_eyes"
    assert "already approved" in again.json()["error"]["message"]
    # a worker pass keeps waiting
    assert (await orchestrator.run("big")).status is SagaStatus.AWAITING_APPROVAL
    [item] = (await approver.get("/v1/approvals")).json()["items"]
    assert item["approved_by"] == ["approver"]
    bob = client(await add_token(store, "bob", Role.APPROVER, clock))
    second = await bob.post(
        "/v1/approvals/big/approve", content=as_json({"version": item["version"]})
    )
    assert second.status_code == 200, second.text
    assert second.json()["approval"]["status"] == "approved"
    assert second.json()["approval"]["approved_by"] == ["approver", "bob"]
    assert (await approver.get("/v1/approvals")).json()["items"] == []
    assert (await orchestrator.run("big")).status is SagaStatus.COMPLETED
    assert await orchestrator.replayed("big") == (await orchestrator.get("big")).state
