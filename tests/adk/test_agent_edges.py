"""The saga agent's edges: callbacks that abort, failing models, rejected plans, reuse."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from adk_story import (
    ANOTHER_ORDER,
    ORDER,
    Session,
    acts,
    check_stage,
    comp_records,
    order_agent,
    plan_stage,
)
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext

from pivotal import Orchestrator
from pivotal.adk import Act, Decide, SagaAgent, ScriptedLlm, StageError
from pivotal.examples.commerce import CommerceServices


async def test_a_stage_callback_setting_saga_abort_rolls_back(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    def flag(callback_context: CallbackContext) -> None:
        if "fraud" in str(callback_context.state.get("verdict", "")):
            callback_context.state["saga_abort"] = "fraud suspected by the check"

    check = LlmAgent(
        name="check",
        model=ScriptedLlm.of("fraud"),
        instruction="Judge the order.",
        output_key="verdict",
        after_agent_callback=flag,
    )
    session = Session(order_agent(orchestrator, check=Decide(check)))
    await session.run()
    state = await session.state()
    assert state["saga_status"] == "compensated"
    assert state["saga_reason"] == "aborted by adk:check: fraud suspected by the check"
    assert state["comp:reserve"]["undo"] == "done"
    assert services.calls("charge") == []


async def test_a_failing_model_stage_rolls_back(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    silent = LlmAgent(name="check", model=ScriptedLlm.of(), instruction="Judge.", output_key="v")
    session = Session(order_agent(orchestrator, check=Decide(silent)))
    await session.run()
    state = await session.state()
    assert state["saga_status"] == "compensated"
    assert "model stage check failed: ScriptExhausted" in state["saga_reason"]
    assert len(services.calls("release")) == 1


async def test_an_invalid_plan_is_rejected_and_nothing_runs(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    bad = plan_stage(ORDER | {"quantity": 0})
    session = Session(order_agent(orchestrator, plan=bad))
    await session.run()
    state = await session.state()
    assert state["saga_status"] == "rejected"
    assert "quantity" in state["saga_reason"]
    assert await orchestrator.store.load(state["pivotal_saga_id"]) is None
    assert services.calls() == []


async def test_an_abort_before_any_act_is_recorded_and_nothing_runs(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    stages: list[Any] = [plan_stage(), check_stage("invalid"), *acts()]
    early = SagaAgent(name="early", orchestrator=orchestrator, catalogue="checkout", stages=stages)
    session = Session(early)
    await session.run()
    state = await session.state()
    assert state["saga_status"] == "compensated"
    assert comp_records(state) == {}
    stored = (await orchestrator.get(state["pivotal_saga_id"])).state
    assert stored.reason == "aborted by adk:check: the order check said 'invalid'"
    assert services.calls() == []


async def test_a_new_message_after_the_end_starts_a_new_saga(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    first = plan_stage(ORDER).agent
    assert isinstance(first.model, ScriptedLlm)
    first.model.replies.append(ANOTHER_ORDER)
    session = Session(order_agent(orchestrator, plan=Decide(first)))
    await session.run()
    one = await session.state()
    await session.run("and another one")
    two = await session.state()
    assert one["saga_status"] == two["saga_status"] == "completed"
    assert one["pivotal_saga_id"] != two["pivotal_saga_id"]
    assert two["comp:reserve"]["key"].startswith(two["pivotal_saga_id"])
    assert [p["order_id"] for p in services.rows("payments")] == ["o-77", "o-78"]
    assert two["decided:plan"] == "proceed"


def test_stages_are_checked(orchestrator: Orchestrator) -> None:
    with pytest.raises(StageError, match="at least one Act"):
        SagaAgent(name="x", orchestrator=orchestrator, catalogue="checkout", stages=[])
    act = Act("reserve_stock", lambda s: {})
    with pytest.raises(StageError, match="unique"):
        SagaAgent(name="x", orchestrator=orchestrator, catalogue="checkout", stages=[act, act])
    with pytest.raises(StageError, match="an Act, a Decide, or a Parallel"):
        SagaAgent(name="x", orchestrator=orchestrator, catalogue="checkout", stages=[act, "no"])


def test_importing_pivotal_does_not_import_adk() -> None:
    code = "import sys, pivotal; print('google.adk' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
