"""Agents: validate, submit (idempotent), read their own sagas, read the catalogue; limits
on bodies and plans."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from server_api import Clients, add_token, as_json, plan_body

from pivotal import FakeClock
from pivotal.declarations.policy import Rollout
from pivotal.people.principals import Role
from pivotal.server.limits import MAX_BODY
from pivotal.store import Store
from pivotal.views.saga_scope import scoped

ERROR_KEYS = {"code", "index", "path", "message", "step"}


async def test_validate_returns_every_error_in_the_plan_error_shape(as_role: Clients) -> None:
    agent = as_role[Role.AGENT]
    ok = await agent.post("/v1/plans/validate", content=as_json(plan_body()))
    assert ok.json() == {"valid": True, "errors": []}
    bad = plan_body()
    bad["steps"][0]["args"]["quantity"] = -1
    bad["steps"].append({"name": "no_such_step", "args": {}})
    reply = await agent.post("/v1/plans/validate", content=as_json(bad))
    assert reply.status_code == 200
    body = reply.json()
    assert body["valid"] is False
    assert len(body["errors"]) >= 2
    assert all(set(e) == ERROR_KEYS for e in body["errors"])
    assert {e["index"] for e in body["errors"]} >= {0, 2}
    unknown = await agent.post("/v1/plans/validate", content=as_json(plan_body(catalogue="x")))
    assert unknown.json()["errors"][0]["code"] == "unknown_catalogue"


async def test_submit_is_idempotent_on_the_saga_id_and_409_on_another_plan(
    as_role: Clients, store: Store
) -> None:
    agent = as_role[Role.AGENT]
    first = await agent.post("/v1/sagas?saga_id=s-1", content=as_json(plan_body()))
    assert first.status_code == 201, first.text
    assert first.json()["created"] is True
    assert first.json()["status"] == "submitted"
    again = await agent.post("/v1/sagas?saga_id=s-1", content=as_json(plan_body()))
    assert again.status_code == 200
    assert again.json()["created"] is False
    assert again.json()["saga_id"] == "s-1"
    other = await agent.post("/v1/sagas?saga_id=s-1", content=as_json(plan_body("o-2")))
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "saga_conflict"
    assert len(await store.list_sagas()) == 1
    stored = await store.load(scoped("agent", "s-1"))  # its own namespace (test_saga_id_scope)
    assert stored is not None
    assert stored.state.status.value == "submitted"  # recorded only: nothing ran


async def test_an_invalid_plan_is_422_with_every_error(as_role: Clients, store: Store) -> None:
    bad = plan_body()
    bad["steps"][1]["args"]["amount"] = "100000"
    reply = await as_role[Role.AGENT].post("/v1/sagas", content=as_json(bad))
    assert reply.status_code == 422
    error = reply.json()["error"]
    assert error["code"] == "plan_rejected"
    assert error["errors"]
    assert all(set(e) == ERROR_KEYS for e in error["errors"])
    assert await store.list_sagas() == []


async def test_the_actor_comes_from_the_token_not_the_body(as_role: Clients, store: Store) -> None:
    forged = plan_body(provenance={"actor_type": "human", "actor_id": "approver"})
    reply = await as_role[Role.AGENT].post("/v1/sagas?saga_id=s-1", content=as_json(forged))
    assert reply.status_code == 201
    stored = await store.load(scoped("agent", "s-1"))
    assert stored is not None
    assert stored.plan.provenance.actor_type == "agent"
    assert stored.plan.provenance.actor_id == "agent"


async def test_an_agent_reads_its_own_sagas_only(
    as_role: Clients, store: Store, clock: FakeClock, client: object
) -> None:

    agent = as_role[Role.AGENT]
    assert (await agent.post("/v1/sagas?saga_id=mine", content=as_json(plan_body()))).is_success
    other = client(await add_token(store, "other-agent", Role.AGENT, clock))  # type: ignore[operator]
    theirs = await other.post("/v1/sagas?saga_id=theirs", content=as_json(plan_body("o-9")))
    assert theirs.status_code == 201
    mine = await agent.get("/v1/sagas/mine")
    assert mine.status_code == 200
    body = mine.json()
    assert body["status"] == "submitted"
    # an agent gets the agent view (as MCP's get_saga): who submitted it, where each step
    # stands, never the events timeline, the plan or any results
    assert body["submitted_by"] == "agent"
    assert not {"events", "plan", "provenance"} & set(body)
    assert [s["name"] for s in body["steps"]] == ["reserve_stock", "charge_payment"]
    assert all("result" not in s for s in body["steps"])
    assert (await agent.get("/v1/sagas/theirs")).status_code == 404
    assert (await agent.get("/v1/sagas")).status_code == 403  # no listing of others' sagas
    assert (await agent.get(f"/v1/sagas/{scoped('other-agent', 'theirs')}")).status_code == 404
    viewer = as_role[Role.VIEWER]  # people use the stored id
    assert (await viewer.get(f"/v1/sagas/{scoped('other-agent', 'theirs')}")).status_code == 200


async def test_the_catalogue_is_shown_as_a_planner_sees_it_never_an_undo(
    as_role: Clients,
) -> None:
    reply = await as_role[Role.AGENT].get("/v1/catalogues/checkout")
    assert reply.status_code == 200
    body = reply.json()
    assert body["catalogue"] == "checkout"
    assert "reserve_stock" in body["text"]
    assert body["schema"]["type"] == "object"
    for undo in ("release_stock", "refund_payment"):
        assert undo not in json.dumps(body)
    missing = await as_role[Role.AGENT].get("/v1/catalogues/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "catalogue_not_found"


async def test_a_huge_body_is_413_before_any_route(as_role: Clients, store: Store) -> None:
    huge = b'{"catalogue": "checkout", "rationale": "' + b"x" * MAX_BODY + b'", "steps": []}'
    for path in ("/v1/sagas", "/v1/plans/validate", "/v1/approvals/s/approve"):
        reply = await as_role[Role.ADMIN].post(path, content=huge)
        assert reply.status_code == 413, path
        assert reply.json()["error"]["code"] == "body_too_large"

    async def streamed() -> object:
        for _ in range(10):
            yield b" " * (MAX_BODY // 4)

    chunked = await as_role[Role.AGENT].post("/v1/sagas", content=streamed())  # type: ignore[arg-type]
    assert chunked.status_code == 413
    big_plan = plan_body(rationale="y" * (300 * 1024))  # under the body cap, over the plan's
    too_big = await as_role[Role.AGENT].post("/v1/sagas", content=as_json(big_plan))
    assert too_big.status_code == 413
    assert too_big.json()["error"]["code"] == "plan_too_large"
    assert await store.list_sagas() == []


async def test_a_plan_with_duplicate_keys_is_refused(as_role: Clients, store: Store) -> None:
    text = json.dumps(plan_body())[:-1] + ', "catalogue": "fulfilment"}'
    for path in ("/v1/sagas", "/v1/plans/validate"):
        reply = await as_role[Role.AGENT].post(path, content=text.encode())
        assert reply.status_code == 422, reply.text
        assert reply.json()["error"]["code"] == "plan_malformed"
        assert "catalogue" in reply.json()["error"]["message"]
    for junk in (b"", b"[", b"null", b"\xff\xfe"):
        reply = await as_role[Role.AGENT].post("/v1/sagas", content=junk)
        assert reply.status_code == 422
    assert await store.list_sagas() == []


async def test_every_list_is_paginated(as_role: Clients) -> None:
    agent, viewer = as_role[Role.AGENT], as_role[Role.VIEWER]
    for n in range(5):
        reply = await agent.post(f"/v1/sagas?saga_id=s-{n}", content=as_json(plan_body(f"o-{n}")))
        assert reply.status_code == 201
    first = (await viewer.get("/v1/sagas?limit=2")).json()
    assert (len(first["items"]), first["next_offset"]) == (2, 2)
    last = (await viewer.get("/v1/sagas?limit=2&offset=4")).json()
    assert (len(last["items"]), last["next_offset"]) == (1, None)
    seen = {s["saga_id"] for s in first["items"] + last["items"]}
    middle = (await viewer.get("/v1/sagas?limit=2&offset=2")).json()
    seen |= {s["saga_id"] for s in middle["items"]}
    assert seen == {scoped("agent", f"s-{n}") for n in range(5)}
    for path in ("/v1/sagas", "/v1/approvals", "/v1/dead-letters", "/v1/escalations"):
        assert (await viewer.get(f"{path}?limit=500")).status_code == 200
        for bad in ("limit=501", "limit=0", "offset=-1", "limit=abc"):
            reply = await viewer.get(f"{path}?{bad}")
            assert reply.status_code == 422, (path, bad)
            assert reply.json()["error"]["code"] == "invalid_input"


async def test_an_agent_plan_above_the_rollout_limit_is_202_in_shadow(
    as_role: Clients, store: Store, app: Any
) -> None:
    app.catalogue("checkout").rollout = Rollout(execute_below=Decimal("5"))
    reply = await as_role[Role.AGENT].post("/v1/sagas", content=as_json(plan_body()))
    assert reply.status_code == 202, reply.text
    body = reply.json()
    assert (body["shadowed"], body["code"]) == (True, "rollout_shadow")
    assert body["run_id"].startswith("ro_")
    assert await store.list_sagas() == []
    person = await as_role[Role.ADMIN].post("/v1/sagas", content=as_json(plan_body()))
    assert person.status_code == 201, person.text  # a person's plan is not limited
    app.catalogue("checkout").rollout = Rollout(execute_below=Decimal("5"), above="refuse")
    refused = await as_role[Role.AGENT].post("/v1/sagas", content=as_json(plan_body("o-2")))
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "rollout_refused"
