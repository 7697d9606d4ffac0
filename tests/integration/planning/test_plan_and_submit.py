"""plan_and_submit against the ledger: sagas with provenance, escalations for a person."""

from __future__ import annotations

from typing import Any

import pytest
from chat_server import event_provenance_refs

from pivotal import ActorType, EventType, InvalidInput, Plan, SagaStatus
from pivotal.planning import (
    EscalationClosed,
    EscalationNotFound,
    EscalationStatus,
    PlanningMode,
    PlanningOutcome,
    PlanRequest,
    RulePlanner,
    ScriptedPlanner,
    commerce_rules,
    plan_and_submit,
    resolve_escalation,
)


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


STEPS = [
    call("reserve_stock", order_id="4471", sku="lamp", quantity=1, warehouse="B"),
    call("authorize_payment", order_id="4471", amount="180"),
    call("capture_payment", order_id="4471", amount="180"),
    call("create_shipment", order_id="4471", warehouse="B"),
]
CREDIT = [*STEPS[:2], call("apply_goodwill_credit", order_id="4471", amount="20"), *STEPS[2:]]
REQUEST = PlanRequest(
    text="ship from the closer warehouse, I expect something for the delay",
    context={"order_id": "4471", "amount": "180", "sku": "lamp", "warehouse": "B"},
    catalogue="fulfilment",
    source_document_id="email-4471",
)


async def test_the_saga_and_every_event_carry_the_planners_provenance(
    orchestrator, store, ledger
) -> None:
    planner = ScriptedPlanner([{"steps": CREDIT}, {"steps": STEPS, "rationale": "no credit"}])
    run = await plan_and_submit(REQUEST, planner, orchestrator, run_id="run-4471")
    assert run.outcome is PlanningOutcome.ACCEPTED
    assert run.saga_id is not None

    state = await orchestrator.run(run.saga_id)
    assert state.status is SagaStatus.AWAITING_APPROVAL
    stored = await orchestrator.get(run.saga_id)
    prov = stored.plan.provenance
    assert prov.model_dump() == {
        "actor_type": ActorType.AGENT,
        "actor_id": "scripted",
        "run_id": "run-4471",
        "model": "scripted",
        "prompt_version": "scripted",
        "source_document_id": "email-4471",
        "on_behalf_of": None,
        "about": {"order_id": "4471"},  # what the request is about, from its context
        "rerun_of": None,
        "forked_from": None,
    }
    assert stored.plan.rationale == "no credit"
    assert state.approval is not None
    assert state.approval.rationale == "no credit"  # shown to the approver

    events = await store.events(run.saga_id)
    assert [e.type for e in events][:2] == [EventType.SAGA_SUBMITTED, EventType.STEP_STARTED]
    refs = await event_provenance_refs(store, run.saga_id)
    assert len(refs) == len(events) > 3
    assert set(refs) == {stored.state.provenance_ref} == {prov.ref()}
    assert events[0].data["provenance_ref"] == prov.ref()
    assert await store.provenance(prov.ref()) == prov


async def test_an_accepted_run_is_kept_with_every_attempt(orchestrator, ledger) -> None:
    planner = ScriptedPlanner([{"steps": CREDIT}, {"steps": STEPS}])
    run = await plan_and_submit(REQUEST, planner, orchestrator)
    [kept] = await ledger.runs(PlanningMode.LIVE)
    assert kept == run
    assert kept.mode is PlanningMode.LIVE
    assert [a.accepted for a in kept.attempts] == [False, True]
    assert await ledger.escalations() == []


async def test_rule_plans_are_recorded_as_the_systems(orchestrator) -> None:
    run = await plan_and_submit(REQUEST, RulePlanner(commerce_rules()), orchestrator)
    stored = await orchestrator.get(run.saga_id)
    prov = stored.plan.provenance
    assert (prov.actor_type, prov.actor_id, prov.model) == (ActorType.SYSTEM, "rules", None)


