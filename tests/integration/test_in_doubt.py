"""An attempt that may still take effect stays in doubt until it provably cannot: a paused
process, a call that lands after its timeout, a lookup that lags, a resumed pivot in doubt,
a call that never returns, a worker that is stopped while one is in flight."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    EventType,
    FakeClock,
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
from pivotal.declarations.plan import Plan
from pivotal.engine import RunOptions
from pivotal.operations.worker import Sweeper, Worker, WorkerConfig
from pivotal.store import Store

ONCE = RetryPolicy(max_attempts=1)
QUICK = RetryPolicy(max_attempts=3, base_delay=0.01)


class Item(BaseModel):
    n: int = 0


class Provider:
    """Applies each key once (a repeated key returns the first reply), keeps what is in
    place, and can hold a call back: ``hold(key)`` makes the next call of that key wait
    until ``release(key)``, then land."""

    def __init__(self, clock: FakeClock | None = None, lag: float = 0.0) -> None:
        self.effects: dict[str, float] = {}  # key -> when it took effect
        self.undone: set[str] = set()
        self.calls: list[tuple[str, str]] = []  # (key, caller)
        self.clock, self.lag = clock, lag
        self._held: dict[str, asyncio.Event] = {}

    def hold(self, key: str) -> None:
        self._held[key] = asyncio.Event()

    def release(self, key: str) -> None:
        self._held.pop(key).set()

    async def apply(self, key: str, caller: str = "") -> dict[str, Any]:
        self.calls.append((key, caller))
        gate = self._held.get(key)
        if gate is not None:
            await asyncio.shield(gate.wait())  # the request is out: cancelling us won't stop it
        self.effects.setdefault(key, self.clock.now() if self.clock else 0.0)
        return {"id": f"fx-{key}"}

    def find(self, key: str) -> dict[str, Any] | None:
        """What was done with ``key``, as a lookup that lags ``lag`` seconds sees it."""
        at = self.effects.get(key)
        if at is None or (self.clock is not None and self.clock.now() < at + self.lag):
            return None
        return {"id": f"fx-{key}"}

    def undo(self, key: str) -> str:
        if key in self.effects and key not in self.undone:
            self.undone.add(key)
            return f"undid {key}"
        return "nothing to undo"

    def in_place(self, key: str) -> bool:
        return key in self.effects and key not in self.undone


def plan(*names: str) -> Plan:
    return parse_plan(
        {
            "catalogue": "doubt",
            "steps": [{"name": n, "args": {"n": i}} for i, n in enumerate(names)],
        }
    )


def orch(store: Store, catalogue: Catalogue, clock: FakeClock, owner: str) -> Orchestrator:
    return Orchestrator(store, catalogue, clock=clock, rng=random.Random(0), owner=owner)


# -- a paused process --------------------------------------------------------------------


class PausingStore:
    """The ledger as process A sees it: right after A's intent for ``step`` is committed,
    A is paused (a GC or VM freeze); meanwhile ``meanwhile()`` runs (another process takes
    the saga over), then A resumes."""

    def __init__(self, store: Store, step: int, meanwhile: Any) -> None:
        self._store, self.step, self.meanwhile, self.paused = store, step, meanwhile, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def _after(self, events: Any) -> None:
        started = [e for e in events if e.type is EventType.STEP_STARTED and e.step == self.step]
        if started and not self.paused:
            self.paused = True
            await self.meanwhile()

    async def commit(self, before: Any, after: Any, events: Any, epoch: int | None) -> None:
        await self._store.commit(before, after, events, epoch)
        await self._after(events)

    async def create_leased(self, *args: Any) -> int | None:
        found: int | None = await self._store.create_leased(*args)  # type: ignore[attr-defined]
        await self._after(args[3])
        return found


async def test_a_paused_process_never_calls_after_another_took_its_saga(
    store: Store, clock: FakeClock
) -> None:
    provider = Provider(clock)
    catalogue = Catalogue("doubt")

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        return provider.undo(ctx.action_key)

    @catalogue.compensable(undo=refund, retry=ONCE)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        return await provider.apply(ctx.key, ctx.step)

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    other = orch(store, catalogue, clock, "process-b")

    async def takeover() -> None:
        clock.advance(other.lease_ttl + 1)  # A's lease runs out while it is paused
        assert (await Sweeper(other).sweep()).leases_recovered == ["s"]
        state = await other.run("s")  # B waits the charge's doubt out, settles, compensates
        assert state.status is SagaStatus.COMPENSATED, state

    a = orch(PausingStore(store, 0, takeover), catalogue, clock, "process-a")  # type: ignore[arg-type]
    with pytest.raises(LeaseLost):
        await a.execute(plan("charge", "refuse"), saga_id="s")

    # A's call never went out; B waited until it could no longer land and undid it by its
    # key (nothing to undo): nothing was called forward to be undone
    assert provider.calls == []
    assert not provider.in_place("s:0")
    events = await store.events("s")
    by = [e.data.get("by") for e in events if e.type is EventType.STEP_STARTED and e.step == 0]
    assert by == ["process-a"]
    state = (await other.get("s")).state
    assert state.status is SagaStatus.COMPENSATED
    assert await other.replayed("s") == state


# -- a call that outlives its timeout ----------------------------------------------------


async def test_a_call_that_lands_after_its_timeout_is_settled_then_undone(
    store: Store, clock: FakeClock
) -> None:
    """The engine's timeout abandons a call that keeps going (an SDK in a thread): the
    compensation waits until it can no longer land, repeats it with its key (so the late
    arrival is the same effect) and undoes that; nothing is left in place. The step opts
    in to that repeat (``repeat_before_undo``): its provider applies a key once."""
    provider = Provider(clock)
    catalogue = Catalogue("doubt", default_timeout=0.05, doubt_grace=10)

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        return provider.undo(ctx.action_key)

    @catalogue.compensable(undo=refund, retry=ONCE, repeat_before_undo=True)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        return await provider.apply(ctx.key)

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    provider.hold("s:0")  # the first call is slow: it is still out when its timeout fires
    o = orch(store, catalogue, clock, "p")
    state = await o.execute(plan("charge", "refuse"), saga_id="s")
    assert state.status is SagaStatus.COMPENSATED
    provider.release("s:0")  # ... and lands now, long after
    await asyncio.sleep(0)

    assert [k for k, _ in provider.calls] == ["s:0", "s:0"]  # the call, then its settlement
    assert not provider.in_place("s:0"), "the late charge was left in place"
    events = await store.events("s")
    started = [e for e in events if e.type is EventType.STEP_STARTED and e.step == 0]
    undo = next(e for e in events if e.type is EventType.UNDO_STARTED)
    assert started[1].at >= started[0].data["deadline"]  # repeated only once it could not land
    assert undo.at >= started[0].data["deadline"]


# -- a lookup that lags ------------------------------------------------------------------


async def test_a_lagging_lookup_s_not_found_is_asked_again_until_its_lag_has_passed(
    store: Store, clock: FakeClock
) -> None:
    provider = Provider(clock, lag=5.0)
    catalogue = Catalogue("doubt")

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        return provider.undo(ctx.action_key)

    async def find(args: Item, ctx: StepContext) -> dict[str, Any] | None:
        return provider.find(ctx.key)

    @catalogue.compensable(undo=refund, lookup=find, lookup_lag=5.0, retry=ONCE)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        await provider.apply(ctx.key)
        raise RuntimeError("the client crashed reading the reply")

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    state = await orch(store, catalogue, clock, "p").execute(plan("charge", "refuse"), saga_id="s")
    assert state.status is SagaStatus.COMPENSATED
    events = await store.events("s")
    [done] = [e for e in events if e.type is EventType.STEP_SUCCEEDED and e.step == 0]
    assert done.data["via"] == "lookup"  # found once the lookup caught up: not "no effect"
    assert [e for e in events if e.type is EventType.STEP_FAILED and e.step == 0] == []
    assert not provider.in_place("s:0")


# -- resuming a pivot in doubt -----------------------------------------------------------


def capture_catalogue(provider: Provider, state: dict[str, int], *, lookup: bool) -> Catalogue:
    """``state``: ``calls`` counts the captures; the lookup is down while ``down`` is set."""
    catalogue = Catalogue("doubt")

    async def find(args: Item, ctx: StepContext) -> dict[str, Any] | None:
        if state["down"]:
            raise ConnectionError("the lookup is down")
        return provider.find(ctx.key)

    async def release(args: Item, result: Any, ctx: StepContext) -> str:
        return provider.undo(ctx.action_key)

    @catalogue.compensable(undo=release, retry=ONCE)
    async def hold(args: Item, ctx: StepContext) -> dict[str, Any]:
        return await provider.apply(ctx.key)

    @catalogue.pivot(retry=ONCE, lookup=find if lookup else None)
    async def capture(args: Item, ctx: StepContext) -> dict[str, Any]:
        state["calls"] += 1
        if state["calls"] == 1:
            await provider.apply(ctx.key)
            raise RuntimeError("the reply was lost")
        if ctx.key in provider.effects:
            raise Permanent("already captured")
        return await provider.apply(ctx.key)

    return catalogue


@pytest.mark.parametrize("lookup", [True, False], ids=["with-lookup", "without-lookup"])
async def test_a_resumed_pivot_in_doubt_is_never_compensated_while_it_may_have_landed(
    store: Store, clock: FakeClock, lookup: bool
) -> None:
    provider = Provider(clock)
    calls = {"calls": 0, "down": 1}
    o = orch(store, capture_catalogue(provider, calls, lookup=lookup), clock, "p")
    parked = await o.execute(plan("hold", "capture"), saga_id="s")
    assert parked.status is SagaStatus.NEEDS_HUMAN
    assert parked.steps[1].status is StepStatus.UNKNOWN

    state = await o.resume("s", "ops", "the payment provider is back", run=True)

    assert state.status is SagaStatus.NEEDS_HUMAN  # never compensated
    assert provider.in_place("s:1")
    assert provider.in_place("s:0")
    if lookup:
        # its lookup is still down: the capture is not repeated (its key may be forgotten
        # by now), and the saga goes back to the person
        assert calls["calls"] == 1
        assert "lookup could not tell" in (state.reason or "")
        calls["down"] = 0
        state = await o.resume("s", "ops", "the lookup answers again", run=True)
        assert state.status is SagaStatus.COMPLETED  # asked first, it finds the capture
        assert calls["calls"] == 1
    else:
        # repeated with its key, refused ("already captured"): no proof of no effect
        assert calls["calls"] == 2


# -- a call that never returns -----------------------------------------------------------


def stuck_catalogue(forever: asyncio.Event, timeout: float) -> Catalogue:
    catalogue = Catalogue("doubt", default_timeout=timeout, doubt_grace=0.0)

    async def nothing(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=nothing, retry=ONCE)
    async def hang(args: Item, ctx: StepContext) -> None:
        await forever.wait()  # no timeout of its own

    return catalogue


async def test_a_call_that_never_returns_is_abandoned_at_the_default_timeout(
    store: Store, clock: FakeClock
) -> None:
    forever = asyncio.Event()
    state = await orch(store, stuck_catalogue(forever, 0.05), clock, "p").execute(
        plan("hang"), saga_id="s"
    )
    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].status is StepStatus.UNKNOWN
    assert "abandoned" in (state.steps[0].error or "")


async def test_stopping_a_worker_drains_within_its_bound(store: Store, clock: FakeClock) -> None:
    forever = asyncio.Event()
    o = orch(store, stuck_catalogue(forever, 3600), clock, "w")
    await o.submit(plan("hang"), saga_id="s")
    worker = Worker(o, WorkerConfig(poll_interval=0.01, drain_timeout=0.05, sweep_interval=3600))
    running = asyncio.create_task(worker.run())
    for _ in range(3000):  # until the call is in flight
        if (await o.get("s")).state.steps[0].status is StepStatus.STARTED:
            break
        await asyncio.sleep(0.01)
    worker.stop()
    stats = await asyncio.wait_for(running, 30)  # bounded: the call would never return
    assert stats.abandoned == 1
    # the attempt stays in doubt until its deadline: the next worker settles it
    step = (await o.get("s")).state.steps[0]
    assert step.status is StepStatus.STARTED
    assert step.doubt_until is not None
    assert step.doubt_until >= clock.now() + 3600


# -- a dead letter retried by a paused process --------------------------------------------


class PausingUndoStore(PausingStore):
    """As ``PausingStore``, after the undo intent of ``step`` is committed."""

    async def _after(self, events: Any) -> None:
        started = [e for e in events if e.type is EventType.UNDO_STARTED and e.step == self.step]
        if started and not self.paused:
            self.paused = True
            await self.meanwhile()


async def test_a_paused_process_never_retries_a_dead_letter_after_another_took_its_saga(
    store: Store, clock: FakeClock
) -> None:
    provider = Provider(clock)
    catalogue = Catalogue("doubt")
    refunds: list[str] = []
    failing = {"on": True}

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        refunds.append(ctx.key)
        if failing["on"]:
            raise Permanent("the refund service refused")
        return provider.undo(ctx.action_key)

    @catalogue.compensable(undo=refund, retry=ONCE, undo_retry=ONCE)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        return await provider.apply(ctx.key, ctx.step)

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    first = orch(store, catalogue, clock, "process-0")
    state = await first.execute(plan("charge", "refuse"), saga_id="s")
    assert state.status is SagaStatus.COMPENSATION_FAILED
    [letter] = await store.dead_letters()
    failing["on"] = False
    refunds.clear()
    other = orch(store, catalogue, clock, "process-b")

    async def takeover() -> None:
        # A's lease runs out while it is paused, and so does its undo attempt's deadline
        clock.advance(max(other.lease_ttl, 60 + 30) + 1)
        assert (await Sweeper(other).sweep()).leases_recovered == ["s"]
        assert await other.retry_dead_letter(letter.id)

    a = orch(PausingUndoStore(store, 0, takeover), catalogue, clock, "process-a")  # type: ignore[arg-type]
    with pytest.raises(LeaseLost):
        await a.retry_dead_letter(letter.id)

    assert refunds == ["s:0:undo"]  # B's call only: A never called after losing the saga
    assert not provider.in_place("s:0")
    assert (await other.get("s")).state.status is SagaStatus.COMPENSATED


async def test_a_quick_resume_of_a_pivot_in_doubt_calls_it_only_once_it_cannot_land(
    store: Store, clock: FakeClock
) -> None:
    """A person resumes a pivot whose call was cut off by its bound and may still be on its
    way, well inside its window: the capture is not called again before it cannot land.
    (One whose call raised may be called again at once with its key: that call ended.)"""
    called_at: list[float] = []
    hang = asyncio.Event()
    catalogue = Catalogue("doubt", default_timeout=0.05, doubt_grace=30)

    @catalogue.compensable(undo=lambda *_: _nothing(), retry=ONCE)
    async def hold(args: Item, ctx: StepContext) -> dict[str, Any]:
        return {"held": ctx.key}

    @catalogue.pivot(retry=ONCE)
    async def capture(args: Item, ctx: StepContext) -> dict[str, Any]:
        called_at.append(clock.now())
        if len(called_at) == 1:
            await hang.wait()  # cut off by its bound: it may still land
        return {"captured": ctx.key}

    o = orch(store, catalogue, clock, "p")
    parked = await o.execute(plan("hold", "capture"), saga_id="s")
    assert parked.status is SagaStatus.NEEDS_HUMAN
    events = await store.events("s")
    [first] = [e for e in events if e.type is EventType.STEP_STARTED and e.step == 1]

    state = await o.resume("s", "ops", "looked at the provider", run=True)

    assert state.status is SagaStatus.COMPLETED
    assert len(called_at) == 2
    assert called_at[1] >= first.data["deadline"]


async def _nothing() -> None:
    return None


def lagging_charge(provider: Provider, declared: float) -> Catalogue:
    """A charge whose client crashes reading the reply after the effect, with a lookup that
    declares ``declared`` seconds of lag; then a pivot that is declined."""
    catalogue = Catalogue("doubt")

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        return provider.undo(ctx.action_key)

    async def find(args: Item, ctx: StepContext) -> dict[str, Any] | None:
        return provider.find(ctx.key)

    @catalogue.compensable(
        undo=refund, lookup=find, retry=ONCE, repeatable=False, lookup_lag=declared
    )
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        await provider.apply(ctx.key)
        raise RuntimeError("the client crashed reading the reply")

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    return catalogue


async def test_a_lookup_that_declares_its_lag_is_waited_for_before_not_found_counts(
    store: Store, clock: FakeClock
) -> None:
    """The charge exists, but the lookup sees it only 1000 s later, as it declares: the
    engine asks it once nothing can land and that lag has passed, finds the charge and
    refunds it with its result."""
    provider = Provider(clock, lag=1000.0)
    catalogue = lagging_charge(provider, declared=1000.0)

    state = await orch(store, catalogue, clock, "p").execute(plan("charge", "refuse"), saga_id="s")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].status is StepStatus.SUCCEEDED  # found, with its result
    assert not provider.in_place("s:0"), "the charge was left in place"


async def test_a_lookup_lagging_past_what_it_declared_is_a_broken_promise(
    store: Store, clock: FakeClock
) -> None:
    """A lookup that declared no lag answers "not found" for a charge that exists. Once
    nothing can land and the declared lag has passed, not found is no effect (the
    documents' rule: never undo a step that never ran): the step is recorded failed and
    nothing is refunded. Such a provider breaks its promise; ``check-provider``'s lag row
    measures it, and the drift warning says so at every start."""
    provider = Provider(clock, lag=1000.0)  # far past the call's window
    catalogue = lagging_charge(provider, declared=0.0)

    state = await orch(store, catalogue, clock, "p").execute(plan("charge", "refuse"), saga_id="s")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].status is StepStatus.FAILED
    assert "found no effect" in (state.steps[0].error or "")
    assert provider.in_place("s:0")  # what the broken promise costs


async def test_an_undo_waits_for_a_settling_repeat_that_was_itself_cut_off(
    store: Store, clock: FakeClock
) -> None:
    """A step that opts in to a settling repeat before its undo: when that repeat is cut off
    by its bound too, the undo waits until the repeat cannot land. Before, the undo was
    called at once, answered "nothing to undo", and the repeat landed after it."""
    provider = Provider(clock)
    catalogue = Catalogue("doubt", default_timeout=0.05, doubt_grace=10)
    undo_at: list[float] = []

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        undo_at.append(clock.now())
        return provider.undo(ctx.action_key)

    @catalogue.compensable(undo=refund, retry=ONCE, repeat_before_undo=True)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        return await provider.apply(ctx.key)

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    provider.hold("s:0")  # the call, and its settling repeat, hang past their bounds
    state = await orch(store, catalogue, clock, "p").execute(plan("charge", "refuse"), saga_id="s")

    events = await store.events("s")
    started = [e for e in events if e.type is EventType.STEP_STARTED and e.step == 0]
    assert len(started) == 2  # the call and its settling repeat
    assert undo_at, "the undo was never called"
    assert undo_at[0] >= started[1].data["deadline"]  # not while the repeat could land
    provider.release("s:0")
    await asyncio.sleep(0)
    assert state.status is SagaStatus.COMPENSATED


@pytest.mark.parametrize("lag", [0.0, 3.0], ids=["no-lag", "lag-past-a-pass"])
async def test_a_step_not_repeatable_is_called_again_once_its_lookup_proved_nothing(
    store: Store, clock: FakeClock, lag: float
) -> None:
    """A step that is not repeatable fails transiently; once nothing can land and its
    lookup's lag has passed, the lookup finds nothing, and it is called again. Before (the
    simulation found both): the window was kept after that proof, so the pass settled it
    again and again for ever; and a lag longer than a worker's pass waits inline (2 s) was
    counted from each pass's start, so every pass found it ahead and the saga never went
    on."""
    provider = Provider(clock)
    catalogue = Catalogue("doubt", default_timeout=5, doubt_grace=1)
    calls: list[str] = []

    async def find(args: Item, ctx: StepContext) -> dict[str, Any] | None:
        return provider.find(ctx.key)

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        return provider.undo(ctx.action_key)

    @catalogue.compensable(undo=refund, lookup=find, lookup_lag=lag, repeatable=False, retry=QUICK)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        calls.append(ctx.key)
        if len(calls) == 1:
            raise Transient("gateway busy")
        return await provider.apply(ctx.key)

    o = orch(store, catalogue, clock, "w")
    await o.submit(plan("charge"), saga_id="s")
    passes = 0
    while True:
        state = await o.run("s", options=RunOptions(owner="w", max_inline_wait=2.0))
        passes += 1
        if state.status.terminal or passes > 10:
            break
        assert state.wake_at is not None
        clock.advance(state.wake_at - clock.now())

    assert state.status is SagaStatus.COMPLETED
    assert passes <= 3
    assert calls == ["s:0", "s:0"]


async def test_a_compensating_saga_wakes_when_its_next_undo_may_begin(
    store: Store, clock: FakeClock
) -> None:
    """Aborted while its step waits for a retry (its first attempt may still land): the
    compensation waits for that attempt's window before it looks the step up, and the saga
    wakes then. Before, it woke at the forward retry's time, which compensation never
    keeps, and a worker claimed it, found nothing to do yet, and claimed it again at once,
    for as long as the window lasted (the simulation found it)."""
    provider = Provider(clock)
    catalogue = Catalogue("doubt", default_timeout=10, doubt_grace=5)

    async def find(args: Item, ctx: StepContext) -> dict[str, Any] | None:
        return provider.find(ctx.key)

    async def release(args: Item, result: Any, ctx: StepContext) -> str:
        return provider.undo(ctx.action_key)

    @catalogue.compensable(
        undo=release, lookup=find, retry=RetryPolicy(max_attempts=3, base_delay=3, jitter=False)
    )
    async def hold(args: Item, ctx: StepContext) -> dict[str, Any]:
        raise Transient("busy")

    o = orch(store, catalogue, clock, "w")
    await o.submit(plan("hold"), saga_id="s")
    worker = RunOptions(owner="w", max_inline_wait=2.0)
    state = await o.run("s", options=worker)
    assert state.steps[0].status is StepStatus.RETRY_WAIT
    await o.abort("s", "olga", "the order was cancelled")
    passes = 0
    while not state.status.terminal and passes <= 10:
        state = await o.run("s", options=worker)
        passes += 1
        if state.wake_at is not None:
            assert state.wake_at > clock.now(), "it would be claimed again at once"
            clock.advance(state.wake_at - clock.now())

    assert state.status is SagaStatus.COMPENSATED
    assert passes <= 3
