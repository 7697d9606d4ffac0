"""An agent's saga ids are its own (``pivotal.views.saga_scope``): another agent can neither take
one nor learn that it exists; people see the full stored id."""

from __future__ import annotations

from typing import Any

from server_api import Clients, add_token, as_json, plan_body

from pivotal import FakeClock, Orchestrator, parse_plan
from pivotal.declarations.plan import ActorType
from pivotal.people.principals import Role
from pivotal.store import Store
from pivotal.views.saga_scope import MAX_ID, earlier_namespace, namespace, scoped, shown


def test_namespaces_are_one_per_principal_and_never_overlap() -> None:
    assert namespace("agent") == namespace("AGENT\u200b ")  # one principal, its tokens
    assert namespace("agent") != namespace("agent2")
    assert namespace("a.b") != namespace("a-b")  # the slug is readable, the hash tells apart
    assert scoped("shop-bot", "o-1").startswith("shop-bot.")
    assert shown("shop-bot", scoped("shop-bot", "o-1")) == "o-1"
    assert shown("other", scoped("shop-bot", "o-1")) == scoped("shop-bot", "o-1")
    assert len(namespace("x" * 200)) + MAX_ID <= 128  # the ledger's limit holds


async def test_another_agent_gets_its_own_saga_under_the_same_id(
    as_role: Clients, store: Store, clock: FakeClock, client: Any
) -> None:
    agent = as_role[Role.AGENT]
    other = client(await add_token(store, "other-agent", Role.AGENT, clock))
    first = await agent.post("/v1/sagas?saga_id=order-1", content=as_json(plan_body()))
    assert first.status_code == 201, first.text
    assert first.json()["saga_id"] == "order-1"
    # the same id, even another plan: no 409 telling it the id is taken, a saga of its own
    second = await other.post("/v1/sagas?saga_id=order-1", content=as_json(plan_body("o-2")))
    assert second.status_code == 201, second.text
    assert second.json()["created"] is True
    assert second.json()["saga_id"] == "order-1"
    mine, theirs = (
        await store.load(scoped("agent", "order-1")),
        await store.load(scoped("other-agent", "order-1")),
    )
    assert mine is not None
    assert theirs is not None
    assert (mine.plan.provenance.actor_id, theirs.plan.provenance.actor_id) == (
        "agent",
        "other-agent",
    )
    # each reads its own under the id it gave
    for who, name in ((agent, "agent"), (other, "other-agent")):
        seen = await who.get("/v1/sagas/order-1")
        assert seen.status_code == 200
        assert (seen.json()["saga_id"], seen.json()["submitted_by"]) == ("order-1", name)
    # the same agent and plan again: idempotent; another plan under its own id: 409
    again = await agent.post("/v1/sagas?saga_id=order-1", content=as_json(plan_body()))
    assert (again.status_code, again.json()["created"]) == (200, False)
    conflict = await agent.post("/v1/sagas?saga_id=order-1", content=as_json(plan_body("o-3")))
    assert conflict.status_code == 409
    assert "another of your plans" in conflict.json()["error"]["message"]
    assert scoped("agent", "order-1") not in conflict.text
    assert len(await store.list_sagas()) == 2
    # people see the full stored ids
    listed = (await as_role[Role.VIEWER].get("/v1/sagas")).json()["items"]
    assert {s["saga_id"] for s in listed} == {
        scoped("agent", "order-1"),
        scoped("other-agent", "order-1"),
    }
    full = await as_role[Role.OPERATOR].get(f"/v1/sagas/{scoped('agent', 'order-1')}")
    assert full.status_code == 200
    assert full.json()["saga_id"] == scoped("agent", "order-1")


async def test_reading_another_agents_saga_is_the_404_of_a_missing_one(
    as_role: Clients, store: Store, clock: FakeClock, client: Any
) -> None:
    other = client(await add_token(store, "other-agent", Role.AGENT, clock))
    assert (await other.post("/v1/sagas?saga_id=secret", content=as_json(plan_body()))).is_success
    agent = as_role[Role.AGENT]
    for probe in ("secret", scoped("other-agent", "secret")):
        found = await agent.get(f"/v1/sagas/{probe}")
        missing = await agent.get(f"/v1/sagas/{probe}x")
        assert found.status_code == missing.status_code == 404
        assert found.json()["error"]["code"] == missing.json()["error"]["code"]
        assert found.json()["error"]["message"] == f"no saga {probe!r}"
        assert missing.json()["error"]["message"] == f"no saga {probe + 'x'!r}"
    # the owner may also use the full id; it is shown its own
    full = await other.get(f"/v1/sagas/{scoped('other-agent', 'secret')}")
    assert (full.status_code, full.json()["saga_id"]) == (200, "secret")


