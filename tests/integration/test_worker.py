"""Workers in-process: concurrent runs, deferred retries, graceful stop, lease fencing."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    EventType,
    LeaseLost,
    Orchestrator,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    StepStatus,
    Transient,
    parse_plan,
)
from pivotal.examples.commerce import Fault
from pivotal.operations.worker import Worker, WorkerConfig

FAST = WorkerConfig(poll_interval=0.01)
# Polls and sweeps so rare that they never happen again during a test: only what the test
# does (a stop, a finished call) moves the worker.
IDLE = WorkerConfig(poll_interval=3600.0, sweep_interval=3600.0)
BOUND = 30.0  # a safety net against a hang, never what a test measures


class Args(BaseModel):
    n: int = 1


async def noop_undo(args: Args, result: Any, ctx: StepContext) -> None:
    return None


def one_of(catalogue: str, *steps: str) -> Any:
    return parse_plan({"catalogue": catalogue, "steps": [{"name": s} for s in steps]})


async def lease(store: Any, saga_id: str) -> tuple[str | None, int]:
    """(owner, epoch) of the saga's lease; owner None when it is free."""
    found = await store.lease_of(saga_id)
    assert found is not None
    return found[0], found[1]


async def eventually(predicate: Callable[[], Any]) -> None:
    """Poll ``predicate`` (a callable, sync or async) until it holds. ``BOUND`` only turns a
    hang into a failure: what is tested is that the condition comes true at all."""
    async with asyncio.timeout(BOUND):
        while True:
            held = predicate()
            if inspect.isawaitable(held):
                held = await held
            if held:
                return
            await asyncio.sleep(0.01)


async def turns(n: int = 50) -> None:
    """Let the event loop run ``n`` times: whatever the test just made ready (and that waits
    for no I/O) runs to its next wait. Counted in loop turns, not in seconds."""
    for _ in range(n):
        await asyncio.sleep(0)


def record_claims(monkeypatch: Any, store: Any) -> list[tuple[float, list[str]]]:
    """Record every ``claim_next``: (the clock time it claimed at, the saga ids it took)."""
    claims: list[tuple[float, list[str]]] = []
    claim_next = store.claim_next

    async def recording(
        owner: str, ttl: float, now: float, limit: int, **filters: Any
    ) -> list[tuple[str, int]]:
        taken = await claim_next(owner, ttl, now, limit, **filters)
        claims.append((now, sorted(s for s, _ in taken)))
        return taken

    monkeypatch.setattr(store, "claim_next", recording)
    return claims


async def replays(orchestrator: Orchestrator, saga_id: str) -> Any:
    stored = (await orchestrator.get(saga_id)).state
    assert await orchestrator.replayed(saga_id) == stored
    return stored


async def test_worker_runs_submitted_sagas_concurrently_to_their_ends(
    orchestrator, store, services, faults, checkout_plan, fulfilment_plan, check, monkeypatch
) -> None:
    services.order("4480", customer="c-4480")
    faults.next("reserve", Fault.TRANSIENT, Fault.TIMEOUT_AFTER_EFFECT)  # whoever meets them
    await orchestrator.submit(checkout_plan("c-ok"), saga_id="c-ok")
    reorder = ("charge_payment", "reserve_stock", "create_shipment")
    await orchestrator.submit(checkout_plan("c-bad", quantity=60, order=reorder), saga_id="c-bad")
    await orchestrator.submit(fulfilment_plan(), saga_id="f-ok")  # order 4490, 120.00
    await orchestrator.submit(fulfilment_plan("4480", amount="90.00"), saga_id="f-bad")
    services.set_order_status("4480", "cancelled")  # the capture's precondition breaks
    batches: list[list[str]] = []
    claim_next = store.claim_next

    async def recording(*args: Any, **filters: Any) -> list[tuple[str, int]]:
        claims = await claim_next(*args, **filters)
        batches.append(sorted(s for s, _ in claims))
        return claims

    monkeypatch.setattr(store, "claim_next", recording)

    stats = await Worker(orchestrator, FAST).run(until_idle=True)

    assert batches[0] == ["c-bad", "c-ok", "f-bad", "f-ok"]  # all leased and run at once
    assert stats.finished == {"completed": 2, "compensated": 2}
    assert (stats.runs, stats.leases_lost, stats.errors) == (4, 0, 0)
    ends = {
        "c-ok": "completed",
        "f-ok": "completed",
        "c-bad": "compensated",
        "f-bad": "compensated",
    }
    for saga_id, status in ends.items():
        state = await check(saga_id)
        assert state.status.value == status
        assert (await lease(store, saga_id))[0] is None  # released
    c_bad = (await orchestrator.get("c-bad")).state
    assert "out of stock" in (c_bad.steps[1].error or "")
    assert len(services.rows("effects", op="refund")) == 1
    assert len(services.rows("effects", op="void")) == 1
    assert services.rows("payments", kind="capture")[0]["order_id"] == "4490"
    assert services.available("sku-1", "A") == 50 - 2 - 1


