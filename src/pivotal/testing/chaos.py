"""Run a catalogue through crashes at every protocol point and check the invariants."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, runtime_checkable

from pivotal.clock import Clock, FakeClock
from pivotal.declarations.app import App
from pivotal.declarations.plan import Plan
from pivotal.errors import ApprovalError, LeaseLost, SagaUnserved, StoreError
from pivotal.hooks import Hook, Point
from pivotal.operations.worker import Sweeper
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.sagas.state import ApprovalStatus, SagaState, SagaStatus, UndoStatus
from pivotal.store.base import Store
from pivotal.store.sqlite import SQLiteStore
from pivotal.testing.crash import CrashAt, CrashSite, SimulatedCrash, Trace
from pivotal.testing.inflight import (
    CallLog,
    Interlude,
    Lag,
    Process,
    Stall,
    instrument,
    landed,
    running_as,
)
from pivotal.testing.invariants import Violation, check_invariants
from pivotal.testing.probe import EffectProbe
from pivotal.testing.skew import skewed

SAGA_ID = "chaos-saga"
LEASE_TTL = 30.0

LedgerFactory = Callable[[], AbstractAsyncContextManager[Store]]
"""Opens an empty ledger for one run."""


@asynccontextmanager
async def memory_ledger() -> AsyncIterator[Store]:
    """The default ledger for in-process runs: SQLite in memory."""
    async with SQLiteStore(":memory:") as store:
        yield store


class World(Protocol):
    """Your providers for one run: the app bound to them and a probe of their state."""

    @property
    def app(self) -> App: ...

    @property
    def probe(self) -> EffectProbe: ...

    def close(self) -> None: ...


@runtime_checkable
class ForgetsKeys(Protocol):
    """A world whose providers can forget their idempotency records (``expire_keys``)."""

    def expire_keys(self) -> None:
        """Forget every idempotency record made so far; lookups still find the effects."""


W = TypeVar("W", bound=World)
KEY_RETENTION = 24 * 3600.0  # how long the providers of a run with ``expire`` keep keys


@dataclass(frozen=True)
class ChaosScenario(Generic[W]):
    """A plan, the provider faults it meets, and whether a person approves its pivot.

    ``prepare`` runs before the plan is submitted, ``arm`` after it (for faults that must
    meet the run, not the submission's validation, such as a failing precondition).
    """

    name: str
    plan: Plan
    prepare: Callable[[W], object] = lambda world: None
    approve: bool = True
    arm: Callable[[W], object] = lambda world: None


@dataclass
class RunResult:
    scenario: str
    crashes: tuple[CrashSite, ...]
    fired: int  # how many of the crashes were reached
    status: SagaStatus
    violations: list[Violation] = field(default_factory=list)
    store_errors: int = 0  # passes a failed ledger write ended (each recovered as a crash)
    kinds: tuple[str, ...] = ()  # the fault kinds besides crashes that the run met


async def until_quiet(
    orchestrator: Orchestrator, clock: FakeClock, saga_id: str, *, approve: bool
) -> SagaState:
    """Run the saga until it rests; approve its pivot when asked; wait out due retries."""
    while True:
        state = await orchestrator.run(saga_id)
        a = state.approval
        if (
            state.status is SagaStatus.AWAITING_APPROVAL
            and approve
            and a is not None
            and a.status is ApprovalStatus.PENDING
        ):
            with contextlib.suppress(ApprovalError):  # decided meanwhile: run it again
                await orchestrator.approve(saga_id, "chaos-approver", run=False)
            continue
        if state.status.terminal or state.status is SagaStatus.AWAITING_APPROVAL:
            return state
        if state.wake_at is not None:
            clock.advance(state.wake_at - clock.now())


@dataclass
class Recovery:
    """How a run came to rest: its final state and what interrupted it on the way."""

    state: SagaState
    fired: int = 0  # crash hooks that fired
    store_errors: int = 0  # passes ended by a failed ledger write


async def recover(
    store: Store,
    app: App,
    clock: FakeClock,
    saga_id: str,
    *,
    approve: bool,
    hooks: Sequence[Hook | None] = (),
    seed: int = 0,
    log: CallLog | None = None,
    restarts: int = 12,
) -> tuple[SagaState, int]:
    """Run the saga with one fresh 'process' per hook; a crash ends that process.

    After each crash the dead process's lease runs out and the sweeper frees it, as it would
    in production. A ``StoreError`` (a failed ledger write) ends its process the same way;
    up to ``restarts`` further processes without a hook follow. Returns the final state
    and how many crashes fired (``recover_counting`` also counts the store errors).
    """
    done = await recover_counting(
        store,
        app,
        clock,
        saga_id,
        approve=approve,
        hooks=hooks,
        seed=seed,
        log=log,
        restarts=restarts,
    )
    return done.state, done.fired


async def recover_counting(
    store: Store,
    app: App,
    clock: FakeClock,
    saga_id: str,
    *,
    approve: bool,
    hooks: Sequence[Hook | None] = (),
    seed: int = 0,
    log: CallLog | None = None,
    restarts: int = 12,
    offsets: Sequence[float] = (),
    stale: Sequence[App | None] = (),
) -> Recovery:
    """``recover``, telling crashes from failed ledger writes. ``offsets``: how far each
    process's own clock is off, in turn (see ``pivotal.testing.skew``); ``stale``: the app
    of an older build that some processes (by generation) run instead of ``app``."""
    fired = store_errors = 0

    def clock_of(generation: int) -> Clock:
        if not offsets:
            return clock
        return skewed(clock, offsets[generation % len(offsets)])

    for generation, hook in enumerate([*hooks, *[None] * (restarts + 1)]):
        older = stale[generation] if generation < len(stale) else None
        if older is not None:  # an older build: it claims, refuses, and leaves the saga be
            with contextlib.suppress(SagaUnserved, LeaseLost):
                await Orchestrator(store, older, clock=clock_of(generation)).run(saga_id)
        orch = Orchestrator(
            store,
            app,
            clock=clock_of(generation),
            rng=random.Random(seed + generation),
            owner=f"process-{generation}",
            lease_ttl=LEASE_TTL,
            hook=hook,
        )
        try:
            with running_as(Process(orch.owner, orch, approve, log)):
                state = await until_quiet(orch, clock, saga_id, approve=approve)
            if not _undo_in_flight(state):
                return Recovery(state, fired, store_errors)
            # a dead letter's retry lost its lease during its undo: the saga rests, the undo
            # does not; the dead letter is still open, and the next sweep retries it
        except SimulatedCrash:
            fired += 1
        except LeaseLost:
            clock.advance(LEASE_TTL + 1)
            continue
        except StoreError:  # the pass ended on a failed write: recover as from a crash
            store_errors += 1
        clock.advance(LEASE_TTL + 1)
        sweeper = Orchestrator(
            store,
            app,
            clock=clock_of(generation + 1),
            owner=f"sweeper-{generation}",
            lease_ttl=LEASE_TTL,
        )
        with running_as(Process(sweeper.owner, sweeper, approve, log)):
            await Sweeper(sweeper).sweep()
    raise AssertionError(f"saga {saga_id} did not come to rest after {restarts} restarts")


def _undo_in_flight(state: SagaState) -> bool:
    """An undo begun and not ended in a saga that is otherwise over (a dead letter's retry
    whose process lost its lease or its ledger during the call)."""
    return state.status is SagaStatus.COMPENSATION_FAILED and any(
        r.undo_status is UndoStatus.STARTED for r in state.steps
    )


async def run_in_process(
    make_world: Callable[[], W],
    scenario: ChaosScenario[W],
    crashes: Sequence[CrashSite] = (),
    *,
    seed: int = 0,
    ledger: LedgerFactory = memory_ledger,
    interludes: Sequence[Interlude] = (),
    stalls: Sequence[Stall] = (),
    pause: Hook | None = None,
    offsets: Sequence[float] = (),
    lag: float = 0.0,
    stale: Sequence[int] = (),
    expire: bool = False,
) -> RunResult:
    """One run on fresh providers and an empty ledger, crashing at ``crashes`` in turn.

    ``stalls``: calls that never return (abandoned by a short timeout), or land late;
    ``pause``: a hook that pauses the first process somewhere (``PauseAt``); ``offsets``:
    how far each process's clock is off; ``lag``: how far lookups lag behind the calls they
    look for; ``stale``: the processes (by generation) that run an older build first;
    ``expire``: a saga that comes to rest waiting for a person is resumed a day later, after
    the providers forgot its idempotency keys (the world must be ``ForgetsKeys``).

    Every action and undo call is recorded (for the ``no_concurrent_calls`` invariant) and
    offered to ``interludes`` while in flight (see ``Takeover``).
    """
    world = make_world()
    scenario.prepare(world)
    try:
        async with ledger() as store:
            faults = RunFaults(interludes, stalls, pause, offsets, lag, stale, expire)
            return await _run(store, world, scenario, crashes, seed, faults)
    finally:
        world.close()


@dataclass(frozen=True)
class RunFaults:
    """What a run meets besides crashes: calls in flight let others in (``interludes``),
    calls that stall, a pause of the first process, clocks that disagree."""

    interludes: Sequence[Interlude] = ()
    stalls: Sequence[Stall] = ()
    pause: Hook | None = None
    offsets: Sequence[float] = ()
    lag: float = 0.0  # how far every lookup lags behind the calls it looks for
    stale: Sequence[int] = ()  # the processes (by generation) of an older build
    expire: bool = False  # resume a saga left to a person after its keys expired


STALL_TIMEOUT = 0.05  # seconds a call may take in a run with stalls (then it is abandoned)


def _last(plan: Plan) -> str:
    return plan.calls()[-1].call.name


def _first_hook(crash: Hook | None, pause: Hook | None) -> Hook | None:
    """The first process's hook: its crash, then its pause."""
    if crash is None or pause is None:
        return crash or pause

    def both(point: Point, index: int) -> Awaitable[None] | None:
        crash(point, index)
        return pause(point, index)

    return both


async def _run(
    store: Store,
    world: W,
    scenario: ChaosScenario[W],
    crashes: Sequence[CrashSite],
    seed: int,
    faults: RunFaults,
) -> RunResult:
    clock = FakeClock()
    log = CallLog()
    timeout = STALL_TIMEOUT if faults.stalls else None
    lag = Lag(clock, faults.lag) if faults.lag else None
    parts = (world.app, log, faults.interludes, faults.stalls)
    app = instrument(*parts, call_timeout=timeout, lag=lag)
    # an older build lacks the plan's last step: its processes must leave the saga alone
    older = (
        instrument(*parts, call_timeout=timeout, lag=lag, without=_last(scenario.plan))
        if faults.stale
        else None
    )
    await Orchestrator(store, app, clock=clock).submit(scenario.plan, saga_id=SAGA_ID)
    scenario.arm(world)
    hooks: list[Hook | None] = [CrashAt(site) for site in crashes]
    if faults.pause is not None:
        hooks = [_first_hook(hooks[0] if hooks else None, faults.pause), *hooks[1:]]
    done = await recover_counting(
        store,
        app,
        clock,
        SAGA_ID,
        approve=scenario.approve,
        hooks=hooks,
        seed=seed,
        log=log,
        offsets=faults.offsets,
        stale=[
            older if g in faults.stale else None for g in range(max(faults.stale, default=-1) + 1)
        ],
    )
    expired = False
    if faults.expire and done.state.status is SagaStatus.NEEDS_HUMAN:
        if not isinstance(world, ForgetsKeys):
            raise TypeError("a run with expire=True needs a world with expire_keys()")
        await landed()
        clock.advance(KEY_RETENTION + 1)  # a person comes back a day later ...
        world.expire_keys()  # ... and the providers no longer know the saga's keys
        await _resume(store, app, clock)
        again = await recover_counting(
            store, app, clock, SAGA_ID, approve=scenario.approve, seed=seed + 100, log=log
        )
        done = Recovery(again.state, done.fired, done.store_errors + again.store_errors)
        expired = True
    await landed()  # calls that land late land before the providers are looked at
    violations = await check_invariants(store, world.probe, [SAGA_ID], log.call_spans())
    kinds = _kinds(faults, done) + (("expired keys",) if expired else ())
    return RunResult(
        scenario.name,
        tuple(crashes),
        done.fired,
        done.state.status,
        violations,
        done.store_errors,
        kinds,
    )


async def _resume(store: Store, app: App, clock: FakeClock) -> None:
    """A person resumes the parked saga, trying again while the ledger write fails."""
    for _ in range(4):
        try:
            await Orchestrator(store, app, clock=clock).resume(
                SAGA_ID, "chaos-operator", "fixed the cause a day later"
            )
            return
        except StoreError:  # a failed commit: resumed after all, or try again
            stored = await store.load(SAGA_ID)
            if stored is not None and stored.state.status is not SagaStatus.NEEDS_HUMAN:
                return
    raise AssertionError("the saga could not be resumed")


def _kinds(faults: RunFaults, done: Recovery) -> tuple[str, ...]:
    """The fault kinds a run met, for the report."""
    kinds = [f"{type(i).__name__.lower()}" for i in faults.interludes if getattr(i, "fired", 0)]
    kinds += [("late landing" if s.lands else "stall") for s in faults.stalls if s.fired]
    if faults.pause is not None and getattr(faults.pause, "fired", False):
        kinds.append("pause")
    if any(faults.offsets):
        kinds.append("clock skew")
    if faults.lag:
        kinds.append("lagging lookup")
    if faults.stale:
        kinds.append("older build")
    if done.store_errors:
        kinds.append("failed commit")
    return tuple(kinds)


async def trace(make_world: Callable[[], W], scenario: ChaosScenario[W]) -> list[CrashSite]:
    """Every crash site the scenario reaches when nothing crashes."""
    world = make_world()
    scenario.prepare(world)
    recorder = Trace()
    store = SQLiteStore(":memory:")
    await store.open()
    try:
        clock = FakeClock()
        orch = Orchestrator(store, world.app, clock=clock, hook=recorder)
        await orch.submit(scenario.plan, saga_id=SAGA_ID)
        await until_quiet(orch, clock, SAGA_ID, approve=scenario.approve)
        return recorder.sites
    finally:
        await store.close()
        world.close()
