"""A rollout that holds an agent's plan back ends the agent's turn cleanly on every agent
surface: the ADK session says so (no exception out of the Runner, no session left
"planning"), and the planning loop keeps its run with every attempt."""

from __future__ import annotations

from decimal import Decimal

import pytest
from adk_story import ORDER, OrderPlan, Session, order_agent
from google.adk.agents import LlmAgent

from pivotal import Orchestrator
from pivotal.adk import Decide, ScriptedLlm
from pivotal.declarations.policy import Rollout
from pivotal.examples.commerce import CommerceApp, CommerceServices
from pivotal.planning import PlanningOutcome, PlanRequest, ScriptedPlanner, plan_and_submit
from pivotal.store import Store
from pivotal.store.planning_records import PlanningMode

# ORDER's charge is 49.90: above a limit of 10
ABOVE = ("shadow", "refuse")


def checkout_plan() -> dict[str, object]:
    order = ORDER["order_id"]
    return {
        "catalogue": "checkout",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {k: ORDER[k] for k in ("order_id", "sku", "quantity", "warehouse")},
            },
            {"name": "charge_payment", "args": {"order_id": order, "amount": ORDER["amount"]}},
            {"name": "create_shipment", "args": {"order_id": order, "warehouse": "A"}},
            {
                "name": "send_confirmation",
                "args": {"order_id": order, "recipient": ORDER["recipient"]},
            },
        ],
        "rationale": "the order as asked",
    }


@pytest.mark.parametrize("above", ABOVE)
async def test_the_adk_session_ends_with_the_rollouts_answer(
    above: str, app: CommerceApp, orchestrator: Orchestrator, services: CommerceServices
) -> None:
    app.catalogue("checkout").rollout = Rollout(execute_below=Decimal("10"), above=above)
    planning = LlmAgent(
        name="plan",
        model=ScriptedLlm.of(ORDER, ORDER),  # a reply for each turn
        instruction="Read the order and write it as data.",
        output_schema=OrderPlan,
        output_key="order_plan",
    )
    session = Session(order_agent(orchestrator, plan=Decide(planning)))
    await session.run()  # nothing escapes the Runner
    state = await session.state()
    assert state["saga_status"] == ("shadowed" if above == "shadow" else "refused")
    assert state["saga_reason"]
    assert await orchestrator.store.list_sagas() == []
    assert services.calls() == []
    # the next turn starts a new saga, as after any final status
    app.catalogue("checkout").rollout = None
    await session.run()
    again = await session.state()
    assert again["saga_status"] == "completed", again["saga_reason"]


@pytest.mark.parametrize("above", ABOVE)
async def test_the_planning_loop_keeps_its_run_when_the_rollout_holds_the_plan(
    above: str,
    app: CommerceApp,
    orchestrator: Orchestrator,
    services: CommerceServices,
    store: Store,
) -> None:
    app.catalogue("checkout").rollout = Rollout(execute_below=Decimal("10"), above=above)
    bad = checkout_plan() | {"steps": checkout_plan()["steps"][1:]}  # no reservation first
    planner = ScriptedPlanner([bad, checkout_plan()])
    request = PlanRequest(
        text="place my order", context={"order_id": ORDER["order_id"]}, catalogue="checkout"
    )
    run = await plan_and_submit(request, planner, orchestrator)  # nothing escapes
    assert run.outcome is PlanningOutcome.ESCALATED  # a person decides
    assert run.saga_id is None
    assert len(run.attempts) == 2  # the earlier rejected attempt is kept
    code = "rollout_shadow" if above == "shadow" else "rollout_refused"
    assert [e.code for e in run.attempts[-1].errors] == [code]
    [kept] = await store.runs(PlanningMode.LIVE)
    assert kept.run_id == run.run_id
    assert len(kept.attempts) == 2
    assert [e.run.run_id for e in await store.escalations()] == [run.run_id]
    assert await store.list_sagas() == []
    assert services.calls() == []
