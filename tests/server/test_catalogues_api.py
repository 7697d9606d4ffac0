"""``GET /v1/catalogues`` and ``GET /v1/catalogues/{name}``: every catalogue the server
serves, described once (``pivotal.views.catalogue_view``, as MCP's list is), for any role."""

from __future__ import annotations

import json

import httpx
from server_api import ROLES, Clients, MakeClient

from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role

UNDOS = ("release_stock", "refund_payment", "void_authorization", "cancel_shipment")


async def test_the_list_describes_every_catalogue(as_role: Clients, app: CommerceApp) -> None:
    reply = await as_role[Role.VIEWER].get("/v1/catalogues")
    assert reply.status_code == 200, reply.text
    items = reply.json()["items"]
    assert [c["name"] for c in items] == [c.name for c in app] == ["checkout", "fulfilment"]
    fulfilment = items[1]
    assert set(fulfilment) == {"name", "description", "steps", "approval", "rollout", "rules"}
    assert fulfilment["description"] == app.catalogue("fulfilment").description
    capture = next(s for s in fulfilment["steps"] if s["name"] == "capture_payment")
    assert capture["kind"] == "pivot"
    assert capture["description"].startswith("Capture")
    schema = capture["args_schema"]
    assert schema["type"] == "object"
    assert {"order_id", "amount"} <= set(schema["required"])
    assert schema["properties"]["currency"]["enum"] == ["EUR", "USD"]
    assert [s["kind"] for s in items[0]["steps"]] == [
        "compensable",
        "compensable",
        "compensable",
        "retriable",
    ]
    assert fulfilment["approval"].startswith("a person approves capture_payment when its amount")
    assert "exceeds 150 (400 for tier 'gold')" in fulfilment["approval"]
    assert "whose total amount over charge_payment exceeds 150" in items[0]["approval"]
    assert fulfilment["rollout"] == "agent plans execute whatever they expose (no rollout limit)"
    assert "amount in every call must equal the trusted amount of the order" in fulfilment["rules"]
    assert "capture_payment at most once" in fulfilment["rules"]
    shown = json.dumps(items)
    for undo in UNDOS:
        assert undo not in shown  # a planner never sees how a step is reversed


async def test_one_catalogue_adds_what_a_planner_is_given(as_role: Clients) -> None:
    listed = (await as_role[Role.AGENT].get("/v1/catalogues")).json()["items"]
    reply = await as_role[Role.AGENT].get("/v1/catalogues/checkout")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["catalogue"] == body["name"] == "checkout"
    assert body["schema"]["properties"]["catalogue"]["const"] == "checkout"
    assert "Steps you may use" in body["text"]
    described = {k: body[k] for k in ("name", "description", "steps", "approval", "rollout")}
    assert described | {"rules": body["rules"]} == listed[0]  # the one description
    for undo in UNDOS:
        assert undo not in json.dumps(body)


async def test_every_role_reads_them_and_no_one_without_a_token(
    as_role: Clients, client: MakeClient
) -> None:
    for role in ROLES:
        for path in ("/v1/catalogues", "/v1/catalogues/fulfilment"):
            reply = await as_role[role].get(path)
            assert reply.status_code == 200, (role, path, reply.text)
    for token in (None, "pvt_forged"):
        c: httpx.AsyncClient = client(token)
        for path in ("/v1/catalogues", "/v1/catalogues/fulfilment"):
            refused = await c.get(path)
            assert refused.status_code == 401, (token, path)
            assert refused.json()["error"]["code"] == "unauthorized"


async def test_an_unknown_catalogue_is_404(as_role: Clients) -> None:
    reply = await as_role[Role.AGENT].get("/v1/catalogues/payroll")
    assert reply.status_code == 404
    error = reply.json()["error"]
    assert error["code"] == "catalogue_not_found"
    assert "checkout, fulfilment" in error["message"]


async def test_the_openapi_document_lists_both(as_role: Clients) -> None:
    paths = (await as_role[Role.VIEWER].get("/openapi.json")).json()["paths"]
    assert set(paths["/v1/catalogues"]) == {"get"}
    assert "404" in paths["/v1/catalogues/{name}"]["get"]["responses"]
