"""``Orchestrator.abort``: a verdict before the point of no return becomes a rollback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    Orchestrator,
    Plan,
    SagaState,
    StepContext,
    StepStatus,
    parse_plan,
)
from pivotal.engine import RunOptions
from pivotal.errors import ApprovalError, InvalidInput
from pivotal.examples.commerce import CommerceServices
from pivotal.hooks import Point
from pivotal.sagas.state import ApprovalStatus, EventType, SagaStatus
from pivotal.store import Store

Checker = Callable[[str], Awaitable[SagaState]]


class Item(BaseModel):
    pass


PlanBuilder = Callable[..., Plan]


def stop_after(index: int) -> RunOptions:
    """A pass that suspends once step ``index`` took effect (its outcome committed)."""
    done = {"reached": False}

    def hook(point: Point, at: int) -> None:
        if point is Point.AFTER_EFFECT and at == index:
            done["reached"] = True

    return RunOptions(hook=hook, should_stop=lambda: done["reached"])


async def test_abort_after_a_step_undoes_it(
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    services: CommerceServices,
    check: Checker,
) -> None:
    state = await orchestrator.submit(checkout_plan())
    paused = await orchestrator.run(state.saga_id, options=stop_after(0))
    assert paused.status is SagaStatus.RUNNING
    assert paused.steps[0].status.value == "succeeded"

    aborted = await orchestrator.abort(state.saga_id, "adk:check", "the order is invalid")
    assert aborted.status is SagaStatus.COMPENSATING
    assert aborted.reason == "aborted by adk:check: the order is invalid"
    final = await orchestrator.run(state.saga_id)
    assert final.status is SagaStatus.COMPENSATED
    assert final.reason == "aborted by adk:check: the order is invalid"
    assert len(services.calls("release")) == 1
    assert services.calls("charge") == []
    events = await orchestrator.store.events(state.saga_id)
    assert [e.type for e in events].count(EventType.COMPENSATION_STARTED) == 1
    await check(state.saga_id)


async def test_abort_a_submitted_saga_and_run_it(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder, services: CommerceServices
) -> None:
    state = await orchestrator.submit(checkout_plan())
    final = await orchestrator.abort(state.saga_id, "ops", "customer cancelled", run=True)
    assert final.status is SagaStatus.COMPENSATED
    assert services.calls() == []


async def test_abort_is_refused_once_terminal(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    done = await orchestrator.execute(checkout_plan())
    with pytest.raises(InvalidInput, match="completed: it cannot be aborted"):
        await orchestrator.abort(done.saga_id, "ops", "too late")
    assert (await orchestrator.get(done.saga_id)).state.version == done.version


async def test_an_operator_stops_a_saga_waiting_for_approval(
    orchestrator: Orchestrator, store: Store, fulfilment_plan: PlanBuilder
) -> None:
    big = fulfilment_plan("4471", amount="180.00", sku="lamp")
    waiting = await orchestrator.execute(big)
    assert waiting.status is SagaStatus.AWAITING_APPROVAL

    aborted = await orchestrator.abort(waiting.saga_id, "ops", "customer called")

    assert aborted.status is SagaStatus.COMPENSATING
    assert aborted.reason == "aborted by ops: customer called"
    assert aborted.approval is not None
    assert aborted.approval.status is ApprovalStatus.REJECTED
    written = (await store.events(waiting.saga_id))[-2:]
    assert [e.type for e in written] == [
        EventType.APPROVAL_REJECTED,
        EventType.COMPENSATION_STARTED,
    ]
    assert written[0].data["approver"] == "ops"
    assert written[0].data["note"] == "aborted by ops: customer called"
    final = await orchestrator.run(waiting.saga_id)
    assert final.status is SagaStatus.COMPENSATED
    with pytest.raises(ApprovalError):  # nothing is left for an approver to decide
        await orchestrator.approve(waiting.saga_id, "olga")


async def test_abort_is_refused_past_the_point_of_no_return(
    orchestrator: Orchestrator, fulfilment_plan: PlanBuilder
) -> None:
    state = await orchestrator.submit(fulfilment_plan())
    paused = await orchestrator.run(state.saga_id, options=stop_after(2))  # capture ran
    assert paused.status is SagaStatus.RUNNING
    with pytest.raises(InvalidInput, match="point of no return"):
        await orchestrator.abort(state.saga_id, "ops", "changed my mind")
    after = (await orchestrator.get(state.saga_id)).state
    assert after.version == paused.version


async def test_abort_needs_who_and_why(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    state = await orchestrator.submit(checkout_plan())
    with pytest.raises(InvalidInput, match="who aborted it and why"):
        await orchestrator.abort(state.saga_id, " ", "x")
    with pytest.raises(InvalidInput, match="who aborted it and why"):
        await orchestrator.abort(state.saga_id, "ops", "")


async def test_a_pass_pauses_before_a_step_with_everything_before_it_committed(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder, services: CommerceServices
) -> None:
    state = await orchestrator.submit(checkout_plan())
    paused = await orchestrator.run(
        state.saga_id, options=RunOptions(pause_before=lambda index: index >= 1)
    )
    assert paused.status is SagaStatus.RUNNING
    assert [r.status.value for r in paused.steps] == ["succeeded", "pending", "pending"]
    stored = await orchestrator.get(state.saga_id)
    assert stored.state == paused  # the first outcome is committed, not held back
    assert [c.key for c in services.calls("charge")] == []
    done = await orchestrator.run(state.saga_id)
    assert done.status is SagaStatus.COMPLETED


async def test_an_abort_during_a_call_records_its_late_result_and_never_calls_it_again(
    make_orchestrator: Callable[..., Orchestrator], clock: FakeClock
) -> None:
    """A step still running when the saga is aborted: its result, when it comes, is
    recorded (the abort's write made the pass's commit conflict), and the undo follows it
    at once with that result. Before, the result was dropped, the step waited out its
    deadline in doubt and was called a second time before its undo."""
    calls: list[str] = []
    undone: list[Any] = []
    running, finish = asyncio.Event(), asyncio.Event()
    catalogue = Catalogue("slow")

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        undone.append(result)
        return "refunded"

    @catalogue.compensable(undo=refund)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        calls.append(ctx.key)
        running.set()
        await finish.wait()
        return {"charge": ctx.key}

    @catalogue.pivot()
    async def capture(args: Item, ctx: StepContext) -> None:
        calls.append(ctx.key)

    orchestrator = make_orchestrator(catalogue)
    plan = parse_plan(
        {"catalogue": "slow", "steps": [{"name": "charge", "args": {}}, {"name": "capture"}]}
    )
    run = asyncio.ensure_future(orchestrator.execute(plan, saga_id="s"))
    await running.wait()
    aborted = await orchestrator.abort("s", "ops", "the customer cancelled")
    assert aborted.status is SagaStatus.COMPENSATING
    finish.set()
    final = await run

    assert final.status is SagaStatus.COMPENSATED
    assert calls == ["s:0"]  # called once: never again, never the pivot
    assert undone == [{"charge": "s:0"}]  # the undo got the late result
    assert final.steps[0].status is StepStatus.SUCCEEDED
    events = await orchestrator.store.events("s")
    [started] = [e for e in events if e.type is EventType.STEP_STARTED]
    [undo] = [e for e in events if e.type is EventType.UNDO_STARTED]
    assert undo.at < started.data["deadline"]  # nothing waited for a doubt to pass


async def test_an_abort_stops_a_long_call_at_its_next_progress_report(
    make_orchestrator: Callable[..., Orchestrator], clock: FakeClock
) -> None:
    """A two-minute step that reports its progress is stopped at its next report once the
    saga is aborted: it does not run to its end, it is never called again, and its undo
    follows at once, by its key (nothing of it is still in flight)."""
    reached: list[int] = []
    undone: list[Any] = []
    running, go_on = asyncio.Event(), asyncio.Event()
    catalogue = Catalogue("slow", default_timeout=120)

    async def release(args: Item, result: Any, ctx: StepContext) -> str:
        undone.append(result)
        return "released"

    @catalogue.compensable(undo=release)
    async def copy(args: Item, ctx: StepContext) -> dict[str, Any]:
        for part in range(10):
            await ctx.progress("copying", done=part, total=10)
            reached.append(part)
            if part == 0:
                running.set()
                await go_on.wait()
            clock.advance(2)  # each part takes a while
        return {"copied": ctx.key}

    @catalogue.pivot()
    async def publish(args: Item, ctx: StepContext) -> None:
        reached.append(-1)

    orchestrator = make_orchestrator(catalogue)
    plan = parse_plan(
        {"catalogue": "slow", "steps": [{"name": "copy", "args": {}}, {"name": "publish"}]}
    )
    run = asyncio.ensure_future(orchestrator.execute(plan, saga_id="s"))
    await running.wait()
    await orchestrator.abort("s", "ops", "wrong folder")
    go_on.set()
    final = await run

    assert final.status is SagaStatus.COMPENSATED
    assert reached == [0]  # stopped at the next report; publish never ran
    assert undone == [None]  # undone by its key
    assert final.steps[0].status is StepStatus.UNKNOWN
    assert final.steps[0].attempts == 1
    events = await orchestrator.store.events("s")
    [started] = [e for e in events if e.type is EventType.STEP_STARTED]
    [undo] = [e for e in events if e.type is EventType.UNDO_STARTED]
    assert undo.at < started.data["deadline"]  # nothing waited for a doubt to pass