async def test_submission_only_records_until_a_worker_runs(
    orchestrator, store, services, checkout_plan, check
) -> None:
    before = asyncio.all_tasks()
    state = await orchestrator.submit(checkout_plan("o-1"), saga_id="quiet")
    await turns()  # whatever the submission scheduled in this process has run by now

    # Nothing was left behind that could run it later: no task, no lease, no heartbeat.
    assert asyncio.all_tasks() - before == set()
    assert orchestrator.leases.held == {}
    assert await store.lease_of("quiet") == (None, 0, None)  # never claimed, by anyone
    assert state.status is SagaStatus.SUBMITTED
    assert (await orchestrator.get("quiet")).state.status is SagaStatus.SUBMITTED
    assert [e.type for e in await store.events("quiet")] == [EventType.SAGA_SUBMITTED]
    assert services.calls() == []

    stats = await Worker(orchestrator, FAST).run(until_idle=True)

    assert stats.finished == {"completed": 1}
    assert [c["op"] for c in services.calls()] == ["reserve", "charge", "ship"]
    await check("quiet")


async def test_a_retry_due_later_releases_the_saga_until_it_is_due(
    make_orchestrator, store, clock, monkeypatch
) -> None:
    calls: list[int] = []
    catalogue = Catalogue("flaky")

    @catalogue.compensable(
        undo=noop_undo,
        retry=RetryPolicy(max_attempts=3, base_delay=100.0, max_delay=1e3, jitter=False),
    )
    async def book(args: Args, ctx: StepContext) -> dict[str, int]:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise Transient("busy")
        return {"booked": ctx.attempt}

    orchestrator = make_orchestrator(catalogue)
    await orchestrator.submit(one_of("flaky", "book"), saga_id="later")
    due = clock.now() + 100.0
    claims = record_claims(monkeypatch, store)
    worker = Worker(orchestrator, WorkerConfig(poll_interval=0.01, max_inline_wait=1.0))
    task = asyncio.create_task(worker.run())

    def idle_polls(since: int) -> int:
        """The worker's looks for work since ``claims[since]``, at the clock's current time,
        that took nothing."""
        return sum(1 for at, taken in claims[since:] if at == clock.now() and taken == [])

    async def released() -> bool:
        return worker.stats.runs == 1 and (await lease(store, "later"))[0] is None

    await eventually(released)
    state = (await orchestrator.get("later")).state
    assert (state.status, state.wake_at) == (SagaStatus.RUNNING, due)
    assert state.steps[0].status is StepStatus.RETRY_WAIT
    assert state.steps[0].next_attempt_at == due
    # Not claimed before it is due: after the release, and again one second before it is
    # due, the worker looked for work three times and took nothing.
    released_at = len(claims)
    await eventually(lambda: idle_polls(released_at) >= 3)
    clock.advance(99.0)
    await eventually(lambda: idle_polls(released_at) >= 3)
    assert (worker.stats.runs, calls) == (1, [1])

    clock.advance(2.0)

    async def completed() -> bool:
        return (await orchestrator.get("later")).state.status is SagaStatus.COMPLETED

    await eventually(completed)
    worker.stop()
    stats = await asyncio.wait_for(task, BOUND)
    assert (stats.runs, stats.finished, calls) == (2, {"completed": 1}, [1, 2])
    starts = [e for e in await store.events("later") if e.type is EventType.STEP_STARTED]
    assert starts[1].at >= due
    assert (await orchestrator.get("later")).state.wake_at is None
    assert (await lease(store, "later"))[0] is None
    await replays(orchestrator, "later")


