"""Each harmful plan through every way an agent proposes one: the planning loop, `pivotal mcp`
over stdio with the official MCP client, and the HTTP API with an agent token. Each is
refused before anything is recorded or any service called; the right plans go through."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from harmful import HARMS, Harm, Plan, checkout, fulfilment
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult, Implementation

from mcp import Client
from pivotal import Orchestrator, SQLiteStore
from pivotal.examples.commerce import CommerceServices
from pivotal.planning import PlanningOutcome, PlanRequest, ScriptedPlanner, plan_and_submit
from pivotal.store import Store
from pivotal.views.saga_scope import scoped

PIVOTAL = Path(sys.executable).parent / "pivotal"
IDS = [h.name for h in HARMS]


def order_of(plan: Plan) -> str:
    return str(plan["steps"][0]["args"]["order_id"])


def request_for(plan: Plan) -> PlanRequest:
    """What the request the planner answers is about: the order the right plan serves."""
    order = "order-1" if plan["catalogue"] == "checkout" else "4471"
    return PlanRequest(
        text="please ship my order", context={"order_id": order}, catalogue=plan["catalogue"]
    )


# -- the planning loop -----------------------------------------------------------------------


@pytest.mark.parametrize("harm", HARMS, ids=IDS)
async def test_the_planning_loop_escalates_it_and_runs_nothing(
    harm: Harm, orchestrator: Orchestrator, services: CommerceServices, store: Store
) -> None:
    plan = harm.plan()
    run = await plan_and_submit(
        request_for(plan), ScriptedPlanner([plan]), orchestrator, max_replans=0
    )
    assert run.outcome is PlanningOutcome.ESCALATED
    assert run.saga_id is None
    assert harm.code in [e.code for e in run.attempts[-1].errors]
    assert await store.list_sagas() == []
    assert services.calls() == []


@pytest.mark.parametrize("right", [fulfilment, checkout])
async def test_the_planning_loop_submits_the_right_plan(
    right: Any, orchestrator: Orchestrator
) -> None:
    plan = right()
    run = await plan_and_submit(request_for(plan), ScriptedPlanner([plan]), orchestrator)
    assert run.outcome is PlanningOutcome.ACCEPTED, run.attempts[-1].errors
    assert run.saga_id is not None


# -- the HTTP API, with an agent's token ------------------------------------------------------


@pytest.mark.parametrize("harm", HARMS, ids=IDS)
async def test_the_http_api_refuses_it(
    harm: Harm, agent: httpx.AsyncClient, store: Store, services: CommerceServices
) -> None:
    checked = await agent.post("/v1/plans/validate", json=harm.plan())
    assert checked.status_code == 200
    assert checked.json()["valid"] is False
    assert harm.code in [e["code"] for e in checked.json()["errors"]]
    submitted = await agent.post("/v1/sagas", json=harm.plan())
    assert submitted.status_code == 422, submitted.text
    assert submitted.json()["error"]["code"] == "plan_rejected"
    assert harm.code in [e["code"] for e in submitted.json()["error"]["errors"]]
    assert await store.list_sagas() == []
    assert services.calls() == []


@pytest.mark.parametrize("right", [fulfilment, checkout])
async def test_the_http_api_records_the_right_plan(right: Any, agent: httpx.AsyncClient) -> None:
    submitted = await agent.post("/v1/sagas", json=right())
    assert submitted.status_code == 201, submitted.text


# -- `pivotal mcp` over stdio, with the official client ---------------------------------------


def mcp_parameters(folder: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    return StdioServerParameters(
        command=str(PIVOTAL),
        args=["--db", f"sqlite:///{folder / 'ledger.db'}", "--example-app", "mcp", "--create"],
        env=env,
        cwd=str(folder),
    )


def structured(result: Any) -> dict[str, Any]:
    assert isinstance(result, CallToolResult)
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.timeout(180)
async def test_pivotal_mcp_refuses_every_one_and_records_only_the_right_plans(
    tmp_path: Path,
) -> None:
    info = Implementation(name="order-agent", version="1")
    async with Client(mcp_parameters(tmp_path), client_info=info) as client:
        for harm in HARMS:
            checked = structured(await client.call_tool("validate_plan", {"plan": harm.plan()}))
            assert checked["valid"] is False, harm.name
            assert harm.code in [e["code"] for e in checked["errors"]], (harm.name, checked)
            refused = await client.call_tool("submit_plan", {"plan": harm.plan()})
            assert refused.is_error, harm.name
            assert structured(refused)["error"] == "plan_rejected"
        for n, right in enumerate((fulfilment, checkout)):
            done = await client.call_tool("submit_plan", {"plan": right(), "saga_id": f"ok-{n}"})
            assert not done.is_error, done.content
    async with SQLiteStore(tmp_path / "ledger.db") as ledger:
        found = sorted(s.saga_id for s in await ledger.list_sagas())
        assert found == [scoped("order-agent", "ok-0"), scoped("order-agent", "ok-1")]
    world = CommerceServices(tmp_path / "commerce.db")
    try:
        assert world.calls() == []  # nothing ran: a worker carries out what is recorded
    finally:
        world.close()
