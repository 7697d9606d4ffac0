"""What the MCP tools tell an agent, in this process and over streamable HTTP with an agent's
token: outcomes, never the policy, who decided or why, nor a failed step's raw error."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp_support import AGENT, Call, checkout, data, error, serving
from mcp_types import CallToolResult

from agent_world import (
    APPROVER,
    NOTE,
    OPERATOR,
    WHY,
    provider_plan,
    rollout,
    told,
    with_provider,
)
from mcp import Client
from pivotal import Orchestrator
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import hash_token
from pivotal.views.saga_scope import scoped


def text_of(result: CallToolResult) -> str:
    return json.dumps(result.structured_content) + "".join(
        getattr(c, "text", "") for c in result.content
    )


def fulfilment() -> dict[str, Any]:
    """Order 4471: its capture of 180 waits for a person."""
    pay = {"order_id": "4471", "amount": "180.00"}
    return {
        "catalogue": "fulfilment",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {"order_id": "4471", "sku": "lamp", "quantity": 1, "warehouse": "B"},
            },
            {"name": "authorize_payment", "args": pay},
            {"name": "capture_payment", "args": pay},
        ],
        "rationale": "ship order 4471",
    }


async def test_the_catalogues_are_described_without_the_policy(
    call: Call, app: CommerceApp
) -> None:
    app.catalogue("fulfilment").rollout = rollout()
    for result in (
        await call("list_catalogues"),
        await call("describe_catalogue", catalogue="fulfilment"),
    ):
        assert told(text_of(result)) == [], text_of(result)


async def test_the_rollout_answers_without_its_limit(
    call: Call, app: CommerceApp, orch: Orchestrator
) -> None:
    app.catalogue("checkout").rollout = rollout()
    shadowed = await call("submit_plan", plan=checkout())
    assert error(shadowed)["error"] == "rollout_shadow"
    assert told(text_of(shadowed)) == [], text_of(shadowed)
    assert "expos" not in text_of(shadowed)
    app.catalogue("checkout").rollout = rollout("refuse")
    refused = await call("submit_plan", plan=checkout())
    assert error(refused)["error"] == "rollout_refused"
    assert told(text_of(refused)) == [], text_of(refused)
    assert await orch.store.list_sagas(None, 10) == []


async def test_get_saga_tells_a_rejection_and_a_stop_without_names_or_notes(
    call: Call, orch: Orchestrator
) -> None:
    data(await call("submit_plan", plan=fulfilment(), saga_id="big"))
    data(await call("submit_plan", plan=checkout(), saga_id="dup"))
    big, dup = scoped(AGENT, "big"), scoped(AGENT, "dup")
    await orch.run(big)
    waiting = data(await call("get_saga", saga_id="big"))
    assert told(waiting) == []
    assert waiting["reason_code"] == "approval_pending"
    await orch.reject(big, APPROVER, NOTE, run=True)
    await orch.abort(dup, OPERATOR, WHY, run=True)
    rejected = await call("get_saga", saga_id="big")
    stopped = await call("get_saga", saga_id="dup")
    assert told(text_of(rejected)) == told(text_of(stopped)) == []
    assert data(rejected)["reason_code"] == "approval_rejected"
    assert data(stopped)["reason_code"] == "stopped_by_a_person"
    again = await call("submit_plan", plan=fulfilment(), saga_id="big")  # resent: no record
    assert told(text_of(again)) == [], text_of(again)


async def test_get_saga_never_shows_a_failed_steps_token(
    call: Call, orch: Orchestrator, app: CommerceApp
) -> None:
    with_provider(app)
    data(await call("submit_plan", plan=provider_plan(), saga_id="p"))
    await orch.run(scoped(AGENT, "p"))
    seen = await call("get_saga", saga_id="p")
    assert told(text_of(seen)) == [], text_of(seen)
    assert data(seen)["reason_code"] == "step_failed"
    assert "call_provider (step 1) failed" in data(seen)["reason"]


# -- over streamable HTTP, with an agent's token ---------------------------------------------


@asynccontextmanager
async def agent_over_http(orch: Orchestrator) -> AsyncIterator[Client]:
    secret = "pvt_test_view_agent"
    await orch.store.create_token("view-bot", "agent", hash_token(secret), 0.0)
    async with serving(orch) as url:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=20)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            yield client


async def test_over_http_an_agent_is_told_outcomes_only(
    orch: Orchestrator, app: CommerceApp
) -> None:
    with_provider(app)
    async with agent_over_http(orch) as client:
        described = await client.call_tool("describe_catalogue", {"catalogue": "fulfilment"})
        assert told(text_of(described)) == []
        await client.call_tool("submit_plan", {"plan": fulfilment(), "saga_id": "big"})
        await client.call_tool("submit_plan", {"plan": provider_plan(), "saga_id": "p"})
        await orch.run(scoped("view-bot", "big"))
        await orch.reject(scoped("view-bot", "big"), APPROVER, NOTE, run=True)
        await orch.run(scoped("view-bot", "p"))
        for saga_id, code in (("big", "approval_rejected"), ("p", "step_failed")):
            seen = await client.call_tool("get_saga", {"saga_id": saga_id})
            assert told(text_of(seen)) == [], text_of(seen)
            assert data(seen)["reason_code"] == code
        app.catalogue("checkout").rollout = rollout()
        shadowed = await client.call_tool("submit_plan", {"plan": checkout()})
        assert error(shadowed)["error"] == "rollout_shadow"
        assert told(text_of(shadowed)) == [], text_of(shadowed)