async def test_graceful_stop_finishes_the_call_in_flight_and_releases(
    make_orchestrator, store, monkeypatch
) -> None:
    started, gate = asyncio.Event(), asyncio.Event()
    calls: list[tuple[str, int]] = []
    catalogue = Catalogue("gated")

    @catalogue.compensable(undo=noop_undo)
    async def hold(args: Args, ctx: StepContext) -> dict[str, bool]:
        calls.append(("hold", ctx.attempt))
        started.set()
        await gate.wait()
        return {"held": True}

    @catalogue.compensable(undo=noop_undo)
    async def after(args: Args, ctx: StepContext) -> dict[str, bool]:
        calls.append(("after", ctx.attempt))
        return {"after": True}

    first = make_orchestrator(catalogue)
    await first.submit(one_of("gated", "hold", "after"), saga_id="g")
    claims = record_claims(monkeypatch, store)
    worker = Worker(first, IDLE)
    swept = asyncio.Event()
    sweep = worker.sweeper.sweep

    async def observed_sweep() -> Any:
        try:
            return await sweep()
        finally:
            swept.set()

    monkeypatch.setattr(worker.sweeper, "sweep", observed_sweep)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), BOUND)
    # The worker is idle beside the call in flight: its first sweep is over and it looked for
    # more work, found none and went to wait (it polls and sweeps again only in an hour).
    await eventually(lambda: swept.is_set() and ([] in (taken for _, taken in claims)))

    worker.stop()
    await turns()  # no I/O is pending: a run() that did not wait for the call would be over
    assert not task.done()  # it waits for the call in flight
    gate.set()
    stats = await asyncio.wait_for(task, BOUND)

    assert (stats.runs, stats.finished, stats.errors) == (1, {}, 0)
    state = await replays(first, "g")
    assert state.status is SagaStatus.RUNNING
    assert [r.status for r in state.steps] == [StepStatus.SUCCEEDED, StepStatus.PENDING]
    assert state.steps[0].result == {"held": True}
    types = [e.type for e in await store.events("g")]
    assert types[1:] == [EventType.STEP_STARTED, EventType.STEP_SUCCEEDED]
    assert (await lease(store, "g"))[0] is None

    second = make_orchestrator(catalogue)
    stats = await Worker(second, FAST).run(until_idle=True)

    assert stats.finished == {"completed": 1}
    assert calls == [("hold", 1), ("after", 1)]
    events = await store.events("g")
    by = [e.data["by"] for e in events if e.type is EventType.STEP_STARTED]
    assert by == [first.owner, second.owner]
    await replays(second, "g")


async def test_a_stale_holder_is_fenced_after_its_lease_expires(store, clock) -> None:
    started, gate = asyncio.Event(), asyncio.Event()
    catalogue = Catalogue("fenced")

    @catalogue.compensable(undo=noop_undo)
    async def slow(args: Args, ctx: StepContext) -> dict[str, int]:
        if ctx.attempt == 1:
            started.set()
            await gate.wait()
        return {"attempt": ctx.attempt}

    a = Orchestrator(store, catalogue, clock=clock, owner="A", lease_ttl=10)
    b = Orchestrator(store, catalogue, clock=clock, owner="B", lease_ttl=10)
    await a.submit(one_of("fenced", "slow"), saga_id="f")
    epoch = await store.claim("f", "A", 10, clock.now())
    assert epoch is not None
    task = asyncio.create_task(a.drive("f", epoch))
    await asyncio.wait_for(started.wait(), BOUND)
    with pytest.raises(LeaseLost):
        await b.run("f")  # A's lease still holds

    clock.advance(11)
    state = await b.run("f")

    assert state.status is SagaStatus.COMPLETED
    assert await lease(store, "f") == (None, epoch + 1)
    assert await store.heartbeat("A", {"f": epoch}, 10, clock.now()) == set()
    events = await store.events("f")
    gate.set()
    with pytest.raises(LeaseLost):
        await task
    assert await store.events("f") == events  # A's late outcome changed nothing
    assert (await b.get("f")).state == state
    assert [e.data["by"] for e in events if e.type is EventType.STEP_STARTED] == ["A", "B"]
    await replays(b, "f")


