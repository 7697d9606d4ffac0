"""What the HTTP API tells an agent's token: outcomes (a status, step names and statuses, a
reason code and a short message), never the policy (thresholds, rollout limits), an approval
record, who decided or why, or a failed step's raw error. People keep their full views."""

from __future__ import annotations

import json
from typing import Any

from server_api import Clients, approval_plan, as_json, plan_body

from agent_world import (
    APPROVER,
    NOTE,
    OPERATOR,
    TOKEN,
    WHY,
    provider_plan,
    rollout,
    told,
    with_provider,
)
from pivotal import Orchestrator
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role
from pivotal.store import Store
from pivotal.views.saga_scope import scoped


async def test_an_agent_reads_the_catalogues_without_the_policy(
    as_role: Clients, app: CommerceApp
) -> None:
    app.catalogue("fulfilment").rollout = rollout()
    agent = as_role[Role.AGENT]
    listed = (await agent.get("/v1/catalogues")).json()
    one = (await agent.get("/v1/catalogues/fulfilment")).json()
    assert told(listed) == told(one) == []
    entry = next(c for c in listed["items"] if c["name"] == "fulfilment")
    assert "capture_payment" in [s["name"] for s in entry["steps"]]
    assert entry["approval"]
    assert entry["rollout"]
    assert entry["rules"] == one["rules"]  # the plan rules a planner must follow stay
    for role in (Role.OPERATOR, Role.APPROVER, Role.ADMIN, Role.VIEWER):
        full = (await as_role[role].get("/v1/catalogues")).json()
        shown = next(c for c in full["items"] if c["name"] == "fulfilment")
        assert "150" in shown["approval"], role
        assert "7.25" in shown["rollout"], role


async def test_the_rollout_answers_an_agent_without_its_limit(
    as_role: Clients, app: CommerceApp, store: Store
) -> None:
    app.catalogue("checkout").rollout = rollout()
    agent = as_role[Role.AGENT]
    shadowed = await agent.post("/v1/sagas", content=as_json(plan_body()))
    assert shadowed.status_code == 202, shadowed.text
    body = shadowed.json()
    assert (body["code"], body["shadowed"]) == ("rollout_shadow", True)
    assert told(body) == [], body
    assert "expos" not in body["message"]
    run = await store.run(body["run_id"])
    assert run is not None  # the people reviewing it read why from the run
    app.catalogue("checkout").rollout = rollout("refuse")
    refused = await agent.post("/v1/sagas", content=as_json(plan_body("o-2")))
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "rollout_refused"
    assert told(refused.json()) == [], refused.json()
    assert "expos" not in refused.text


async def test_an_agent_is_told_a_rejection_not_who_rejected_or_why(
    as_role: Clients, orchestrator: Orchestrator
) -> None:
    agent = as_role[Role.AGENT]
    submitted = await agent.post("/v1/sagas?saga_id=big", content=as_json(approval_plan()))
    assert submitted.status_code == 201, submitted.text
    saga_id = scoped("agent", "big")
    waiting = await orchestrator.run(saga_id)
    assert waiting.approval is not None
    seen = (await agent.get("/v1/sagas/big")).json()
    assert told(seen) == []
    assert (seen["status"], seen["reason_code"]) == ("awaiting_approval", "approval_pending")
    await orchestrator.reject(saga_id, APPROVER, NOTE)
    await orchestrator.run(saga_id)
    seen = (await agent.get("/v1/sagas/big")).json()
    assert told(seen) == [], seen
    assert (seen["status"], seen["reason_code"]) == ("compensated", "approval_rejected")
    assert "capture_payment" in seen["reason"]
    assert seen["sign_off"]["status"] == "rejected"
    resent = await agent.post("/v1/sagas?saga_id=big", content=as_json(approval_plan()))
    assert resent.status_code == 200, resent.text
    answer = resent.json()
    assert told(answer) == [], answer
    assert answer["reason_code"] == "approval_rejected"
    for field in ("approver", "note", "required", "approved_by", "rationale"):
        assert field not in json.dumps(answer["approval"]), field
    full = (await as_role[Role.OPERATOR].get(f"/v1/sagas/{saga_id}")).json()
    assert full["approval"]["approver"] == APPROVER
    assert full["approval"]["note"] == NOTE
    assert "150" in full["approval"]["reason"]


async def test_an_agent_is_told_its_saga_was_stopped_not_by_whom_or_why(
    as_role: Clients, orchestrator: Orchestrator
) -> None:
    agent = as_role[Role.AGENT]
    await agent.post("/v1/sagas?saga_id=dup", content=as_json(plan_body()))
    saga_id = scoped("agent", "dup")
    await orchestrator.abort(saga_id, OPERATOR, WHY, run=True)
    seen = (await agent.get("/v1/sagas/dup")).json()
    assert told(seen) == [], seen
    assert (seen["status"], seen["reason_code"]) == ("compensated", "stopped_by_a_person")
    again = (await agent.post("/v1/sagas?saga_id=dup", content=as_json(plan_body()))).json()
    assert told(again) == [], again
    full = (await as_role[Role.OPERATOR].get(f"/v1/sagas/{saga_id}")).json()
    assert full["reason"] == f"aborted by {OPERATOR}: {WHY}"


async def test_a_failed_steps_bearer_token_never_reaches_the_agent(
    as_role: Clients, orchestrator: Orchestrator, app: CommerceApp
) -> None:
    with_provider(app)
    agent = as_role[Role.AGENT]
    submitted = await agent.post("/v1/sagas?saga_id=p", content=as_json(provider_plan()))
    assert submitted.status_code == 201, submitted.text
    saga_id = scoped("agent", "p")
    ended = await orchestrator.run(saga_id)
    assert ended.reason is not None
    assert TOKEN in ended.reason
    seen = (await agent.get("/v1/sagas/p")).json()
    assert told(seen) == [], seen
    assert (seen["status"], seen["reason_code"]) == ("compensated", "step_failed")
    assert "call_provider (step 1) failed" in seen["reason"]
    assert [(s["name"], s["status"]) for s in seen["steps"]] == [
        ("book", "succeeded"),
        ("call_provider", "failed"),
    ]
    again = (await agent.post("/v1/sagas?saga_id=p", content=as_json(provider_plan()))).json()
    assert told(again) == [], again
    full: dict[str, Any] = (await as_role[Role.OPERATOR].get(f"/v1/sagas/{saga_id}")).json()
    assert "call_provider" in full["reason"]
    assert full["steps"][1]["error"] is not None
