"""Four-eyes, one rule for every surface (the orchestrator, the API, the pages): neither the
submitter nor the person an agent asked on behalf of can approve, an approval that needs two
approvers needs two distinct ones, and people are compared by their canonical name. Who a
plan is for may be required: by an agent's token, or by its catalogue above an amount."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from server_api import Clients, add_token, approval_plan, as_json, plan_body

from pivotal import ApprovalError, Catalogue, FakeClock, Orchestrator, Plan, SagaStatus, parse_plan
from pivotal.declarations.policy import ThresholdPolicy
from pivotal.declarations.rules import OnBehalfOfAbove
from pivotal.errors import FourEyesError, InvalidInput
from pivotal.examples.commerce import CommerceApp
from pivotal.orchestration.four_eyes import why_not
from pivotal.people.principals import Role, canonical_person, hash_token
from pivotal.store import Store
from pivotal.views.saga_scope import scoped

BIG = scoped("agent", "big")  # the agent's saga "big" as it is stored and people see it


async def pending(client: Any, orchestrator: Orchestrator, plan: dict[str, Any]) -> int:
    reply = await client.post("/v1/sagas?saga_id=big", content=as_json(plan))
    assert reply.status_code == 201, reply.text
    state = await orchestrator.run(BIG)
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state.version


async def test_the_person_asked_on_behalf_of_cannot_approve(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    plan = approval_plan() | {"provenance": {"on_behalf_of": "maria"}}
    version = await pending(as_role[Role.AGENT], orchestrator, plan)
    stored = await store.load(BIG)
    assert stored is not None
    assert stored.plan.provenance.on_behalf_of == "maria"
    assert stored.plan.provenance.actor_id == "agent"
    maria = client(await add_token(store, "maria", Role.APPROVER, clock))
    refused = await maria.post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": version})
    )
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "four_eyes"
    assert "on behalf of maria" in refused.json()["error"]["message"]
    after = await store.load(BIG)
    assert after is not None
    assert (after.state.status, after.state.version) == (SagaStatus.AWAITING_APPROVAL, version)
    # she may still reject it; another approver may approve it
    ok = await as_role[Role.APPROVER].post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": version})
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["approval"]["status"] == "approved"
    assert (await orchestrator.run(BIG)).status is SagaStatus.COMPLETED


async def test_the_person_asked_on_behalf_of_may_reject(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    plan = approval_plan() | {"provenance": {"on_behalf_of": "maria"}}
    version = await pending(as_role[Role.AGENT], orchestrator, plan)
    maria = client(await add_token(store, "maria", Role.APPROVER, clock))
    reply = await maria.post(
        f"/v1/approvals/{BIG}/reject", content=as_json({"version": version, "reason": "no"})
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["approval"]["status"] == "rejected"


async def test_two_distinct_approvers_through_the_api(
    as_role: Clients,
    orchestrator: Orchestrator,
    store: Store,
    clock: FakeClock,
    client: Any,
    app: CommerceApp,
) -> None:
    app.catalogue("fulfilment").approval = ThresholdPolicy(
        threshold=150, two_approvers_above=160, steps=frozenset({"capture_payment"})
    )
    version = await pending(as_role[Role.AGENT], orchestrator, approval_plan())
    approver = as_role[Role.APPROVER]
    [item] = (await approver.get("/v1/approvals")).json()["items"]
    assert (item["required"], item["approved_by"]) == (2, [])
    first = await approver.post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": version})
    )
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["status"] == "awaiting_approval"
    assert body["approval"]["status"] == "pending"
    assert body["approval"]["approved_by"] == ["approver"]
    # the same approver again, on the version now shown: refused, nothing recorded
    again = await approver.post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": body["version"]})
    )
    assert again.status_code == 403
    assert again.json()["error"]["code"] == "four_eyes"
    assert "already approved" in again.json()["error"]["message"]
    # a worker pass keeps waiting
    assert (await orchestrator.run(BIG)).status is SagaStatus.AWAITING_APPROVAL
    [item] = (await approver.get("/v1/approvals")).json()["items"]
    assert item["approved_by"] == ["approver"]
    bob = client(await add_token(store, "bob", Role.APPROVER, clock))
    second = await bob.post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": item["version"]})
    )
    assert second.status_code == 200, second.text
    assert second.json()["approval"]["status"] == "approved"
    assert second.json()["approval"]["approved_by"] == ["approver", "bob"]
    assert (await approver.get("/v1/approvals")).json()["items"] == []
    assert (await orchestrator.run(BIG)).status is SagaStatus.COMPLETED
    assert await orchestrator.replayed(BIG) == (await orchestrator.get(BIG)).state


# -- one rule for every surface: the orchestrator, the pages, folded names ------------------


def acted_for(person: str, actor: str = "agent") -> Plan:
    plan = approval_plan() | {"provenance": {"actor_id": actor, "on_behalf_of": person}}
    return parse_plan(as_json(plan))


async def waiting_for(orchestrator: Orchestrator, plan: Plan) -> int:
    await orchestrator.submit(plan, saga_id="big")
    state = await orchestrator.run("big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state.version


def two_approvers(app: CommerceApp) -> None:
    app.catalogue("fulfilment").approval = ThresholdPolicy(
        threshold=150, two_approvers_above=160, steps=frozenset({"capture_payment"})
    )


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("Alice", "alice"),
        ("alice\u200b ", "alice"),
        ("\ufeff ALICE\u2060", "alice"),
        ("al\u200cice", "alice"),
        ("\uff21lice", "alice"),  # a fullwidth A
        ("Stra\u00dfe", "strasse"),
        ("  ", ""),
    ],
)
def test_people_are_compared_by_one_canonical_name(name: str, canonical: str) -> None:
    assert canonical_person(name) == canonical


async def test_the_orchestrator_refuses_every_four_eyes_case_with_folded_names(
    orchestrator: Orchestrator, store: Store, app: CommerceApp
) -> None:
    two_approvers(app)
    version = await waiting_for(orchestrator, acted_for("alice\u200b ", actor="Planner-7"))
    stored = await orchestrator.get("big")
    for who, said in [
        ("Alice", "on behalf of Alice"),
        ("\uff21LICE", "on behalf of"),
        ("planner-7 ", "submitted saga big"),
    ]:
        assert why_not(who, stored, ()) is not None
        with pytest.raises(FourEyesError, match=said) as refused:
            await orchestrator.approve("big", who, run=False, version=version)
        assert isinstance(refused.value, ApprovalError)
        assert refused.value.code == "four_eyes"
    after = await orchestrator.get("big")
    assert after.state.version == version  # nothing was recorded
    first = await orchestrator.approve("big", "bob", run=False)
    assert first.approval is not None
    assert first.approval.approved_by == ("bob",)
    again = await orchestrator.get("big")
    assert why_not("BOB\u200d", again, ()) is not None
    with pytest.raises(FourEyesError, match="already approved"):
        await orchestrator.approve("big", "BOB\u200d", run=False)
    assert why_not("carol", again, ()) is None
    # rejecting is not four-eyes: the person it is for may say no
    rejected = await orchestrator.reject("big", "Alice", "not mine", run=False)
    assert rejected.status is SagaStatus.COMPENSATING


async def test_a_name_of_only_invisible_characters_is_no_approver(
    orchestrator: Orchestrator,
) -> None:
    await waiting_for(orchestrator, acted_for("maria"))
    with pytest.raises(InvalidInput):
        await orchestrator.approve("big", "\u200b\u2060", run=False)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


@asynccontextmanager
async def page_as(
    api: FastAPI, store: Store, clock: FakeClock, name: str
) -> AsyncIterator[httpx.AsyncClient]:
    """A browser session on the approver's pages, logged in as approver ``name``."""
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://pivotal") as c:
        token = await add_token(store, name, Role.APPROVER, clock)
        form = await c.get("/ui/login")
        reply = await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
        assert reply.status_code == 303, reply.text
        yield c


