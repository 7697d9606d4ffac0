"""The agent's lease: every pass checks it, and no model stage holds it for ever."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable
from pathlib import Path

import pytest
from adk_story import Session, order_agent, plan_stage
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from pydantic import ValidationError

from pivotal import FakeClock, Orchestrator, SQLiteStore
from pivotal.adk import Decide, StageError
from pivotal.adk.stages import DECIDE_TIMEOUT
from pivotal.examples.commerce import CommerceApp, CommerceServices, Fault, Faults
from pivotal.hooks import Point
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.sagas.state import SagaStatus
from pivotal.store import Store


async def drain(orchestrator: Orchestrator) -> None:
    await Worker(orchestrator, WorkerConfig(poll_interval=0.01)).run(until_idle=True)


async def test_a_paused_agent_never_calls_after_a_worker_took_its_saga_over(
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
    faults: Faults,
) -> None:
    paused, go = asyncio.Event(), asyncio.Event()

    async def pause() -> None:  # the agent's process stops here (SIGSTOP, a VM freeze)
        paused.set()
        await go.wait()

    def hook(point: Point, index: int) -> Awaitable[None] | None:
        if point is Point.AFTER_INTENT and index == 1:  # the charge's intent is durable
            return pause()
        return None

    agent_orch = Orchestrator(store, app, clock=clock, owner="agent", hook=hook)
    session = Session(order_agent(agent_orch))
    agent = asyncio.create_task(session.run())
    await paused.wait()
    (summary,) = await store.list_sagas()
    saga_id = summary.saga_id

    # The agent's lease and the charge's deadline pass; a worker takes the saga over, the
    # provider declines its charge, and it compensates the reservation.
    clock.advance(3600)
    faults.next("charge", Fault.PERMANENT)
    await drain(orchestrator)
    assert (await orchestrator.get(saga_id)).state.status is SagaStatus.COMPENSATED
    assert [c["fault"] for c in services.calls("charge")] == ["permanent"]
    assert len(services.calls("release")) == 1

    go.set()  # the agent's process is continued
    await agent
    assert len(services.calls("charge")) == 1  # it did not charge the compensated order
    assert services.rows("payments") == []
    state = await session.state()
    assert "taken over" in state["saga_reason"]
    assert (await orchestrator.get(saga_id)).state.status is SagaStatus.COMPENSATED


class Silent(BaseLlm):
    """A model that is asked and never answers."""

    model: str = "silent"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        await asyncio.Event().wait()  # nobody ever sets it
        yield LlmResponse()  # pragma: no cover - never reached


def silent_check() -> LlmAgent:
    return LlmAgent(name="check", model=Silent(), instruction="Judge.", output_key="verdict")


@pytest.mark.parametrize("bound_by", ["stage", "agent"])
async def test_a_model_stage_that_never_answers_rolls_back_and_frees_the_saga(
    bound_by: str, store: Store, orchestrator: Orchestrator, services: CommerceServices
) -> None:
    if bound_by == "stage":
        agent = order_agent(orchestrator, check=Decide(silent_check(), timeout=0.05))
    else:  # the agent's bound, for every stage that sets none (the planning stage does)
        plan = Decide(plan_stage().agent, timeout=60)
        agent = order_agent(
            orchestrator, check=Decide(silent_check()), plan=plan, decide_timeout=0.05
        )
    session = Session(agent)
    await session.run()  # ends: the model's silence is a verdict that rolls back
    state = await session.state()
    saga_id = state["pivotal_saga_id"]
    why = "model stage check gave no verdict within 0.05s"
    assert state["decided:check"] == why
    assert state["saga_status"] == "compensated"
    assert state["saga_reason"] == f"aborted by adk:check: {why}"
    assert state["comp:reserve"]["undo"] == "done"  # the reservation is released
    assert len(services.calls("release")) == 1
    assert services.calls("charge") == []
    stored = (await orchestrator.get(saga_id)).state
    assert stored.status is SagaStatus.COMPENSATED
    lease = await store.lease_of(saga_id)
    assert lease is not None
    assert lease[0] is None  # and nobody holds its lease


@pytest.fixture
def offline(app: CommerceApp, tmp_path: Path) -> Orchestrator:
    """An orchestrator whose ledger is never opened: for agents that are only built."""
    return Orchestrator(SQLiteStore(tmp_path / "unused.db"), app)


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), True])
def test_a_model_stage_bound_must_be_a_positive_number_of_seconds(
    timeout: float, offline: Orchestrator
) -> None:
    with pytest.raises(StageError, match="timeout of model stage check"):
        Decide(silent_check(), timeout=timeout)
    refused = ValidationError if isinstance(timeout, bool) else StageError
    with pytest.raises(refused, match=r"timeout of the agent order_saga|float"):
        order_agent(offline, decide_timeout=timeout)


def test_a_model_stage_is_bounded_by_default(offline: Orchestrator) -> None:
    assert order_agent(offline).decide_timeout == DECIDE_TIMEOUT == 60.0
