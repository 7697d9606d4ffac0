"""The MCP tools scope an agent's saga ids as the HTTP API does (``pivotal.views.saga_scope``):
another agent can neither take an id nor learn that it exists."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_support import AGENT, checkout, data, error, serving
from mcp_types import CallToolResult, Implementation
from test_http import agent, call, token

from mcp import Client
from pivotal import Orchestrator
from pivotal.views.saga_scope import scoped


async def submit(client: Client, plan: dict[str, Any], saga_id: str) -> CallToolResult:
    result = await client.call_tool("submit_plan", {"plan": plan, "saga_id": saga_id})
    assert isinstance(result, CallToolResult)
    return result


async def test_two_agents_each_get_their_own_saga_under_one_id(
    server: MCPServer[Any], orch: Orchestrator
) -> None:
    mine = Client(server, client_info=Implementation(name=AGENT, version="1"))
    async with mine as client:
        first = data(await submit(client, checkout(), "sg-shared"))
    assert (first["saga_id"], first["created"]) == ("sg-shared", True)
    rival = Client(server, client_info=Implementation(name="rival-bot", version="1"))
    async with rival as client:
        other = data(await submit(client, checkout(rationale="mine now"), "sg-shared"))
    assert (other["saga_id"], other["created"]) == ("sg-shared", True)  # no saga_conflict
    assert "sg-shared" in other["next"]
    assert "rival-bot." not in other["next"]
    async with Client(server, client_info=Implementation(name=AGENT, version="1")) as client:
        again = data(await submit(client, checkout(), "sg-shared"))
        assert (again["saga_id"], again["created"]) == ("sg-shared", False)
        taken = error(await submit(client, checkout(rationale="changed"), "sg-shared"))
        assert taken["error"] == "saga_conflict"
        assert "another of your plans" in taken["message"]
        seen = await client.call_tool("get_saga", {"saga_id": "sg-shared"})
        assert isinstance(seen, CallToolResult)
        assert data(seen)["saga_id"] == "sg-shared"
    ours = await orch.get(scoped(AGENT, "sg-shared"))
    theirs = await orch.get(scoped("rival-bot", "sg-shared"))
    assert (ours.plan.rationale, theirs.plan.rationale) == ("customer checkout", "mine now")
    assert await orch.store.load("sg-shared") is None  # nothing under the bare id


async def test_an_agent_token_cannot_probe_another_agents_ids(orch: Orchestrator) -> None:
    owner, _ = await token(orch, "owner-bot", "agent")
    prober, _ = await token(orch, "prober-bot", "agent")
    async with serving(orch) as url:
        async with agent(url, owner) as client:
            made = data(await call(client, "submit_plan", plan=checkout(), saga_id="sg-x"))
            assert made["saga_id"] == "sg-x"
            full = data(await call(client, "get_saga", saga_id=scoped("owner-bot", "sg-x")))
            assert full["saga_id"] == "sg-x"  # its own, by either id, shown as it gave it
        async with agent(url, prober) as client:
            for probe in ("sg-x", scoped("owner-bot", "sg-x")):
                hidden = error(await call(client, "get_saga", saga_id=probe))
                missing = error(await call(client, "get_saga", saga_id=probe + "y"))
                assert hidden["error"] == missing["error"] == "saga_not_found"
                assert hidden["message"].replace(probe, "?") == missing["message"].replace(
                    probe + "y", "?"
                )
            own = data(await call(client, "submit_plan", plan=checkout(), saga_id="sg-x"))
            assert own["created"] is True
    assert (await orch.get(scoped("prober-bot", "sg-x"))).plan.provenance.actor_id == ("prober-bot")
