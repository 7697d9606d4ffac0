"""What a saga agent's session (its state and its events' text) says about the saga: outcomes
and a reason code, never the policy, who decided or why, nor a failed step's raw error."""

from __future__ import annotations

from typing import Any

from adk_story import Session, plan_stage
from google.adk.events import Event

from agent_world import APPROVER, NOTE, TOKEN, told, with_provider
from pivotal import Orchestrator
from pivotal.adk import Act, SagaAgent
from pivotal.examples.commerce import CommerceApp

BIG_ORDER = {  # the seeded order 4471: 180.00, its capture waits for a person
    "order_id": "4471",
    "sku": "lamp",
    "quantity": 1,
    "amount": "180.00",
    "warehouse": "B",
    "recipient": "customer-4471@example.com",
}


def texts(events: list[Event]) -> str:
    return " ".join(
        p.text or "" for e in events if e.content and e.content.parts for p in e.content.parts
    )


def capture_agent(orch: Orchestrator) -> SagaAgent:
    def take(*keys: str) -> Any:
        return lambda s: {k: s["order_plan"][k] for k in keys}

    stages: list[Any] = [
        plan_stage(BIG_ORDER),
        Act("reserve_stock", take("order_id", "sku", "quantity", "warehouse")),
        Act("authorize_payment", take("order_id", "amount")),
        Act("capture_payment", take("order_id", "amount")),
    ]
    return SagaAgent(name="capture", orchestrator=orch, catalogue="fulfilment", stages=stages)


async def test_the_session_says_it_waits_and_was_rejected_not_why(
    orchestrator: Orchestrator,
) -> None:
    session = Session(capture_agent(orchestrator))
    events = await session.run()
    state = await session.state()
    assert state["saga_status"] == "awaiting_approval"
    assert state["saga_approval"]["step"] == "capture_payment"
    assert "required" not in state["saga_approval"]
    assert state["saga_reason_code"] == "approval_pending"
    assert told(state) == told(texts(events)) == [], (state, texts(events))
    await orchestrator.reject(state["pivotal_saga_id"], APPROVER, NOTE, run=True)
    events = await session.run("is it done?")
    state = await session.state()
    assert state["saga_status"] == "compensated"
    assert state["saga_reason_code"] == "approval_rejected"
    assert told(state) == told(texts(events)) == [], (state, texts(events))


async def test_a_failed_steps_token_is_not_in_the_session(
    orchestrator: Orchestrator, app: CommerceApp
) -> None:
    with_provider(app)
    stages: list[Any] = [Act("book", lambda s: {}), Act("call_provider", lambda s: {})]
    agent = SagaAgent(name="booker", orchestrator=orchestrator, catalogue="provider", stages=stages)
    session = Session(agent)
    events = await session.run()
    state = await session.state()
    saga = await orchestrator.get(state["pivotal_saga_id"])
    assert saga.state.reason is not None
    assert TOKEN in saga.state.reason
    assert state["saga_status"] == "compensated"
    assert state["saga_reason_code"] == "step_failed"
    assert "call_provider (step 1) failed" in state["saga_reason"]
    assert told(state) == told(texts(events)) == [], (state, texts(events))
