"""Each planner tool on the commerce app, through the SDK's client in this process."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_support import AGENT, Call, Connect, checkout, data, error
from mcp_types import CallToolResult, Implementation

from mcp import Client
from pivotal import ActorType, Orchestrator, SagaStatus
from pivotal.declarations.policy import Rollout
from pivotal.mcp import TOOL_NAMES, build_server
from pivotal.store import Store
from pivotal.views.saga_scope import scoped


async def test_the_tools_are_exactly_the_planners(connect: Connect) -> None:
    async with connect() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert (
        set(tools)
        == set(TOOL_NAMES)
        == {
            "list_catalogues",
            "describe_catalogue",
            "validate_plan",
            "submit_plan",
            "get_saga",
        }
    )
    for name in ("list_catalogues", "describe_catalogue", "validate_plan", "get_saga"):
        hints = tools[name].annotations
        assert hints is not None, name
        assert hints.read_only_hint is True, name
        assert hints.destructive_hint is False, name
    submit = tools["submit_plan"].annotations
    assert submit is not None
    assert submit.read_only_hint is False
    assert submit.destructive_hint is False
    assert submit.idempotent_hint is True
    for tool in tools.values():
        assert tool.description, tool.name
        assert tool.output_schema, tool.name
    assert set(tools["submit_plan"].input_schema["properties"]) == {"plan", "saga_id"}
    assert tools["submit_plan"].input_schema["required"] == ["plan"]


async def test_catalogues_are_listed_and_described_without_undos(call: Call) -> None:
    listed = data(await call("list_catalogues"))
    names = {c["catalogue"]: c["steps"] for c in listed["catalogues"]}
    assert set(names) == {"checkout", "fulfilment"}
    assert "charge_payment" in names["checkout"]
    described = data(await call("describe_catalogue", catalogue="checkout"))
    assert described["plan_schema"]["properties"]["catalogue"]["const"] == "checkout"
    assert "Steps you may use" in described["text"]
    assert "charge_payment" in described["steps"]
    assert "refund" not in json.dumps(described).lower()
    missing = error(await call("describe_catalogue", catalogue="payroll"))
    assert missing["error"] == "unknown_catalogue"
    assert "checkout, fulfilment" in missing["message"]
    assert "list_catalogues" in missing["message"]


async def test_validate_accepts_a_valid_plan_and_records_nothing(
    call: Call, orch: Orchestrator
) -> None:
    result = data(await call("validate_plan", plan=checkout()))
    assert result == {"valid": True, "errors": [], "next": "Call submit_plan with this plan."}
    assert await orch.store.list_sagas(None, 10) == []


async def test_validate_reports_codes_indexes_and_paths(call: Call) -> None:
    plan = checkout()
    plan["steps"][1]["args"]["amount"] = "-5"
    plan["steps"].append({"name": "refund_payment", "args": {}})  # an undo: never callable
    plan["steps"].append({"name": "teleport", "args": {}})
    result = data(await call("validate_plan", plan=plan))
    assert result["valid"] is False
    found = {(e["code"], e["path"]) for e in result["errors"]}
    assert ("invalid_args", "steps[1].args.amount") in found
    assert ("undo_not_callable", "steps[3].name") in found
    assert ("unknown_step", "steps[4].name") in found
    unknown = next(e for e in result["errors"] if e["code"] == "unknown_step")
    assert unknown["index"] == 4


@pytest.mark.parametrize(
    ("plan", "path"),
    [
        ('{"catalogue": "checkout", "steps": [', None),  # cut short: not JSON
        ({"catalogue": "checkout", "steps": [{"args": {}}]}, "steps[0].name"),
        ({"catalogue": "checkout", "steps": [], "surprise": 1}, "surprise"),
    ],
)
async def test_malformed_plans_come_back_as_errors(call: Call, plan: Any, path: str | None) -> None:
    result = data(await call("validate_plan", plan=plan))
    assert result["valid"] is False
    assert {e["code"] for e in result["errors"]} == {"plan_malformed"}
    if path is not None:
        assert path in {e["path"] for e in result["errors"]}
    refused = error(await call("submit_plan", plan=plan))
    assert refused["error"] == "plan_rejected"
    assert refused["errors"] == result["errors"]


async def test_an_unknown_catalogue_is_a_validation_error(call: Call) -> None:
    result = data(await call("validate_plan", plan=checkout() | {"catalogue": "payroll"}))
    assert [(e["code"], e["path"]) for e in result["errors"]] == [
        ("unknown_catalogue", "catalogue")
    ]


async def test_submit_records_the_saga_and_the_calling_agent(
    call: Call, orch: Orchestrator
) -> None:
    plan = checkout(provenance={"actor_type": "human", "actor_id": "alice", "model": "m-1"})
    result = data(await call("submit_plan", plan=plan, saga_id="sg-mcp-1"))
    assert result["saga_id"] == "sg-mcp-1"
    assert result["status"] == "submitted"
    assert result["created"] is True
    assert result["submitted_by"] == AGENT
    assert "get_saga" in result["next"]
    stored = await orch.get(scoped(AGENT, "sg-mcp-1"))  # the agent's own namespace
    assert stored.state.status is SagaStatus.SUBMITTED  # recorded, never run here
    assert stored.plan.provenance.actor_type is ActorType.AGENT
    assert stored.plan.provenance.actor_id == AGENT  # the plan cannot say who it is
    assert stored.plan.provenance.model == "m-1"


async def test_submit_is_idempotent_on_the_saga_id(call: Call, orch: Orchestrator) -> None:
    first = data(await call("submit_plan", plan=checkout(), saga_id="sg-again"))
    again = data(await call("submit_plan", plan=checkout(), saga_id="sg-again"))
    assert first["created"] is True
    assert again["created"] is False
    assert again["saga_id"] == first["saga_id"]
    assert len(await orch.store.list_sagas(None, 10)) == 1


async def test_the_same_id_with_another_plan_is_a_conflict(call: Call, orch: Orchestrator) -> None:
    data(await call("submit_plan", plan=checkout(), saga_id="sg-taken"))
    other = checkout(rationale="something else")
    conflict = error(await call("submit_plan", plan=other, saga_id="sg-taken"))
    assert conflict["error"] == "saga_conflict"
    assert "omit saga_id" in conflict["message"]
    assert (await orch.get(scoped(AGENT, "sg-taken"))).plan.rationale == "customer checkout"


async def test_an_invalid_plan_or_saga_id_records_nothing(call: Call, orch: Orchestrator) -> None:
    bad = checkout()
    bad["steps"][0]["args"]["quantity"] = 0
    refused = error(await call("submit_plan", plan=bad))
    assert refused["error"] == "plan_rejected"
    assert refused["errors"][0]["path"] == "steps[0].args.quantity"
    assert "validate_plan" in refused["message"]
    wrong_id = error(await call("submit_plan", plan=checkout(), saga_id="no spaces/allowed"))
    assert wrong_id["error"] == "invalid_input"
    assert wrong_id["message"].startswith("saga_id:")
    assert await orch.store.list_sagas(None, 10) == []


async def test_get_saga_after_a_run(call: Call, orch: Orchestrator) -> None:
    saga_id = data(await call("submit_plan", plan=checkout()))["saga_id"]
    waiting = data(await call("get_saga", saga_id=saga_id))
    assert waiting["status"] == "submitted"
    assert waiting["finished"] is False
    await orch.run(scoped(AGENT, saga_id))  # what a worker does, by the stored id
    done = data(await call("get_saga", saga_id=saga_id))
    assert done["status"] == "completed"
    assert done["finished"] is True
    assert done["submitted_by"] == AGENT
    assert [(s["name"], s["status"]) for s in done["steps"]] == [
        ("reserve_stock", "succeeded"),
        ("charge_payment", "succeeded"),
        ("create_shipment", "succeeded"),
    ]
    assert done["sign_off"] is None
    assert "result" not in json.dumps(done["steps"])  # no step results, no secrets


async def test_get_saga_shows_a_pending_sign_off(call: Call, orch: Orchestrator) -> None:
    payment = {"order_id": "4471", "amount": "180.00"}
    plan = {
        "catalogue": "fulfilment",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {"order_id": "4471", "sku": "lamp", "quantity": 1, "warehouse": "B"},
            },
            {"name": "authorize_payment", "args": payment},
            {"name": "capture_payment", "args": payment},
        ],
        "rationale": "ship the lamp",
    }
    submitted = data(await call("submit_plan", plan=plan))
    assert "capture_payment" in submitted["next"]
    await orch.run(scoped(AGENT, submitted["saga_id"]))
    view = data(await call("get_saga", saga_id=submitted["saga_id"]))
    assert view["status"] == "awaiting_approval"
    assert view["sign_off"]["step_name"] == "capture_payment"
    assert view["sign_off"]["status"] == "pending"


async def test_an_unknown_saga_is_an_error(call: Call) -> None:
    missing = error(await call("get_saga", saga_id="sg-nowhere"))
    assert missing["error"] == "saga_not_found"
    assert "submit_plan" in missing["message"]


async def test_submit_on_both_backends(store: Store, orch_over: Any) -> None:
    async with orch_over(store) as client:
        result = await client.call_tool("submit_plan", {"plan": checkout(), "saga_id": "sg-b"})
        assert data(result)["created"] is True
        again = await client.call_tool("submit_plan", {"plan": checkout(), "saga_id": "sg-b"})
        assert data(again)["created"] is False
    stored = await store.load(scoped(AGENT, "sg-b"))
    assert stored is not None
    assert stored.plan.provenance.actor_id == AGENT


async def test_the_client_name_of_the_initialize_handshake_is_the_proposer(
    server: MCPServer[Any], orch: Orchestrator
) -> None:
    info = Implementation(name="legacy-agent", version="0.9")
    async with Client(server, client_info=info, mode="legacy") as client:
        result = await client.call_tool("submit_plan", {"plan": checkout(), "saga_id": "sg-l"})
        assert isinstance(result, CallToolResult)
        assert data(result)["submitted_by"] == "legacy-agent"
    assert (
        await orch.get(scoped("legacy-agent", "sg-l"))
    ).plan.provenance.actor_id == "legacy-agent"


async def test_a_server_that_needs_tokens_never_takes_an_unnamed_caller(
    orch: Orchestrator,
) -> None:
    """Reached without its HTTP app (so without a verified token), the secured server
    refuses to record or show anything rather than fall back to the client's own name."""
    secured = build_server(orch, url="http://127.0.0.1:8765")
    async with Client(secured, client_info=Implementation(name="admin", version="1")) as client:
        for tool, arguments in (
            ("submit_plan", {"plan": checkout()}),
            ("get_saga", {"saga_id": "sg-any"}),
        ):
            result = await client.call_tool(tool, arguments)
            assert isinstance(result, CallToolResult)
            assert result.is_error
            assert "bearer token of role agent" in str(result.content[0])
    assert await orch.store.list_sagas(None, 10) == []


async def test_a_plan_above_the_rollout_limit_is_kept_in_shadow(
    call: Call, orch: Orchestrator, app: Any
) -> None:
    app.catalogue("checkout").rollout = Rollout(execute_below=Decimal("5"))
    result = await call("submit_plan", plan=checkout())
    shadowed = error(result)
    assert shadowed["error"] == "rollout_shadow"
    assert "kept in shadow, not run" in shadowed["message"]
    assert "do not submit it again" in result.content[0].text  # type: ignore[union-attr]
    assert await orch.store.list_sagas(None, 10) == []