async def test_after_the_cap_a_person_gets_an_escalation_not_a_saga(
    orchestrator, store, ledger, services
) -> None:
    planner = ScriptedPlanner([{"steps": CREDIT}] * 3)
    run = await plan_and_submit(REQUEST, planner, orchestrator, run_id="run-esc")

    assert run.outcome is PlanningOutcome.ESCALATED
    assert run.saga_id is None
    assert await store.list_sagas() == []
    assert services.calls() == []
    [escalation] = await ledger.escalations()
    assert escalation.id == run.escalation_id
    assert escalation.status is EscalationStatus.OPEN
    assert escalation.run.request == REQUEST
    assert escalation.run.run_id == "run-esc"
    assert [a.repeat_of for a in escalation.run.attempts] == [None, 1, 1]
    assert escalation.run.attempts[0].plan == {"steps": CREDIT}
    assert [e.code for e in escalation.run.attempts[0].errors] == ["unknown_step"]
    assert "no valid plan after 3 attempt(s)" in escalation.reason
    assert "apply_goodwill_credit" in escalation.reason
    assert await ledger.escalation(escalation.id) == escalation


async def test_a_person_settles_an_escalation_with_their_own_plan(
    orchestrator, ledger, services
) -> None:
    run = await plan_and_submit(REQUEST, ScriptedPlanner([{"steps": CREDIT}]), orchestrator)
    assert run.escalation_id is not None
    hold = [  # a checkout: hold the lamp and charge the order while support calls
        STEPS[0],
        # a charge is the order's amount (a deposit of less is refused now)
        {"name": "charge_payment", "args": {"order_id": "4471", "amount": "180"}},
    ]
    own = Plan.model_validate({"catalogue": "checkout", "steps": hold, "rationale": "hold"})

    closed, state = await resolve_escalation(
        orchestrator, run.escalation_id, "ana", "held the lamp, support will call", plan=own
    )

    assert closed.status is EscalationStatus.RESOLVED
    assert (closed.resolved_by, closed.resolution) == ("ana", "held the lamp, support will call")
    assert state is not None
    assert closed.saga_id == state.saga_id == f"esc-{run.escalation_id}"
    # 180 is over checkout's threshold of 150: the charge waits for a person, then it runs
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert services.calls("charge") == []
    state = await orchestrator.approve(state.saga_id, "bob")
    assert state.status is SagaStatus.COMPLETED
    stored = await orchestrator.get(state.saga_id)
    prov = stored.plan.provenance
    assert (prov.actor_type, prov.actor_id, prov.run_id) == (ActorType.HUMAN, "ana", run.run_id)
    assert prov.source_document_id == "email-4471"
    assert await ledger.escalations() == []
    assert [e.id for e in await ledger.escalations(None)] == [run.escalation_id]
    with pytest.raises(EscalationClosed):
        await resolve_escalation(orchestrator, run.escalation_id, "bob")


async def test_resolving_needs_a_known_escalation_and_a_name(orchestrator) -> None:
    with pytest.raises(EscalationNotFound):
        await resolve_escalation(orchestrator, 99, "ana")
    with pytest.raises(InvalidInput):
        await resolve_escalation(orchestrator, 99, "  ")


async def test_a_precondition_that_fails_at_submission_escalates(
    orchestrator, services, ledger, monkeypatch
) -> None:
    real_submit = orchestrator.submit

    async def ships_first(plan, *, saga_id=None):
        services.set_order_status("4471", "shipped")  # between validation and submission
        return await real_submit(plan, saga_id=saga_id)

    monkeypatch.setattr(orchestrator, "submit", ships_first)
    run = await plan_and_submit(REQUEST, ScriptedPlanner([{"steps": STEPS}]), orchestrator)

    assert run.outcome is PlanningOutcome.ESCALATED
    [attempt] = run.attempts
    assert not attempt.accepted
    assert [e.code for e in attempt.errors] == ["precondition_failed"]
    assert "order 4471 is shipped" in attempt.errors[0].message
    [escalation] = await ledger.escalations()
    assert escalation.run.attempts == run.attempts
    assert services.calls() == []


async def test_a_request_must_name_a_catalogue_when_there_are_several(orchestrator) -> None:
    with pytest.raises(InvalidInput, match="known catalogues: checkout, fulfilment"):
        await plan_and_submit(PlanRequest(text="x"), ScriptedPlanner([{}]), orchestrator)
