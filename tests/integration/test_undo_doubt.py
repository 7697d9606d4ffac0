"""An undo keeps its "may still land" window for every end that may have landed, as a forward
call does, and no person settles an undo (or a parked saga) by hand while something of it may
still land: otherwise a refund Pivotal sent lands after the person refunded by hand, and the
customer is paid twice."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    Orchestrator,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    Transient,
    UndoStatus,
    parse_plan,
)
from pivotal.engine.machine import TABLE, Do, Phase
from pivotal.errors import SagaConflict
from pivotal.store import Store

TIMEOUT, GRACE = 10.0, 30.0
UNDO_TRIES = RetryPolicy(max_attempts=2, base_delay=0.01)


class Order(BaseModel):
    order: str = "o-1"


class SdkTimeout(TimeoutError):
    """A refund SDK's own client timeout: the request may be on its way."""


def refunds(ends: list[BaseException], refunded: list[str]) -> Catalogue:
    """charge (its refund ends as ``ends`` say, in turn), then a step that is refused."""
    catalogue = Catalogue("pay", default_timeout=TIMEOUT, doubt_grace=GRACE)

    async def refund(args: Order, result: Any, ctx: StepContext) -> None:
        refunded.append(ctx.key)
        raise ends[min(len(refunded), len(ends)) - 1]

    @catalogue.compensable(undo=refund, retry=RetryPolicy(max_attempts=1), undo_retry=UNDO_TRIES)
    async def charge(args: Order, ctx: StepContext) -> dict[str, str]:
        return {"charge": ctx.key}

    @catalogue.compensable(undo=refund, retry=RetryPolicy(max_attempts=1))
    async def ship(args: Order, ctx: StepContext) -> None:
        raise Permanent("no carrier")

    return catalogue


PLAN = parse_plan({"catalogue": "pay", "steps": [{"name": "charge"}, {"name": "ship"}]})


async def parked(store: Store, clock: FakeClock, end: BaseException) -> Orchestrator:
    """Saga ``s``, compensated but for its refund, which ended with ``end`` each time."""
    orch = Orchestrator(store, refunds([end], []), clock=clock, rng=random.Random(0))
    assert (await orch.execute(PLAN, saga_id="s")).status is SagaStatus.COMPENSATION_FAILED
    return orch


@pytest.mark.parametrize(
    "end",
    [SdkTimeout("read timed out"), Transient("502 from the gateway"), KeyError("reply")],
    ids=["sdk-timeout", "transient", "undeclared"],
)
async def test_a_refund_that_may_have_landed_keeps_its_window_in_the_dead_letter(
    store: Store, clock: FakeClock, end: BaseException
) -> None:
    refunded: list[str] = []
    orch = Orchestrator(store, refunds([end], refunded), clock=clock, rng=random.Random(0))

    state = await orch.execute(PLAN, saga_id="s")

    assert state.status is SagaStatus.COMPENSATION_FAILED
    charge = state.steps[0]
    assert charge.undo_status is UndoStatus.DEAD_LETTERED
    assert refunded == ["s:0:undo"] * UNDO_TRIES.max_attempts
    # the last refund may land until its deadline: the dead letter says so
    assert charge.undo_doubt_until is not None
    assert charge.undo_doubt_until >= clock.now() + GRACE
    [letter] = await store.dead_letters()
    assert letter.next_retry_at is None or letter.next_retry_at >= charge.undo_doubt_until


async def test_a_person_cannot_settle_a_refund_that_may_still_land(
    store: Store, clock: FakeClock
) -> None:
    orch = await parked(store, clock, SdkTimeout("read timed out"))
    state = (await orch.get("s")).state
    until = state.steps[0].undo_doubt_until
    assert until is not None
    [letter] = await store.dead_letters()

    with pytest.raises(SagaConflict) as refused:
        await orch.resolve_dead_letter(letter.id, "olga", "refunded by hand in the dashboard")

    assert "may still land" in str(refused.value)
    assert "cannot land after" in str(refused.value)
    [still] = await store.dead_letters()
    assert still.status == "open"  # nothing was recorded
    assert (await orch.get("s")).state.version == state.version

    clock.advance(until - clock.now() + 1)  # the refund Pivotal sent can no longer land
    await orch.resolve_dead_letter(letter.id, "olga", "refunded by hand in the dashboard")
    done = (await orch.get("s")).state
    assert done.status is SagaStatus.COMPENSATED
    assert done.steps[0].undo_status is UndoStatus.RESOLVED


async def test_a_refund_the_provider_refused_can_be_settled_at_once(
    store: Store, clock: FakeClock
) -> None:
    orch = await parked(store, clock, Permanent("card closed"))
    assert (await orch.get("s")).state.steps[0].undo_doubt_until is None  # nothing was made
    [letter] = await store.dead_letters()

    await orch.resolve_dead_letter(letter.id, "olga", "refunded by bank transfer")

    assert (await orch.get("s")).state.status is SagaStatus.COMPENSATED


def test_settling_by_hand_is_a_row_of_the_machine() -> None:
    rows = [r for r in TABLE if r.phase is Phase.RESOLVING]
    assert {r.do for r in rows} == {Do.REFUSE, Do.BY_HAND}
    assert any("undo_can_land" in r.when and r.do is Do.REFUSE for r in rows)
    assert any("can_land" in r.when and r.do is Do.REFUSE for r in rows)


async def test_a_window_recorded_for_an_abandoned_refund_is_kept_by_the_person_too(
    store: Store, clock: FakeClock
) -> None:
    """Pivotal's own bound cut the refund off (its window was always recorded): resolving
    the dead letter by hand waits for it as a retry of the letter does."""
    catalogue = Catalogue("hang", default_timeout=0.05, doubt_grace=GRACE)
    never = asyncio.Event()

    async def refund(args: Order, result: Any, ctx: StepContext) -> None:
        await never.wait()

    @catalogue.compensable(undo=refund, retry=RetryPolicy(max_attempts=1), undo_retry=UNDO_TRIES)
    async def charge(args: Order, ctx: StepContext) -> dict[str, str]:
        return {"charge": ctx.key}

    @catalogue.compensable(undo=refund, retry=RetryPolicy(max_attempts=1))
    async def ship(args: Order, ctx: StepContext) -> None:
        raise Permanent("no carrier")

    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    plan = parse_plan({"catalogue": "hang", "steps": [{"name": "charge"}, {"name": "ship"}]})
    state = await orch.execute(plan, saga_id="s")
    assert state.steps[0].undo_status is UndoStatus.DEAD_LETTERED
    assert state.steps[0].undo_doubt_until is not None
    [letter] = await store.dead_letters()

    with pytest.raises(SagaConflict, match="may still land"):
        await orch.resolve_dead_letter(letter.id, "olga", "refunded by hand")
    assert (await store.dead_letters())[0].status == "open"
