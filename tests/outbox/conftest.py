"""Outbox fixtures: sagas that announce messages, run by a real orchestrator."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import Catalogue, FakeClock, Orchestrator, SagaStatus, StepContext
from pivotal.clock import Clock
from pivotal.declarations.plan import parse_plan
from pivotal.store import Store

RunSagas = Callable[..., Awaitable[list[str]]]


class Note(BaseModel):
    count: int = 1


def announcing() -> Catalogue:
    """One step that publishes ``count`` messages: a saga of it announces ``count + 1``
    (its notes, then ``saga.completed``)."""
    catalogue = Catalogue("announce")

    @catalogue.compensable()
    async def note(args: Note, ctx: StepContext) -> dict[str, int]:
        for n in range(args.count):
            ctx.publish("note.made", {"n": n})
        return {"count": args.count}

    @note.undo
    async def unnote(args: Note, result: Any, ctx: StepContext) -> None:
        return None

    return catalogue


async def run_sagas(
    store: Store, clock: Clock, n: int, count: int = 2, prefix: str = "s"
) -> list[str]:
    """Run ``n`` announcing sagas to completion; their ids, in the order they ran."""
    orch = Orchestrator(store, announcing(), clock=clock, rng=random.Random(0))
    plan = parse_plan(
        {"catalogue": "announce", "steps": [{"name": "note", "args": {"count": count}}]}
    )
    ids = []
    for i in range(n):
        state = await orch.execute(plan, saga_id=f"{prefix}-{i}")
        assert state.status is SagaStatus.COMPLETED
        ids.append(state.saga_id)
    return ids


@pytest.fixture
def sagas(store: Store, clock: FakeClock) -> RunSagas:
    """``await sagas(n, count=2)``: completed sagas that left messages in the outbox."""

    async def run(n: int, count: int = 2, prefix: str = "s") -> list[str]:
        return await run_sagas(store, clock, n, count, prefix)

    return run
