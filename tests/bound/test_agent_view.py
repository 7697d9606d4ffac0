"""An agent reading its own saga over HTTP sees what MCP shows it (``pivotal.views.agent_view``),
with no word of why a person must decide, no undo and no provider's reply."""

from __future__ import annotations

import json

import httpx
import pytest
from harmful import fulfilment

from agent_world import rollout, told
from pivotal import Orchestrator
from pivotal.examples.commerce import CommerceApp
from pivotal.planning import PlanRequest, ScriptedPlanner, plan_and_submit
from pivotal.store import Store
from pivotal.views.agent_view import WAITING, SagaView
from pivotal.views.saga_scope import scoped, view

MINE, UNDONE = scoped("agent-7", "mine"), scoped("agent-7", "undone")  # as stored


async def test_an_agent_sees_over_http_what_mcp_shows_and_not_the_threshold(
    agent: httpx.AsyncClient, orchestrator: Orchestrator
) -> None:
    submitted = await agent.post("/v1/sagas", json=fulfilment(), params={"saga_id": "mine"})
    assert submitted.status_code == 201, submitted.text
    waiting = await orchestrator.run(MINE)
    assert waiting.approval is not None
    assert "150" in waiting.approval.reason
    seen = (await agent.get("/v1/sagas/mine")).json()
    stored = await orchestrator.get(MINE)
    assert seen == view("agent-7", stored).model_dump(mode="json")
    assert seen["saga_id"] == "mine"
    assert set(seen) == set(SagaView.model_fields)
    assert seen["sign_off"]["reason"] == WAITING
    text = json.dumps(seen)
    assert "threshold" not in text
    assert "exceeds" not in text
    assert "amount" not in text
    again = await agent.post("/v1/sagas", json=fulfilment(), params={"saga_id": "mine"})
    assert again.status_code == 200
    assert again.json()["approval"]["reason"] == WAITING


async def test_an_agent_sees_no_undo_key_note_or_provider_result(
    agent: httpx.AsyncClient, orchestrator: Orchestrator
) -> None:
    submitted = await agent.post("/v1/sagas", json=fulfilment(), params={"saga_id": "undone"})
    assert submitted.status_code == 201
    await orchestrator.run(UNDONE)
    state = await orchestrator.reject(UNDONE, "ops-lead", "not today")
    assert state.status.value == "compensated"
    seen = (await agent.get("/v1/sagas/undone")).json()
    text = json.dumps(seen)
    for secret in (":undo", "voided", "released", "authorization_id", '"res_', "events", "plan"):
        assert secret not in text, secret
    assert [s["reversed"] for s in seen["steps"][:2]] == [True, True]


# -- the planning loop -----------------------------------------------------------------------


@pytest.mark.parametrize("above", ["shadow", "refuse"])
async def test_the_planning_loop_is_told_the_rollout_outcome_not_its_limit(
    above: str, orchestrator: Orchestrator, app: CommerceApp, store: Store
) -> None:
    app.catalogue("fulfilment").rollout = rollout(above)
    request = PlanRequest(
        text="please ship my order", context={"order_id": "4471"}, catalogue="fulfilment"
    )
    run = await plan_and_submit(request, ScriptedPlanner([fulfilment()]), orchestrator)
    [error] = run.attempts[-1].errors  # the run ends escalated to a person, kept with it
    assert error.code == f"rollout_{'shadow' if above == 'shadow' else 'refused'}"
    assert told(error.message) == [], error.message
    assert "expos" not in error.message
    assert await store.list_sagas() == []
