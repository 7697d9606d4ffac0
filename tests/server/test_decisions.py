"""Approvers decide on the version they were shown (409 if it changed), never on their own
saga (four-eyes); agents can neither decide nor settle anything."""

from __future__ import annotations

from typing import Any

import pytest
from server_api import Clients, add_token, approval_plan, as_json

from pivotal import FakeClock, Orchestrator, SagaStatus
from pivotal.people.principals import Role
from pivotal.store import Store
from pivotal.views.saga_scope import scoped

BIG = scoped("agent", "big")  # the agent's saga "big" as it is stored and people see it


async def pending(client: Any, orchestrator: Orchestrator, saga_id: str = "big") -> int:
    """Submit the 180 fulfilment through ``client`` (the agent's "big" is stored as ``BIG``;
    an admin's id is kept as it is); a worker runs it to the approval."""
    reply = await client.post(f"/v1/sagas?saga_id={saga_id}", content=as_json(approval_plan()))
    assert reply.status_code == 201, reply.text
    state = await orchestrator.run(BIG)
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state.version


async def test_an_approver_approves_the_version_shown_and_a_worker_goes_on(
    as_role: Clients, orchestrator: Orchestrator
) -> None:
    await pending(as_role[Role.AGENT], orchestrator)
    queue = (await as_role[Role.APPROVER].get("/v1/approvals")).json()
    [item] = queue["items"]
    assert item["saga_id"] == BIG
    assert item["step"] == "capture_payment"
    assert item["provenance"]["actor_id"] == "agent"
    decision = {"reason": "looks right", "version": item["version"]}
    reply = await as_role[Role.APPROVER].post(
        f"/v1/approvals/{BIG}/approve", content=as_json(decision)
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["approval"]["status"] == "approved"
    assert reply.json()["approval"]["approver"] == "approver"
    assert reply.json()["version"] > item["version"]
    assert (await orchestrator.run(BIG)).status is SagaStatus.COMPLETED


async def test_a_stale_decision_is_409_and_records_nothing(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    version = await pending(as_role[Role.AGENT], orchestrator)
    approver = as_role[Role.APPROVER]
    stale = await approver.post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": version - 1})
    )
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "version_conflict"
    stored = await store.load(BIG)
    assert stored is not None
    assert stored.state.version == version
    # two approvers were shown the same version; the second decision is refused
    other = client(await add_token(store, "bob", Role.APPROVER, clock))
    first = await other.post(
        f"/v1/approvals/{BIG}/reject", content=as_json({"reason": "no", "version": version})
    )
    assert first.status_code == 200
    second = await approver.post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": version})
    )
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "version_conflict"
    after = await store.load(BIG)
    assert after is not None
    assert after.state.approval is not None
    assert after.state.approval.approver == "bob"


async def test_four_eyes_the_submitter_cannot_approve_its_own_saga(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    admin = as_role[Role.ADMIN]
    version = await pending(admin, orchestrator, BIG)
    refused = await admin.post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": version})
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "four_eyes"
    # an approver token for the same principal name is the same person
    same = client(await add_token(store, "admin", Role.APPROVER, clock))
    again = await same.post(f"/v1/approvals/{BIG}/approve", content=as_json({"version": version}))
    assert again.json()["error"]["code"] == "four_eyes"
    stored = await store.load(BIG)
    assert stored is not None
    assert stored.state.status is SagaStatus.AWAITING_APPROVAL
    ok = await as_role[Role.APPROVER].post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": version})
    )
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/v1/approvals/{BIG}/approve", {"version": 0}),
        (f"/v1/approvals/{BIG}/reject", {"version": 0, "reason": "no"}),
        (f"/v1/sagas/{BIG}/resume", {"reason": "x"}),
        (f"/v1/sagas/{BIG}/resolve", {"reason": "x"}),
        ("/v1/dead-letters/1/retry", None),
        ("/v1/dead-letters/1/resolve", {"reason": "x"}),
        ("/v1/escalations/1/resolve", {"reason": "x"}),
    ],
)
async def test_an_agent_can_never_decide_retry_or_resolve(
    as_role: Clients, orchestrator: Orchestrator, store: Store, path: str, body: Any
) -> None:
    version = await pending(as_role[Role.AGENT], orchestrator)
    if body is not None and "version" in body:
        body = body | {"version": version}
    content = as_json(body) if body is not None else None
    reply = await as_role[Role.AGENT].post(path, content=content)
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "forbidden"
    stored = await store.load(BIG)
    assert stored is not None
    assert (stored.state.status, stored.state.version) == (SagaStatus.AWAITING_APPROVAL, version)


async def test_a_decision_on_a_saga_that_waits_for_none_is_409(
    as_role: Clients, orchestrator: Orchestrator
) -> None:
    version = await pending(as_role[Role.AGENT], orchestrator)
    operator = as_role[Role.OPERATOR]
    parked = await operator.post(f"/v1/sagas/{BIG}/resume", content=as_json({"reason": "x"}))
    assert parked.status_code == 409
    assert parked.json()["error"]["code"] == "saga_not_parked"
    reply = await as_role[Role.APPROVER].post(
        f"/v1/approvals/{BIG}/reject", content=as_json({"version": version, "reason": "no"})
    )
    assert reply.status_code == 200
    again = await as_role[Role.APPROVER].post(
        f"/v1/approvals/{BIG}/reject", content=as_json({"version": reply.json()["version"]})
    )
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "approval_invalid"