async def test_a_slow_sweep_never_delays_heartbeats(store, clock, monkeypatch) -> None:
    """A dead letter whose retried undo hangs must not let a running saga's lease lapse.

    Leases are reckoned on the fake clock, which moves only when the test moves it: each
    time, by less than a lease length, and then the worker's own heartbeat must renew the
    lease while the sweep is stuck. The lease outlives several lease lengths.
    """
    gate = asyncio.Event()
    undo_calls: list[int] = []
    catalogue = Catalogue("slow")

    async def hanging_undo(args: Args, result: Any, ctx: StepContext) -> None:
        undo_calls.append(ctx.attempt)
        if len(undo_calls) == 1:
            raise Permanent("refused")  # parked at once, due again immediately
        await gate.wait()  # the sweep's retry hangs here

    @catalogue.compensable(
        undo=hanging_undo,
        dead_letter_retry=RetryPolicy(max_attempts=5, base_delay=0.0, jitter=False),
    )
    async def hold(args: Args, ctx: StepContext) -> dict[str, int]:
        if args.n == 0:
            raise Permanent("no")  # this saga compensates and dead-letters its first step
        if args.n == 2:
            await gate.wait()  # the running saga's action hangs here
        return {"held": args.n}

    orchestrator = Orchestrator(store, catalogue, clock=clock)
    two = {
        "catalogue": "slow",
        "steps": [{"name": "hold", "args": {"n": 1}}, {"name": "hold", "args": {"n": 0}}],
    }
    await orchestrator.execute(parse_plan(two), saga_id="parked")
    assert len(await store.dead_letters()) == 1
    await orchestrator.submit(
        parse_plan({"catalogue": "slow", "steps": [{"name": "hold", "args": {"n": 2}}]}),
        saga_id="busy",
    )
    beats: list[tuple[float, set[str]]] = []  # the heartbeats of "busy": (clock time, held)
    heartbeat = store.heartbeat

    async def recording(owner: str, leases: Any, ttl: float, now: float) -> set[str]:
        held = await heartbeat(owner, leases, ttl, now)
        if "busy" in leases:
            beats.append((now, held))
        return held

    monkeypatch.setattr(store, "heartbeat", recording)
    ttl = 0.3  # seconds on the fake clock; the heartbeat beats every ttl / 3 real seconds
    config = WorkerConfig(lease_ttl=ttl, poll_interval=0.02, sweep_interval=0.05)
    worker = Worker(orchestrator, config)
    running = asyncio.create_task(worker.run())

    async def both_blocked() -> bool:
        owner, _ = await lease(store, "busy")
        return owner is not None and len(undo_calls) == 2

    await eventually(both_blocked)
    owner, epoch = await lease(store, "busy")
    for _ in range(4):  # more than two lease lengths in all, with the sweep stuck
        clock.advance(ttl * 2 / 3)  # the lease still holds: renewed less than a ttl ago
        now = clock.now()
        await eventually(lambda: (now, {"busy"}) in beats)  # noqa: B023 (awaited at once)
        found = await store.lease_of("busy")
        assert found is not None
        assert found[:2] == (owner, epoch)  # never taken over: the heartbeat kept the lease
        assert found[2] == pytest.approx(now + ttl)  # renewed from the time of the beat
    assert len(undo_calls) == 2  # the sweep was stuck all along
    assert await store.expire_leases(clock.now()) == []  # nothing lapsed for a sweep to free

    gate.set()

    async def settled() -> bool:
        done = (await orchestrator.get("busy")).state.status is SagaStatus.COMPLETED
        return done and await store.dead_letters() == []  # the retried undo settled it

    await eventually(settled)
    worker.stop()
    await asyncio.wait_for(running, BOUND)
    assert (await orchestrator.get("parked")).state.status is SagaStatus.COMPENSATED