async def test_the_page_refuses_the_person_asked_on_behalf_of_and_says_why(
    api: FastAPI, orchestrator: Orchestrator, store: Store, clock: FakeClock
) -> None:
    version = await waiting_for(orchestrator, acted_for("maria\u200b "))
    async with page_as(api, store, clock, "Maria") as maria:
        detail = await maria.get("/ui/approvals/big")
        assert 'id="four-eyes"' in detail.text
        assert "on behalf of Maria" in detail.text
        assert "/ui/approvals/big/approve" not in detail.text  # no approve form
        assert "/ui/approvals/big/reject" in detail.text  # she may still reject
        data = {"reason": "mine", "version": str(version), "csrf": csrf_of(detail.text)}
        refused = await maria.post("/ui/approvals/big/approve", data=data)
        assert refused.status_code == 403
        assert "on behalf of Maria" in refused.text
    after = await store.load("big")
    assert after is not None
    assert (after.state.status, after.state.version) == (SagaStatus.AWAITING_APPROVAL, version)


async def test_the_page_refuses_the_person_asked_on_behalf_of_as_second_approver(
    api: FastAPI,
    orchestrator: Orchestrator,
    store: Store,
    clock: FakeClock,
    app: CommerceApp,
) -> None:
    two_approvers(app)
    await waiting_for(orchestrator, acted_for("maria"))
    first = await orchestrator.approve("big", "bob", "fine", run=False)
    assert first.status is SagaStatus.AWAITING_APPROVAL
    async with page_as(api, store, clock, "maria") as maria:
        detail = await maria.get("/ui/approvals/big")
        assert 'id="four-eyes"' in detail.text
        data = {"reason": "ok", "version": str(first.version), "csrf": csrf_of(detail.text)}
        refused = await maria.post("/ui/approvals/big/approve", data=data)
        assert refused.status_code == 403
    async with page_as(api, store, clock, "Bob ") as bob:  # bob again, spelt otherwise
        detail = await bob.get("/ui/approvals/big")
        assert "already approved" in detail.text
        data = {"reason": "ok", "version": str(first.version), "csrf": csrf_of(detail.text)}
        assert (await bob.post("/ui/approvals/big/approve", data=data)).status_code == 403
    after = await store.load("big")
    assert after is not None
    assert after.state.approval is not None
    assert after.state.approval.approved_by == ("bob",)
    assert after.state.version == first.version


