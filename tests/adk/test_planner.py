"""``AdkPlanner`` inside ``plan_and_submit``: errors fed back, then a saga or an escalation."""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.agents import LlmAgent

from pivotal import ActorType, Orchestrator, SagaStatus
from pivotal.adk import AdkPlanner, ScriptedLlm
from pivotal.examples.commerce import CommerceApp
from pivotal.planning import PlanningOutcome, PlanRequest, plan_and_submit


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


GOOD = {
    "catalogue": "checkout",
    "steps": [
        call("reserve_stock", order_id="o-9", sku="sku-1", quantity=1, warehouse="A"),
        call("charge_payment", order_id="o-9", amount="19.90"),
        call("create_shipment", order_id="o-9", warehouse="A"),
    ],
    "rationale": "reserve, charge, ship",
}
BAD = GOOD | {"steps": [GOOD["steps"][0], GOOD["steps"][2]], "rationale": "forgot to charge"}
REQUEST = PlanRequest(
    text="send me one sku-1, I pay 19.90",
    context={"order_id": "o-9", "amount": "19.90"},
    catalogue="checkout",
)


@pytest.fixture(autouse=True)
def open_order(app: CommerceApp) -> None:
    """The order REQUEST is about, in the order system: GOOD matches its facts."""
    app.services.order(
        "o-9", customer="c-o-9", amount="19.90", lines=[{"sku": "sku-1", "quantity": 1}]
    )


def planner(*replies: Any) -> tuple[AdkPlanner, ScriptedLlm]:
    model = ScriptedLlm.of(*replies, model="scripted-gemini")
    agent = LlmAgent(name="planner", model=model, instruction="(replaced per attempt)")
    return AdkPlanner(agent), model


async def test_errors_are_fed_back_and_the_second_proposal_is_submitted(
    orchestrator: Orchestrator,
) -> None:
    adk, model = planner(BAD, GOOD)
    run = await plan_and_submit(REQUEST, adk, orchestrator)

    assert run.outcome is PlanningOutcome.ACCEPTED
    assert [a.accepted for a in run.attempts] == [False, True]
    assert run.attempts[0].errors[0].code == "missing_step"
    second = model.requests[1]
    told = "".join(p.text or "" for c in second.contents for p in c.parts or [])
    assert "Attempt 1 was rejected" in told
    assert "missing_step" in told
    assert second.config.response_schema == run_schema(orchestrator)
    system = str(second.config.system_instruction)
    assert "Catalogue 'checkout'" in system
    assert "charge_payment" in system
    assert run.saga_id is not None
    stored = await orchestrator.get(run.saga_id)
    assert stored.plan.provenance.actor_type is ActorType.AGENT
    assert stored.plan.provenance.actor_id == "adk:planner"
    assert stored.plan.provenance.model == "scripted-gemini"
    assert (await orchestrator.run(run.saga_id)).status is SagaStatus.COMPLETED


async def test_every_attempt_invalid_escalates(orchestrator: Orchestrator) -> None:
    adk, model = planner(BAD, BAD | {"rationale": "again"}, "not json at all")
    run = await plan_and_submit(REQUEST, adk, orchestrator, max_replans=2)

    assert run.outcome is PlanningOutcome.ESCALATED
    assert run.saga_id is None
    assert len(run.attempts) == 3
    assert run.attempts[1].errors[0].code == "repeated_proposal"
    assert run.attempts[2].errors[0].code == "planner_failed"
    assert len(model.requests) == 3


def run_schema(orchestrator: Orchestrator) -> dict[str, Any]:
    from pivotal.planning.render import catalogue_schema

    return catalogue_schema(orchestrator.app.catalogue("checkout"))
