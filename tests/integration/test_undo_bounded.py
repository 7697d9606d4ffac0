"""Keep models (and anything slow) out of compensators: every undo is bounded by its step's
timeout (no step or catalogue can declare none), and an undo that times out is retried with
its undo key, then parked as a dead letter."""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    CatalogueError,
    FakeClock,
    Orchestrator,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    UndoStatus,
    parse_plan,
)
from pivotal.store import Store

UNDO_TRIES = RetryPolicy(max_attempts=3, base_delay=0.01)


class Item(BaseModel):
    n: int = 0


def hanging_undo(forever: asyncio.Event, calls: list[str]) -> Catalogue:
    catalogue = Catalogue("undo", default_timeout=0.05, doubt_grace=0.0)

    async def release(args: Item, result: Any, ctx: StepContext) -> None:
        calls.append(ctx.key)
        await forever.wait()  # a compensator that waits on something slow, for ever

    @catalogue.compensable(undo=release, retry=RetryPolicy(max_attempts=1), undo_retry=UNDO_TRIES)
    async def hold(args: Item, ctx: StepContext) -> dict[str, str]:
        return {"id": ctx.key}

    @catalogue.compensable(undo=release, retry=RetryPolicy(max_attempts=1))
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("refused")

    return catalogue


async def test_an_undo_that_never_returns_is_retried_then_dead_lettered(
    store: Store, clock: FakeClock
) -> None:
    forever, calls = asyncio.Event(), []
    orch = Orchestrator(store, hanging_undo(forever, calls), clock=clock, rng=random.Random(0))
    plan = parse_plan({"catalogue": "undo", "steps": [{"name": "hold"}, {"name": "refuse"}]})

    state = await asyncio.wait_for(orch.execute(plan, saga_id="s"), 60)  # bounded: it ends

    assert state.status is SagaStatus.COMPENSATION_FAILED
    held = state.steps[0]
    assert held.undo_status is UndoStatus.DEAD_LETTERED
    assert held.undo_attempts == UNDO_TRIES.max_attempts
    assert calls == ["s:0:undo"] * UNDO_TRIES.max_attempts  # the same undo key each time
    assert "abandoned" in (held.undo_error or "")
    [letter] = state.dead_letters
    assert letter.index == 0


def test_no_step_or_catalogue_can_leave_a_call_unbounded() -> None:
    for timeout in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(CatalogueError):
            Catalogue("c", default_timeout=timeout)
        with pytest.raises(CatalogueError):
            Catalogue("c", default_timeout=timeout, max_timeout=timeout)
    catalogue = Catalogue("c", default_timeout=5, max_timeout=10)

    async def nothing(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    for timeout in (0.0, 11.0, math.inf):
        with pytest.raises(CatalogueError):

            @catalogue.compensable(undo=nothing, timeout=timeout)
            async def slow(args: Item, ctx: StepContext) -> None:
                return None
