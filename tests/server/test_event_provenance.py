"""Every event of a saga carries the reference of its provenance (who proposed the plan, the
run, the prompt version, the source document), and every surface that serves the events
serves the reference and what it resolves to."""

from __future__ import annotations

from server_api import Clients, open_plan_orders, plan_body

from pivotal import Orchestrator, parse_plan
from pivotal.declarations.plan import ActorType, Provenance
from pivotal.people.principals import Role
from pivotal.store import Store

PROVENANCE = Provenance(
    actor_type=ActorType.AGENT,
    actor_id="planner-3",
    run_id="run-42",
    prompt_version="v7",
    source_document_id="email-981",
)


async def ran(orchestrator: Orchestrator) -> str:
    open_plan_orders(orchestrator.app.services)  # type: ignore[attr-defined]
    plan = parse_plan(plan_body("o-3") | {"provenance": PROVENANCE.model_dump(mode="json")})
    state = await orchestrator.execute(plan, saga_id="prov-1")
    return state.saga_id


async def test_every_event_read_from_the_ledger_carries_its_provenance(
    orchestrator: Orchestrator, store: Store
) -> None:
    saga_id = await ran(orchestrator)
    events = await store.events(saga_id)
    assert len(events) > 3
    assert {e.provenance_ref for e in events} == {PROVENANCE.ref()}
    assert await store.provenance(PROVENANCE.ref()) == PROVENANCE


async def test_the_api_serves_the_reference_with_each_event_and_what_it_resolves_to(
    orchestrator: Orchestrator, as_role: Clients
) -> None:
    saga_id = await ran(orchestrator)
    for role in (Role.OPERATOR, Role.VIEWER):
        body = (await as_role[role].get(f"/v1/sagas/{saga_id}")).json()
        assert body["provenance_ref"] == PROVENANCE.ref()
        assert Provenance.model_validate(body["provenance"]).ref() == body["provenance_ref"]
        assert {e["provenance_ref"] for e in body["events"]} == {PROVENANCE.ref()}


async def test_the_event_log_resolves_each_reference(
    orchestrator: Orchestrator, as_role: Clients
) -> None:
    saga_id = await ran(orchestrator)
    body = (await as_role[Role.OPERATOR].get(f"/v1/sagas/{saga_id}/events")).json()
    refs = {e["provenance_ref"] for e in body["events"]}
    assert refs == {PROVENANCE.ref()}
    assert {ref: Provenance.model_validate(p) for ref, p in body["provenance"].items()} == {
        PROVENANCE.ref(): PROVENANCE
    }
