"""Fail-safe by construction: an unexpected exception is never "no effect", user code cannot
break a pass, a lease really excludes, a failed write leaves no gap, nothing settles in doubt."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    EventType,
    FakeClock,
    LeaseLost,
    Orchestrator,
    RetryPolicy,
    SagaStatus,
    StepContext,
    StepStatus,
    StoreError,
    UndoStatus,
    parse_plan,
    validate,
)
from pivotal.declarations.plan import Plan
from pivotal.declarations.policy import ApprovalRequirement
from pivotal.errors import Permanent, VersionConflict
from pivotal.hooks import Point
from pivotal.operations.worker import Sweeper, Worker, WorkerConfig
from pivotal.sagas.state import SagaState
from pivotal.store import Store
from pivotal.testing import CrashAt, CrashSite, SimulatedCrash

QUICK = RetryPolicy(max_attempts=3, base_delay=0.01)


class Item(BaseModel):
    n: int


class Provider:
    """A provider that honours idempotency keys and counts calls, effects and undos."""

    def __init__(self) -> None:
        self.effects: dict[str, int] = {}
        self.calls: list[str] = []
        self.undone: list[str] = []
        self.in_flight: set[str] = set()
        self.overlaps: list[str] = []
        self.entered: asyncio.Queue[str] = asyncio.Queue()  # the pivot's key, at each call

    def apply(self, key: str) -> dict[str, Any]:
        self.calls.append(key)
        self.effects.setdefault(key, 0)
        self.effects[key] = 1  # idempotent: a repeated key changes nothing
        return {"id": f"fx-{key}"}

    def in_place(self, key: str) -> bool:
        return bool(self.effects.get(key)) and key not in self.undone

    def undo(self, action_key: str) -> None:
        if self.effects.get(action_key) and action_key not in self.undone:
            self.undone.append(action_key)


def catalogue_with(
    provider: Provider,
    *,
    raise_after: Callable[[int], BaseException | None] = lambda n: None,
    lookup: bool = False,
    precondition: Callable[[Item], str | None] | None = None,
    policy: Any = None,
    pivot_gate: asyncio.Event | None = None,
) -> Catalogue:
    """``take`` (compensable), ``settle`` (pivot), ``tell`` (retriable). ``take`` applies its
    effect, then raises ``raise_after(n)`` if that is not None."""
    catalogue = Catalogue("safe", approval=policy)

    async def give_back(args: Item, result: Any, ctx: StepContext) -> str:
        provider.undo(ctx.action_key)
        return f"gave back {ctx.action_key}"

    async def find(args: Item, ctx: StepContext) -> dict[str, Any] | None:
        return {"id": f"fx-{ctx.key}"} if provider.effects.get(ctx.key) else None

    @catalogue.compensable(
        undo=give_back,
        retry=QUICK,
        lookup=find if lookup else None,
        precondition=precondition,
    )
    async def take(args: Item, ctx: StepContext) -> dict[str, Any]:
        result = provider.apply(ctx.key)
        error = raise_after(args.n)
        if error is not None:
            raise error
        return result

    @catalogue.pivot(retry=QUICK)
    async def settle(args: Item, ctx: StepContext) -> dict[str, Any]:
        if ctx.key in provider.in_flight:
            provider.overlaps.append(ctx.key)
        provider.in_flight.add(ctx.key)
        provider.entered.put_nowait(ctx.key)
        try:
            if pivot_gate is not None:
                await pivot_gate.wait()
            return provider.apply(ctx.key)
        finally:
            provider.in_flight.discard(ctx.key)

    @catalogue.retriable(retry=QUICK)
    async def tell(args: Item, ctx: StepContext) -> dict[str, Any]:
        return provider.apply(ctx.key)

    return catalogue


def plan(*names: str) -> Plan:
    return parse_plan(
        {"catalogue": "safe", "steps": [{"name": n, "args": {"n": i}} for i, n in enumerate(names)]}
    )


def orchestrator_for(
    store: Store, catalogue: Catalogue, clock: FakeClock, **kw: Any
) -> Orchestrator:
    return Orchestrator(store, catalogue, clock=clock, rng=random.Random(0), **kw)


async def assert_consistent(orch: Orchestrator, saga_id: str) -> SagaState:
    events = await orch.store.events(saga_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "a gap in the event log"
    state = (await orch.get(saga_id)).state
    assert await orch.replayed(saga_id) == state
    return state


# -- hole 1: an unexpected exception is an unknown outcome ------------------------------


@pytest.mark.parametrize(
    "error",
    [KeyError("charge_id"), ValueError("reply did not parse")],
    ids=["KeyError", "ValueError"],
)
async def test_an_effect_whose_reply_failed_to_parse_is_undone(
    store: Store, clock: FakeClock, error: BaseException
) -> None:
    provider = Provider()
    catalogue = catalogue_with(provider, raise_after=lambda n: error if n == 1 else None)
    orch = orchestrator_for(store, catalogue, clock)

    state = await orch.execute(plan("take", "take", "settle"), saga_id="s")

    assert state.status is SagaStatus.COMPENSATED
    # never retried forward, never repeated just to be undone: undone by its key
    assert state.steps[1].status is StepStatus.UNKNOWN
    assert provider.calls == ["s:0", "s:1"]
    assert provider.effects["s:1"] == 1
    assert not provider.in_place("s:1"), "the applied effect was left in place"
    assert not provider.in_place("s:0")
    await assert_consistent(orch, "s")


async def test_an_unexpected_exception_is_settled_by_lookup(store: Store, clock: FakeClock) -> None:
    provider = Provider()
    catalogue = catalogue_with(
        provider, raise_after=lambda n: KeyError("id") if n == 0 else None, lookup=True
    )
    orch = orchestrator_for(store, catalogue, clock)

    state = await orch.execute(plan("take", "settle"), saga_id="s")

    assert state.status is SagaStatus.COMPLETED
    events = await store.events("s")
    done = [e for e in events if e.type is EventType.STEP_SUCCEEDED and e.step == 0]
    assert done[0].data["via"] == "lookup"


@pytest.mark.parametrize(
    "error",
    [httpx.ReadTimeout("no reply"), ConnectionResetError("reset by peer")],
    ids=["httpx.ReadTimeout", "ConnectionResetError"],
)
async def test_transport_errors_are_retried_with_the_same_key(
    store: Store, clock: FakeClock, error: BaseException
) -> None:
    provider = Provider()
    failures = iter([error])
    catalogue = catalogue_with(provider, raise_after=lambda n: next(failures, None))
    orch = orchestrator_for(store, catalogue, clock)

    state = await orch.execute(plan("take", "settle"), saga_id="s")

    assert state.status is SagaStatus.COMPLETED
    assert provider.calls == ["s:0", "s:0", "s:1"]
    assert provider.effects == {"s:0": 1, "s:1": 1}


async def test_a_declared_no_effect_exception_fails_the_step_without_an_undo(
    store: Store, clock: FakeClock
) -> None:
    class Declined(Exception):
        pass

    catalogue = Catalogue("declared")
    undos: list[str] = []

    async def undo(args: Item, result: Any, ctx: StepContext) -> None:
        undos.append(ctx.key)

    @catalogue.compensable(undo=undo, no_effect_on=(Declined,))
    async def charge(args: Item, ctx: StepContext) -> None:
        raise Declined("card declined")

    orch = orchestrator_for(store, catalogue, clock)
    state = await orch.execute(
        parse_plan({"catalogue": "declared", "steps": [{"name": "charge", "args": {"n": 1}}]}),
        saga_id="s",
    )
    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].status is StepStatus.FAILED
    assert undos == []


# -- hole 2: user code that raises is contained; poison sagas are parked ----------------


async def test_a_raising_precondition_fails_the_step_and_keeps_the_earlier_outcome(
    store: Store, clock: FakeClock
) -> None:
    provider = Provider()
    checks = {"n": 0}

    def flaky_check(args: Item) -> str | None:
        checks["n"] += 1
        if args.n == 1 and checks["n"] > 2:  # holds when validated, raises when run
            raise RuntimeError("inventory service down")
        return None

    catalogue = catalogue_with(provider, precondition=flaky_check)
    orch = orchestrator_for(store, catalogue, clock)

    state = await orch.execute(plan("take", "take", "settle"), saga_id="s")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].status is StepStatus.SUCCEEDED  # its held-back outcome was kept
    assert state.steps[0].undo_status is UndoStatus.DONE
    assert "RuntimeError: inventory service down" in (state.steps[1].error or "")
    assert provider.calls == ["s:0"]
    await assert_consistent(orch, "s")


async def test_validate_reports_a_raising_precondition_with_its_own_code() -> None:
    def broken(args: Item) -> str | None:
        raise RuntimeError("boom")

    catalogue = catalogue_with(Provider(), precondition=broken)
    errors = validate(plan("take", "settle"), catalogue)
    assert [(e.code.value, e.index) for e in errors] == [("precondition_error", 0)]
    assert "RuntimeError: boom" in errors[0].message


async def test_a_raising_approval_policy_sends_the_pivot_to_a_person(
    store: Store, clock: FakeClock
) -> None:
    def policy(step: str, args: BaseModel, plan: Plan) -> None:
        raise ZeroDivisionError("division by zero")

    provider = Provider()
    orch = orchestrator_for(store, catalogue_with(provider, policy=policy), clock)

    state = await orch.execute(plan("take", "settle"), saga_id="s")

    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert "approval policy failed" in state.approval.reason
    assert "ZeroDivisionError" in state.approval.reason
    assert provider.calls == ["s:0"]


async def test_a_saga_whose_passes_keep_failing_is_parked_as_poison(
    store: Store, clock: FakeClock
) -> None:
    def broken_hook(point: Point, index: int) -> None:
        if point is Point.BEFORE_INTENT:
            raise RuntimeError("engine bug")

    provider = Provider()
    orch = orchestrator_for(store, catalogue_with(provider), clock, hook=broken_hook)
    await orch.submit(plan("take", "settle"), saga_id="s")

    passes = 0
    while True:
        passes += 1
        try:
            state = await orch.run("s")
        except RuntimeError:
            assert passes <= orch.poison_after
            continue
        break

    assert passes == orch.poison_after + 1
    assert state.status is SagaStatus.NEEDS_HUMAN
    assert state.reason is not None
    assert "poison" in state.reason
    assert "RuntimeError: engine bug" in state.reason
    assert provider.calls == []
    await assert_consistent(orch, "s")


async def test_a_process_that_dies_in_the_same_step_again_and_again_is_bounded(
    store: Store, clock: FakeClock
) -> None:
    provider = Provider()
    catalogue = catalogue_with(provider)
    orch = orchestrator_for(store, catalogue, clock, lease_ttl=30)
    await orch.submit(plan("take", "settle"), saga_id="s")

    for generation in range(10):  # each process dies right after the call's intent
        dying = orchestrator_for(
            store,
            catalogue,
            clock,
            lease_ttl=30,
            owner=f"p{generation}",
            hook=CrashAt(CrashSite(Point.AFTER_INTENT, 0)),
        )
        try:
            state = await dying.run("s")
            break
        except SimulatedCrash:
            clock.advance(31)
            await Sweeper(dying).sweep()

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].status is StepStatus.UNKNOWN
    # in-doubt attempts counted, then the undo by the key (no settling repeat)
    assert state.steps[0].attempts == QUICK.max_attempts
    assert state.steps[0].settle_attempt is None
    await assert_consistent(orch, "s")


# -- holes 3 and 4: a lease is exclusive and renewed -----------------------------------


async def test_a_lease_is_not_reentrant_by_owner_name(store: Store, clock: FakeClock) -> None:
    gate, provider = asyncio.Event(), Provider()
    catalogue = catalogue_with(provider, pivot_gate=gate)
    first = orchestrator_for(store, catalogue, clock, owner="same-name")
    second = orchestrator_for(store, catalogue, clock, owner="same-name")
    await first.submit(plan("take", "settle"), saga_id="s")

    running = asyncio.create_task(first.run("s"))
    assert await asyncio.wait_for(provider.entered.get(), 30) == "s:1"
    with pytest.raises(LeaseLost):
        await second.run("s")
    with pytest.raises(LeaseLost):  # the same process's sweeper path, too
        await first.run("s")
    gate.set()
    assert (await running).status is SagaStatus.COMPLETED
    assert provider.overlaps == []


async def test_run_renews_its_lease_and_stops_when_it_is_taken_over(
    store: Store, clock: FakeClock
) -> None:
    gate, provider = asyncio.Event(), Provider()
    catalogue = catalogue_with(provider, pivot_gate=gate)
    slow = orchestrator_for(store, catalogue, clock, lease_ttl=30, owner="slow")
    other = orchestrator_for(store, catalogue, clock, lease_ttl=30, owner="other")
    await slow.submit(plan("take", "settle"), saga_id="s")

    running = asyncio.create_task(slow.run("s"))
    assert await asyncio.wait_for(provider.entered.get(), 30) == "s:1"
    for _ in range(3):  # a pivot slower than the lease: its heartbeat keeps it
        clock.advance(20)
        await slow.leases.beat()
        assert await other.leases.acquire("s", 30) is None
    clock.advance(31)  # the process was paused past its lease: another takes over
    assert await other.store.expire_leases(clock.now()) == ["s"]
    taken = await other.leases.acquire("s", 30)
    assert taken is not None
    await slow.leases.beat()  # the heartbeat finds out and cancels the call in flight
    with pytest.raises(LeaseLost):
        await running
    assert "s:1" not in provider.in_flight
    await other.leases.release(taken)
    gate.set()
    assert (await other.run("s")).status is SagaStatus.COMPLETED
    assert provider.overlaps == []
    await assert_consistent(other, "s")


async def test_a_lease_adopted_again_cancels_the_older_pass_of_the_same_process(
    store: Store, clock: FakeClock
) -> None:
    """A worker too slow to renew claims its own saga again: the older pass stops first."""
    gate, provider = asyncio.Event(), Provider()
    orch = orchestrator_for(store, catalogue_with(provider, pivot_gate=gate), clock, lease_ttl=30)
    await orch.submit(plan("take", "settle"), saga_id="s")
    config = WorkerConfig(lease_ttl=30, poll_interval=0.01, sweep_interval=3600)
    worker = Worker(orch, config)
    running = asyncio.create_task(worker.run(until_idle=True))
    assert await asyncio.wait_for(provider.entered.get(), 30) == "s:1"

    clock.advance(31)  # the heartbeat never ran in time: the worker claims "s" again
    # the new pass finds the pivot's attempt in doubt: abandoned, it may still land until
    # its deadline (its start, plus the default timeout, plus the grace); nothing calls the
    # step again before then
    step = await wait_for_state(orch, "s", lambda s: s.steps[1].status is StepStatus.RETRY_WAIT)
    assert provider.entered.empty()
    assert step.steps[1].next_attempt_at == step.steps[1].doubt_until
    clock.advance(step.steps[1].next_attempt_at - clock.now())
    assert await asyncio.wait_for(provider.entered.get(), 30) == "s:1"
    assert provider.overlaps == []  # the older call was cancelled before the new one
    gate.set()
    await asyncio.wait_for(running, 30)  # the worker stops once the saga has ended
    assert (await orch.get("s")).state.status is SagaStatus.COMPLETED
    assert worker.stats.leases_lost == 1
    await assert_consistent(orch, "s")


async def wait_for_state(
    orch: Orchestrator, saga_id: str, condition: Callable[[SagaState], bool]
) -> SagaState:
    """The saga's state once ``condition`` holds (the timeout only turns a hang into a
    failure)."""
    for _ in range(3000):
        state = (await orch.get(saga_id)).state
        if condition(state):
            return state
        await asyncio.sleep(0.01)
    raise AssertionError(f"saga {saga_id} never reached the state waited for")


# -- hole 5: a failed commit in a parallel group leaves no gap --------------------------


class FailingStore:
    """Delegates to a store; the ``fail_at``-th commit raises a StoreError, before or after
    the write landed (a lost reply)."""

    def __init__(self, store: Store, fail_at: int, *, landed: bool) -> None:
        self._store, self.fail_at, self.landed, self.commits = store, fail_at, landed, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def commit(self, before: Any, after: Any, events: Any, epoch: int | None) -> None:
        self.commits += 1
        if self.commits == self.fail_at:
            if self.landed:
                await self._store.commit(before, after, events, epoch)
            raise StoreError("disk I/O error")
        await self._store.commit(before, after, events, epoch)


@pytest.mark.parametrize("landed", [False, True], ids=["refused", "reply-lost"])
@pytest.mark.parametrize("fail_at", [2, 3, 4, 5])
async def test_a_failed_commit_in_a_parallel_group_leaves_no_gap(
    store: Store, clock: FakeClock, fail_at: int, landed: bool
) -> None:
    provider = Provider()
    catalogue = catalogue_with(provider)
    group = parse_plan(
        {
            "catalogue": "safe",
            "steps": [
                {"parallel": [{"name": "take", "args": {"n": 5}} for _ in range(3)]},
                {"name": "settle", "args": {"n": 0}},
            ],
        }
    )
    flaky = FailingStore(store, fail_at, landed=landed)
    orch = orchestrator_for(flaky, catalogue, clock)  # type: ignore[arg-type]
    await orch.submit(group, saga_id="s")
    with pytest.raises(StoreError):
        await orch.run("s")
    await assert_consistent(orch, "s")

    state = await orchestrator_for(store, catalogue, clock).run("s")
    assert state.status is SagaStatus.COMPLETED
    assert provider.effects == {f"s:{i}": 1 for i in range(4)}
    await assert_consistent(orch, "s")


# -- hole 7: nothing settles while an undo is in doubt ----------------------------------


async def test_a_saga_is_not_compensated_while_an_undo_is_in_doubt(
    store: Store, clock: FakeClock
) -> None:
    refusing = {"on": True}
    catalogue = Catalogue("doubt")

    async def undo(args: Item, result: Any, ctx: StepContext) -> None:
        if refusing["on"]:
            raise Permanent("the provider refuses for now")

    @catalogue.compensable(undo=undo)
    async def take(args: Item, ctx: StepContext) -> None:
        if args.n == 2:
            raise Permanent("no")

    orch = orchestrator_for(store, catalogue, clock)
    three = parse_plan(
        {"catalogue": "doubt", "steps": [{"name": "take", "args": {"n": n}} for n in range(3)]}
    )
    state = await orch.execute(three, saga_id="s")
    assert state.status is SagaStatus.COMPENSATION_FAILED
    first, second = sorted(await store.dead_letters(), key=lambda d: d.step)

    refusing["on"] = False
    dying = orchestrator_for(store, catalogue, clock, owner="dying")
    dying.hook = CrashAt(CrashSite(Point.AFTER_UNDO_INTENT, first.step))
    with pytest.raises(SimulatedCrash):
        await dying.retry_dead_letter(first.id)
    clock.advance(61)
    await store.expire_leases(clock.now())
    # the interrupted undo may still run until its deadline (its start, plus the default
    # timeout of 60 s, plus the grace of 30 s): not retried before then
    assert not await orch.retry_dead_letter(first.id)
    clock.advance(30)

    await orch.resolve_dead_letter(second.id, "ops", "refunded by hand")
    state = (await orch.get("s")).state
    assert state.steps[first.step].undo_status is UndoStatus.STARTED
    assert state.status is SagaStatus.COMPENSATION_FAILED  # not settled: one undo in doubt

    assert await orch.retry_dead_letter(first.id)
    assert (await orch.get("s")).state.status is SagaStatus.COMPENSATED
    await assert_consistent(orch, "s")


# -- hole 8: a version conflict is not a lost lease; sweeps survive anything ------------


class ConflictOnce:
    """Delegates to a store; one commit is refused as a version conflict first."""

    def __init__(self, store: Store, at: int) -> None:
        self._store, self.at, self.commits = store, at, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def commit(self, before: Any, after: Any, events: Any, epoch: int | None) -> None:
        self.commits += 1
        if self.commits == self.at:
            raise VersionConflict("changed meanwhile")
        await self._store.commit(before, after, events, epoch)


async def test_a_version_conflict_reloads_and_goes_on(store: Store, clock: FakeClock) -> None:
    provider = Provider()
    orch = orchestrator_for(ConflictOnce(store, 3), catalogue_with(provider), clock)  # type: ignore[arg-type]
    state = await orch.execute(plan("take", "take", "settle", "tell"), saga_id="s")
    assert state.status is SagaStatus.COMPLETED
    assert provider.effects == {f"s:{i}": 1 for i in range(4)}
    await assert_consistent(orch, "s")


class DecisionFirst:
    """Delegates to a store; just before the first leased commit, a person's decision lands."""

    def __init__(self, store: Store, decide: Callable[[], Any]) -> None:
        self._store, self.decide, self.decided = store, decide, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def commit(self, before: Any, after: Any, events: Any, epoch: int | None) -> None:
        if epoch is not None and not self.decided:
            self.decided = True
            await self.decide()
        await self._store.commit(before, after, events, epoch)