async def test_the_api_refuses_a_folded_spelling_of_the_person_asked_for(
    orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    version = await waiting_for(orchestrator, acted_for("alice\u200b "))
    alice = client(await add_token(store, "Alice", Role.APPROVER, clock))
    refused = await alice.post("/v1/approvals/big/approve", content=as_json({"version": version}))
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "four_eyes"


# -- who a plan is for: required by an agent's token, or by its catalogue above an amount ---


async def test_a_token_that_requires_on_behalf_of_refuses_a_plan_without_it(
    store: Store, clock: FakeClock, client: Any
) -> None:
    secret = "pvt_test_strict_agent"
    made = await store.create_token(
        "strict-bot", Role.AGENT.value, hash_token(secret), clock.now(), require_on_behalf_of=True
    )
    assert made.require_on_behalf_of is True
    found = await store.token_by_hash(hash_token(secret))
    assert found is not None
    assert found.require_on_behalf_of is True
    bot = client(secret)
    for provenance in ({}, {"on_behalf_of": " \u200b"}):
        refused = await bot.post(
            "/v1/sagas?saga_id=s1", content=as_json(plan_body(provenance=provenance))
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "on_behalf_of_required"
    assert await store.load(scoped("strict-bot", "s1")) is None
    # validation says so too, as submission will
    checked = (await bot.post("/v1/plans/validate", content=as_json(plan_body()))).json()
    assert checked["valid"] is False
    assert [(e["code"], e["path"]) for e in checked["errors"]] == [
        ("on_behalf_of_required", "provenance.on_behalf_of")
    ]
    named = plan_body(provenance={"on_behalf_of": "ana"})
    assert (await bot.post("/v1/plans/validate", content=as_json(named))).json()["valid"]
    ok = await bot.post(
        "/v1/sagas?saga_id=s1", content=as_json(plan_body(provenance={"on_behalf_of": "ana"}))
    )
    assert ok.status_code == 201, ok.text


async def test_a_catalogue_requires_on_behalf_of_above_an_amount(
    as_role: Clients, app: CommerceApp, store: Store
) -> None:
    app.catalogue("checkout").rule(OnBehalfOfAbove(Decimal("5")))
    agent = as_role[Role.AGENT]
    refused = await agent.post("/v1/sagas?saga_id=s1", content=as_json(plan_body()))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "plan_rejected"
    [error] = refused.json()["error"]["errors"]
    assert error["code"] == "on_behalf_of_required"
    assert error["path"] == "provenance.on_behalf_of"
    assert await store.load(scoped("agent", "s1")) is None
    checked = await agent.post("/v1/plans/validate", content=as_json(plan_body()))
    assert [e["code"] for e in checked.json()["errors"]] == ["on_behalf_of_required"]
    body = plan_body(provenance={"on_behalf_of": "ana"})
    assert (await agent.post("/v1/sagas?saga_id=s1", content=as_json(body))).status_code == 201
    small = Catalogue("small", rules=[OnBehalfOfAbove(100)])
    assert "on_behalf_of" in OnBehalfOfAbove(100).describe()
    assert small.rules  # declared like every other rule
