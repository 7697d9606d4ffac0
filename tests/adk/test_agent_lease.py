"""The agent's lease: every pass checks it, and no model stage holds it for ever."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from adk_story import Session, order_agent

from pivotal import FakeClock, Orchestrator
from pivotal.examples.commerce import CommerceApp, CommerceServices, Fault, Faults
from pivotal.hooks import Point
from pivotal.state import SagaStatus
from pivotal.store import Store
from pivotal.worker import Worker, WorkerConfig


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