async def test_an_approval_racing_a_pass_is_absorbed_by_a_reload(
    store: Store, clock: FakeClock
) -> None:
    def always(step: str, args: BaseModel, plan: Plan) -> ApprovalRequirement:
        return ApprovalRequirement("a person looks at every pivot", expires_in=10)

    provider = Provider()
    catalogue = catalogue_with(provider, policy=always)
    cli = orchestrator_for(store, catalogue, clock, owner="cli")
    state = await cli.execute(plan("take", "settle"), saga_id="s")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    clock.advance(11)  # the sweeper expires it while a person approves, too late

    racing = DecisionFirst(store, lambda: cli.approve("s", "ana", run=False))
    sweeper = orchestrator_for(racing, catalogue, clock, owner="sweeper")  # type: ignore[arg-type]
    state = await sweeper.run("s")

    assert racing.decided
    assert state.status is SagaStatus.COMPENSATED
    events = await store.events("s")
    assert [e.type for e in events].count(EventType.APPROVAL_EXPIRED) == 1
    assert not provider.in_place("s:0")
    await assert_consistent(cli, "s")


async def test_one_failing_dead_letter_does_not_stop_the_sweep(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalogue = Catalogue("sweep")
    refusing = {"on": True}

    async def undo(args: Item, result: Any, ctx: StepContext) -> None:
        if refusing["on"]:
            raise Permanent("later")

    @catalogue.compensable(
        undo=undo, dead_letter_retry=RetryPolicy(max_attempts=5, base_delay=0, jitter=False)
    )
    async def take(args: Item, ctx: StepContext) -> None:
        if args.n == 1:
            raise Permanent("no")

    orch = orchestrator_for(store, catalogue, clock)
    two = parse_plan(
        {"catalogue": "sweep", "steps": [{"name": "take", "args": {"n": n}} for n in range(2)]}
    )
    await orch.execute(two, saga_id="a")
    await orch.execute(two, saga_id="b")
    letters = await store.dead_letters()
    assert len(letters) == 2
    refusing["on"] = False
    original = orch.retry_dead_letter

    async def broken_for_a(letter_id: int) -> bool:
        if letter_id == letters[0].id:
            raise RuntimeError("unexpected")
        return await original(letter_id)

    monkeypatch.setattr(orch, "retry_dead_letter", broken_for_a)
    report = await Sweeper(orch).sweep()
    assert report.dead_letters_retried == 2
    assert report.dead_letters_settled == 1
    assert (await orch.get(letters[1].saga_id)).state.status is SagaStatus.COMPENSATED


async def test_a_claim_retried_after_its_reply_was_lost_gets_its_sagas_back(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    orch = orchestrator_for(store, catalogue_with(Provider()), clock)
    for saga_id in ("a", "b"):
        await orch.submit(plan("take", "settle"), saga_id=saga_id)

    class Fixed:
        hex = "same-token"

    import pivotal.store.sql as sql

    monkeypatch.setattr(sql.uuid, "uuid4", lambda: Fixed())
    first = await store.claim_next("w", 30, clock.now(), 10)
    again = await store.claim_next("w", 30, clock.now(), 10)  # the same call, retried
    assert sorted(first) == sorted(again) == [("a", 1), ("b", 1)]
