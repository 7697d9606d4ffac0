"""One pass's state and its side of the ledger: ``Journal`` holds every attribute of a
pass and stages, commits and reloads its events; ``RunOptions``, ``Creation`` and the
exceptions that end a pass early are here too."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from pivotal.admission.validation import Checked, FactSource
from pivotal.clock import Clock
from pivotal.declarations.catalogue import Catalogue, Step, StepKind
from pivotal.declarations.exposure import NO_RATES, Rates
from pivotal.declarations.plan import Plan, Provenance
from pivotal.engine.telemetry import Observers, Telemetry
from pivotal.engine.values import describe
from pivotal.errors import StoreError, VersionConflict
from pivotal.hooks import Hook
from pivotal.records import quick_init
from pivotal.sagas.state import (
    Event,
    EventType,
    SagaState,
    SagaStatus,
    StepStatus,
    UndoStatus,
    apply,
    numbered,
)
from pivotal.store.base import Store

# the events that record a failed call: each carries the call's ``trace`` (``tracebacks``)
_TRACED = frozenset(
    {
        EventType.STEP_RETRY_SCHEDULED,
        EventType.STEP_FAILED,
        EventType.STEP_UNKNOWN,
        EventType.UNDO_RETRY_SCHEDULED,
        EventType.UNDO_DEAD_LETTERED,
    }
)
_UNDOING = frozenset(
    {
        EventType.UNDO_STARTED,
        EventType.UNDO_SUCCEEDED,
        EventType.UNDO_PARTIAL,
        EventType.UNDO_LAPSED,
        EventType.UNDO_RETRY_SCHEDULED,
        EventType.UNDO_DEAD_LETTERED,
        EventType.DEAD_LETTER_RESOLVED,
    }
)
# the events that record what a call did (not what to do next)
_OBSERVED = frozenset(
    {
        EventType.STEP_SUCCEEDED,
        EventType.STEP_FAILED,
        EventType.STEP_UNKNOWN,
        EventType.UNDO_SUCCEEDED,
        EventType.UNDO_PARTIAL,
    }
)


def _never() -> bool:
    return False


def _no_pause(index: int) -> bool:
    return False


@quick_init
@dataclass(frozen=True, slots=True)
class RunOptions:
    """How a pass behaves inside its process."""

    owner: str = "local"  # recorded on every intent: which worker made the attempt
    max_inline_wait: float = math.inf  # a longer wait ends the pass; a worker resumes it
    hook: Hook | None = None  # fault injection: called at each protocol point
    should_stop: Callable[[], bool] = _never  # checked between steps (graceful shutdown)
    # checked before each attempt's intent: True suspends the pass before step ``index``
    # begins (an agent's model stage decides first); the state so far is committed
    pause_before: Callable[[int], bool] = _no_pause
    # set by the holder of the pass's lease: the commit that ends the pass (the saga ended,
    # or waits for a person) also frees the lease, when the store can, and then this is
    # called (the holder stops renewing it and need not release it again)
    on_release: Callable[[], None] | None = None
    # set by the holder of the pass's lease: raises ``LeaseLost`` unless the lease is still
    # held (renewing one about to run out); awaited right before every intent and every
    # call that can take effect, so that a paused process never calls after losing it
    lease_check: Callable[[], Awaitable[None]] | None = None
    # set by the holder of the pass's lease: keeps a call's progress report on step
    # ``index`` under the lease and renews it (``LeaseKeeper.report``); ``LeaseLost`` when
    # it was taken over. None: kept fenced by the pass's epoch, if any
    report: Callable[[int, dict[str, Any]], Awaitable[None]] | None = None


# the kinds that mark the point of no return, first found first (their text, read once)
_NO_RETURN = (StepKind.PIVOT.value, StepKind.RETRIABLE.value)


def point_of_no_return(state: SagaState) -> int | None:
    """The pivot's index, else the first retriable step's, else None."""
    for kind in _NO_RETURN:
        for r in state.steps:
            if r.kind == kind:
                return r.index
    return None


def _ends_pass(state: SagaState) -> bool:
    """Whether a pass stops once ``state`` is committed: the saga ended, or it waits for a
    person."""
    return state.status.terminal or state.status is SagaStatus.AWAITING_APPROVAL


class _CommitAndRelease(Protocol):
    """A store class's ``commit_and_release``, called unbound: (store, before, after,
    events, epoch)."""

    def __call__(
        self, store: Store, before: SagaState, after: SagaState, events: list[Event], epoch: int
    ) -> Awaitable[None]: ...


@quick_init
@dataclass(frozen=True, slots=True)
class Creation:
    """A saga that is not in the ledger yet: the first commit of its pass creates it, with
    its submission and the events of the pass so far (its first intent, typically), so a
    saga run at once costs one commit less. Until then nothing was called that could take
    effect: every action's intent is committed first.

    ``create(state, events, leased)`` writes it, leased to this process when ``leased``
    (the pass goes on) or free (this commit ends the pass); None or False when a saga with
    this id exists already (the store's ``create_leased`` and ``create`` say so each their
    way). ``created(leased)`` is told once it is in the ledger.
    """

    submitted: Event
    create: Callable[[SagaState, list[Event], bool], Awaitable[object]]
    created: Callable[[bool], None]


class AlreadyCreated(Exception):
    """The first commit of a ``Creation`` found a saga with its id in the ledger: nothing
    was written; the caller goes on with the saga that exists."""


class Suspended(Exception):
    """The pass ended early: a retry is not due yet, or the worker is stopping."""


class Journal:
    """What one pass of one saga holds (every attribute of ``Driver``), and its writes
    to the ledger."""

    __slots__ = (
        "_broken",
        "_committed",
        "_creating",
        "_facts",
        "_lock",
        "_parsed",
        "_pending",
        "_rates",
        "_raw_args",
        "_traces",
        "_unwritten",
        "_validated_at",
        "catalogue",
        "clock",
        "epoch",
        "no_return",
        "options",
        "plan",
        "provenance",
        "rng",
        "state",
        "store",
        "telemetry",
    )

    def __init__(
        self,
        store: Store,
        catalogue: Catalogue,
        plan: Plan,
        state: SagaState,
        clock: Clock,
        *,
        epoch: int | None,
        rng: random.Random | None = None,
        options: RunOptions | None = None,
        telemetry: Telemetry | None = None,
        creating: Creation | None = None,
        checked: Checked | None = None,
        facts: FactSource | None = None,
        rates: Rates = NO_RATES,
    ) -> None:
        self.store = store
        self.catalogue = catalogue
        self.plan = plan
        self.state = state
        # the saga's point of no return: its steps' kinds never change, so it is found once
        self.no_return = point_of_no_return(state)
        self.clock = clock
        self.epoch = epoch
        self.provenance: Provenance = plan.provenance
        self.rng = rng or random.Random()
        self.options = options or RunOptions()
        self.telemetry = (
            telemetry
            if isinstance(telemetry, Observers)
            else Observers([telemetry] if telemetry is not None else [])
        )
        self._lock = asyncio.Lock()
        self._creating = creating
        self._pending: list[Event] = [creating.submitted] if creating is not None else []
        self._committed = state
        self._broken: BaseException | None = None
        # what a commit refused for a version conflict tried to write, and the state it
        # applied to: the outcomes of calls in it are facts, kept across the reload
        self._unwritten: tuple[SagaState, list[Event]] | None = None
        # each call's arguments as planned; parsed when used, never kept (thousands of passes
        # may wait at once: each keeps only what it needs)
        calls = checked.calls if checked is not None else plan.calls()
        self._raw_args = [flat.call.args for flat in calls]
        # arguments the validator just parsed, each handed out once instead of parsing again
        self._parsed = checked.args if checked is not None else None
        # the app's trusted facts, for validating the plan again before the point of no
        # return and after a wait (None: never re-validated, as by a bare Driver)
        self._facts = facts
        # the app's exchange rates, for what a plan moves (``pivotal.declarations.exposure``)
        self._rates = rates
        # when this process last validated the plan (None: not in this pass; the saga's
        # creation is the last time known)
        self._validated_at: float | None = clock.now() if checked is not None else None
        # the trace of what a step's last call raised, by (step, undo?), until the next
        # event about that step: the one recording the failure carries it
        self._traces: dict[tuple[int, bool], list[dict[str, Any]] | None] = {}

    # -- ledger writes ------------------------------------------------------------------

    def event(
        self,
        type: EventType,
        step: int | None = None,
        attempt: int | None = None,
        *,
        at: float | None = None,
        **data: Any,
    ) -> Event:
        """An event of this pass, at ``at`` (the clock's reading the caller decided with, if
        it decided on one: never read twice for one decision), else now; ``data`` its data
        (so no data key may be called ``at``)."""
        if self._traces and step is not None:
            trace = self._traces.pop((step, type in _UNDOING), None)
            if trace and type in _TRACED:
                data["trace"] = trace
        if at is None:
            at = self.clock.now()
        return Event(type=type, at=at, step=step, attempt=attempt, data=data)

    async def emit(self, *events: Event, defer: bool = False) -> None:
        """Apply events; commit them and any deferred ones with the new state, atomically.

        ``defer`` holds them until the next commit. Only an outcome may be deferred: if the
        process dies first, the step is still ``started`` in the ledger, and recovery
        settles it by lookup or by repeating the call with the same key. Every intent is
        committed before its call, and so is every deferred outcome before it.

        State is published only once the store acknowledged it. A failed commit breaks the
        pass: every later write of it is refused, and the next pass starts from the ledger.
        """
        async with self._lock:
            if self._broken is not None:
                raise StoreError(f"an earlier write of this pass failed: {self._broken}")
            after = self.state
            staged = []
            for e in events:
                e = numbered(e, after.version + 1)
                after = apply(after, e)
                staged.append(e)
            if defer:
                self._pending.extend(staged)
                self.state = after
            else:
                await self._commit(after, [*self._pending, *staged])

    async def flush(self) -> None:
        """Commit deferred events now."""
        async with self._lock:
            if self._pending and self._broken is None:
                await self._commit(self.state, list(self._pending))

    async def _commit(self, after: SagaState, events: list[Event]) -> None:
        before: SagaState | None = self._committed
        releasing = self._releasing(after)
        freed = releasing is not None  # this commit frees the lease too
        try:
            if (creation := self._creating) is not None:
                before = None
                freed = self.options.on_release is not None and _ends_pass(after)
                made = await creation.create(after, events, not freed)
                if made is None or made is False:
                    raise AlreadyCreated(f"saga {after.saga_id} exists already")
                self._creating = None
                creation.created(not freed)
            elif releasing is not None and self.epoch is not None:
                await releasing(self.store, self._committed, after, events, self.epoch)
            else:
                await self.store.commit(self._committed, after, events, self.epoch)
        except BaseException as exc:
            self._broken = exc
            if isinstance(exc, VersionConflict):
                self._unwritten = (self._committed, events)
            raise
        self.state = self._committed = after
        self._pending = []
        if freed and self.options.on_release is not None:
            self.options.on_release()
        self.telemetry.committed(before, after, events)

    def _releasing(self, after: SagaState) -> _CommitAndRelease | None:
        """How to commit ``after`` and free the lease at once, when this commit ends the
        pass, the lease's holder asked for it and the store's class can (a wrapper that
        delegates by ``__getattr__`` is never bypassed: its own ``commit`` runs)."""
        if self.options.on_release is None or self.epoch is None or not _ends_pass(after):
            return None
        found: _CommitAndRelease | None = getattr(type(self.store), "commit_and_release", None)
        return found

    async def _reload(self) -> None:
        """Start over from the ledger (after a decision was written meanwhile)."""
        stored = await self.store.load(self.state.saga_id)
        if stored is None:
            raise StoreError(f"saga {self.state.saga_id} vanished from the ledger")
        self.state = self._committed = stored.state
        self._pending, self._broken = [], None
        unwritten, self._unwritten = self._unwritten, None
        if unwritten is not None:
            self._keep_observed(*unwritten)

    def _keep_observed(self, before: SagaState, events: list[Event]) -> None:
        """Stage again, on the state just reloaded, the outcomes of calls that a refused
        commit held: a decision written meanwhile (an abort) changes what happens next, not
        what a call already did. Each is kept only while its attempt is still the one in
        flight in the ledger; it is committed with the next write."""
        for e in events:
            if e.type not in _OBSERVED or e.step is None:
                continue
            was, now = before.steps[e.step], self.state.steps[e.step]
            if e.type in _UNDOING:
                same = now.undo_status is UndoStatus.STARTED and (
                    now.undo_attempts == was.undo_attempts
                )
            else:
                same = now.status is StepStatus.STARTED and now.attempts == was.attempts
            if same:
                e = numbered(e, self.state.version + 1)
                self.state = apply(self.state, e)
                self._pending.append(e)

    # -- helpers ------------------------------------------------------------------------

    def step_of(self, index: int) -> Step:
        return self.catalogue[self.state.steps[index].name]

    def args_of(self, index: int) -> BaseModel:
        parsed = self._parsed
        if parsed is not None and index < len(parsed) and (args := parsed[index]) is not None:
            parsed[index] = None
            return args
        return self.step_of(index).parse_args(self._raw_args[index])

    def _args_or_error(self, index: int) -> BaseModel | str:
        """The step's arguments, or why they cannot be had (the catalogue changed since the
        plan was validated, or its model raised)."""
        try:
            return self.args_of(index)
        except Exception as exc:
            return f"arguments of {self.state.steps[index].name} no longer parse: {describe(exc)}"