async def test_tokens_of_one_principal_share_its_ids(
    as_role: Clients, store: Store, clock: FakeClock, client: Any
) -> None:
    agent = as_role[Role.AGENT]
    same = client(await add_token(store, "AGENT", Role.AGENT, clock))  # --same-person
    assert (await agent.post("/v1/sagas?saga_id=s-1", content=as_json(plan_body()))).is_success
    seen = await same.get("/v1/sagas/s-1")
    assert (seen.status_code, seen.json()["saga_id"]) == (200, "s-1")


async def test_an_admin_submits_under_the_id_it_gives(as_role: Clients, store: Store) -> None:
    admin = as_role[Role.ADMIN]
    reply = await admin.post("/v1/sagas?saga_id=ops-1", content=as_json(plan_body()))
    assert (reply.status_code, reply.json()["saga_id"]) == (201, "ops-1")
    assert await store.load("ops-1") is not None
    long_id = "x" * (MAX_ID + 1)  # an agent's ids are shorter: its namespace takes the rest
    refused = await as_role[Role.AGENT].post(
        f"/v1/sagas?saga_id={long_id}", content=as_json(plan_body())
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "invalid_input"
    ok = await as_role[Role.AGENT].post(
        f"/v1/sagas?saga_id={'x' * MAX_ID}", content=as_json(plan_body())
    )
    assert ok.status_code == 201, ok.text


async def test_a_saga_submitted_before_ids_were_scoped_stays_its_agents(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    plan = parse_plan(as_json(plan_body()))
    stamped = plan.model_copy(
        update={
            "provenance": plan.provenance.model_copy(
                update={"actor_type": ActorType.AGENT, "actor_id": "agent"}
            )
        }
    )
    await orchestrator.submit(stamped, saga_id="old-1")  # a bare id, as before
    agent = as_role[Role.AGENT]
    assert (await agent.get("/v1/sagas/old-1")).json()["saga_id"] == "old-1"
    again = await agent.post("/v1/sagas?saga_id=old-1", content=as_json(plan_body()))
    assert (again.status_code, again.json()["created"], again.json()["saga_id"]) == (
        200,
        False,
        "old-1",
    )  # not run a second time
    other = client(await add_token(store, "other-agent", Role.AGENT, clock))
    assert (await other.get("/v1/sagas/old-1")).status_code == 404
    own = await other.post("/v1/sagas?saga_id=old-1", content=as_json(plan_body()))
    assert (own.status_code, own.json()["created"]) == (201, True)
    assert await store.load(scoped("other-agent", "old-1")) is not None
    assert len(await store.list_sagas()) == 2


def test_look_alike_names_are_one_principal() -> None:
    assert namespace("ann-bot") == namespace("\u0430nn-b\u00adot")  # a Cyrillic a, a soft hyphen
    assert namespace("ann-bot") != namespace("anna-bot")


async def test_a_saga_stored_before_names_folded_look_alikes_stays_its_agents(
    orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    """ "m" looks like "rn": the canonical name of mcp-agent changed, so did its namespace;
    its sagas stored under the one before are still its own, and not run a second time."""
    assert earlier_namespace("mcp-agent") != namespace("mcp-agent")
    plan = parse_plan(as_json(plan_body()))
    stamped = plan.model_copy(
        update={
            "provenance": plan.provenance.model_copy(
                update={"actor_type": ActorType.AGENT, "actor_id": "mcp-agent"}
            )
        }
    )
    stored_id = earlier_namespace("mcp-agent") + "order-9"
    await orchestrator.submit(stamped, saga_id=stored_id)
    agent = client(await add_token(store, "mcp-agent", Role.AGENT, clock))
    seen = await agent.get("/v1/sagas/order-9")
    assert (seen.status_code, seen.json()["saga_id"]) == (200, "order-9")
    again = await agent.post("/v1/sagas?saga_id=order-9", content=as_json(plan_body()))
    assert (again.status_code, again.json()["created"], again.json()["saga_id"]) == (
        200,
        False,
        "order-9",
    )
    assert [s.saga_id for s in await store.list_sagas()] == [stored_id]
    other = client(await add_token(store, "other-agent", Role.AGENT, clock))
    assert (await other.get("/v1/sagas/order-9")).status_code == 404
