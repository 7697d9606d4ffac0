"""A person who asks for a saga by the id an agent gave it (the ledger keeps it in the
agent's namespace) is told so, and how to list the agent's sagas with their full ids; an
agent asking for another's id still hears only that there is no such saga."""

from __future__ import annotations

from server_api import Clients, as_json, plan_body

from pivotal.people.principals import Role


async def test_a_person_asking_by_an_agents_own_id_is_told_where_it_is(
    as_role: Clients,
) -> None:
    made = await as_role[Role.AGENT].post("/v1/sagas?saga_id=order-1", content=as_json(plan_body()))
    assert made.status_code in (200, 201), made.text

    asked = await as_role[Role.OPERATOR].get("/v1/sagas/order-1")

    assert asked.status_code == 404
    said = asked.json()["error"]["message"]
    assert said.startswith("no saga 'order-1': an id an agent gave is kept in its namespace")
    assert "<agent>.<hash>.order-1" in said
    assert "pivotal sagas list --actor-id AGENT" in said
    full = (await as_role[Role.OPERATOR].get("/v1/sagas")).json()["items"][0]["saga_id"]
    assert full.endswith(".order-1")
    missing = await as_role[Role.OPERATOR].get(f"/v1/sagas/{full}x")
    assert missing.json()["error"]["message"] == f"no saga '{full}x'"  # a full id: no hint
