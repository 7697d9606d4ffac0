"""The saga state machine: drives one saga from its ledger state. No SQL here."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from pivotal.catalogue import Catalogue, Step, StepContext, StepKind, action_key, undo_key
from pivotal.clock import Clock
from pivotal.hooks import Hook, Point
from pivotal.plan import Plan, Provenance
from pivotal.retry import Outcome, RetryPolicy, classify
from pivotal.state import (
    ApprovalStatus,
    Event,
    EventType,
    SagaState,
    SagaStatus,
    StepStatus,
    UndoStatus,
    apply,
)
from pivotal.store.base import Store

_OUTCOME_REACHED = (StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.UNKNOWN)
_MAY_HAVE_EFFECT = (
    StepStatus.STARTED,
    StepStatus.RETRY_WAIT,
    StepStatus.SUCCEEDED,
    StepStatus.UNKNOWN,
)
_UNDO_SETTLED = (UndoStatus.DONE, UndoStatus.DEAD_LETTERED, UndoStatus.RESOLVED)


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def point_of_no_return(state: SagaState) -> int | None:
    """The pivot's index, else the first retriable step's, else None."""
    for kind in (StepKind.PIVOT.value, StepKind.RETRIABLE.value):
        for r in state.steps:
            if r.kind == kind:
                return r.index
    return None


def _never() -> bool:
    return False


@dataclass(frozen=True)
class RunOptions:
    """How a pass behaves inside its process."""

    owner: str = "local"  # recorded on every intent: which worker made the attempt
    max_inline_wait: float = math.inf  # a longer wait ends the pass; a worker resumes it
    hook: Hook | None = None  # fault injection: called at each protocol point
    should_stop: Callable[[], bool] = _never  # checked between steps (graceful shutdown)


class Suspended(Exception):
    """The pass ended early: a retry is not due yet, or the worker is stopping."""


class SagaRun:
    """One pass of one saga under a lease ``epoch`` (None: fenced by version only)."""

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
    ) -> None:
        self.store = store
        self.catalogue = catalogue
        self.plan = plan
        self.state = state
        self.clock = clock
        self.epoch = epoch
        self.provenance: Provenance = plan.provenance
        self.rng = rng or random.Random()
        self.options = options or RunOptions()
        self._lock = asyncio.Lock()
        self._pending: list[Event] = []
        self._committed = state
        self._calls = plan.calls()
        self._args: dict[int, BaseModel] = {}

    # -- ledger writes ------------------------------------------------------------------

    def event(
        self,
        type: EventType,
        step: int | None = None,
        attempt: int | None = None,
        **data: Any,
    ) -> Event:
        return Event(type=type, at=self.clock.now(), step=step, attempt=attempt, data=data)

    async def emit(self, *events: Event, defer: bool = False) -> None:
        """Apply events; commit them and any deferred ones with the new state, atomically.

        ``defer`` holds them until the next commit. Only an outcome may be deferred: if the
        process dies first, the step is still ``started`` in the ledger, and recovery
        settles it by lookup or by repeating the call with the same key. Every intent is
        committed before its call, and so is every deferred outcome before it.
        """
        async with self._lock:
            after = self.state
            for e in events:
                e = replace(e, seq=after.version + 1)
                after = apply(after, e)
                self._pending.append(e)
            self.state = after
            if not defer:
                await self._flush()

    async def flush(self) -> None:
        """Commit deferred events now."""
        async with self._lock:
            await self._flush()

    async def _flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            await self.store.commit(self._committed, self.state, pending, self.epoch)
            self._committed = self.state

    # -- helpers ------------------------------------------------------------------------

    def step_of(self, index: int) -> Step:
        return self.catalogue[self.state.steps[index].name]

    def args_of(self, index: int) -> BaseModel:
        if index not in self._args:
            self._args[index] = self.step_of(index).parse_args(self._calls[index].call.args)
        return self._args[index]

    def context(self, index: int, attempt: int, *, undo: bool = False) -> StepContext:
        key = action_key(self.state.saga_id, index)
        return StepContext(
            saga_id=self.state.saga_id,
            index=index,
            step=self.state.steps[index].name,
            key=undo_key(self.state.saga_id, index) if undo else key,
            action_key=key,
            attempt=attempt,
            provenance=self.provenance,
        )

    def _hook(self, point: Point, index: int) -> None:
        if self.options.hook is not None:
            self.options.hook(point, index)

    async def _wait_until(self, when: float | None) -> None:
        if when is None or when <= self.clock.now():
            return
        if when - self.clock.now() > self.options.max_inline_wait or self.options.should_stop():
            raise Suspended(f"next attempt due at {when:.3f}")
        await self.clock.sleep(when - self.clock.now())

    @staticmethod
    async def _bounded(call: Awaitable[Any], limit: float | None) -> Any:
        async with asyncio.timeout(limit):
            return await call

    async def _lookup(self, index: int, attempt: int) -> tuple[bool | None, Any]:
        """(True, result) found; (False, None) not found; (None, None) could not tell."""
        step = self.step_of(index)
        if step.lookup is None:
            return None, None
        try:
            found = await self._bounded(
                step.lookup(self.args_of(index), self.context(index, attempt)), step.timeout
            )
        except Exception:
            return None, None
        if found is None:
            return False, None
        return True, to_jsonable_python(found, fallback=str)

    # -- the loop -----------------------------------------------------------------------

    async def drive(self) -> SagaState:
        """Advance the saga until it ends, waits for a person, or the pass is suspended
        (a retry not yet due, or the worker stopping): its state so far is committed."""
        try:
            return await self._drive()
        except Suspended:
            await self.flush()
            return self.state

    async def _drive(self) -> SagaState:
        while True:
            if self.options.should_stop() and not self.state.status.terminal:
                raise Suspended("the worker is stopping")
            s = self.state
            if s.status.terminal:
                await self.flush()
                return self.state
            if s.status is SagaStatus.COMPENSATING:
                await self.compensate()
                continue
            unit = self._next_unit()
            if unit is None:
                await self.emit(self.event(EventType.SAGA_COMPLETED, reason=None))
                continue
            if not await self._gate(unit[0]):
                if self.state.status is SagaStatus.AWAITING_APPROVAL:
                    await self.flush()
                    self._hook(Point.AWAITING_APPROVAL, unit[0])
                    return self.state
                continue
            if len(unit) == 1:
                await self.execute(unit[0])
            else:
                await self._together(unit)
            await self._after(unit)

    async def _together(self, unit: list[int]) -> None:
        """Run a parallel group: every member to its outcome, none cancelled mid-effect."""
        results = await asyncio.gather(*(self.execute(i) for i in unit), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        for failure in failures:  # a crash or a lost lease wins over a suspension
            if not isinstance(failure, Suspended):
                raise failure
        if failures:
            raise failures[0]

    def _next_unit(self) -> list[int] | None:
        first = next((r for r in self.state.steps if r.status is not StepStatus.SUCCEEDED), None)
        if first is None:
            return None
        if first.group is None:
            return [first.index]
        return [r.index for r in self.state.steps if r.group == first.group]

    async def _gate(self, index: int) -> bool:
        """Approval at the point of no return. True: go on and run the step."""
        rec = self.state.steps[index]
        if index != point_of_no_return(self.state) or rec.status is not StepStatus.PENDING:
            return True
        approval, now = self.state.approval, self.clock.now()
        if approval is None:
            policy = self.catalogue.approval
            need = policy(rec.name, self.args_of(index), self.plan) if policy else None
            if need is None:
                return True
            await self.emit(
                self.event(
                    EventType.APPROVAL_REQUESTED,
                    step=index,
                    reason=need.reason,
                    rationale=self.plan.rationale,
                    expires_at=now + need.expires_in,
                )
            )
            return False
        if approval.status in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED):
            if now >= approval.expires_at:
                await self.emit(
                    self.event(EventType.APPROVAL_EXPIRED, step=index),
                    self.event(
                        EventType.COMPENSATION_STARTED,
                        reason=f"approval for {rec.name} expired before the step ran",
                    ),
                )
                return False
            return approval.status is ApprovalStatus.APPROVED
        return False  # rejected or expired: compensation already started

    async def _after(self, unit: list[int]) -> None:
        bad = [
            self.state.steps[i]
            for i in unit
            if self.state.steps[i].status in (StepStatus.FAILED, StepStatus.UNKNOWN)
        ]
        if not bad:
            return
        r = bad[0]
        pnr = point_of_no_return(self.state)
        passed = pnr is not None and self.state.steps[pnr].status is StepStatus.SUCCEEDED
        if passed:
            reason = f"{r.name} (step {r.index}) failed after the point of no return: {r.error}"
            await self.emit(self.event(EventType.SAGA_NEEDS_HUMAN, reason=reason))
        elif r.index == pnr and r.status is StepStatus.UNKNOWN:
            reason = f"outcome of the point-of-no-return step {r.name} is unknown: {r.error}"
            await self.emit(self.event(EventType.SAGA_NEEDS_HUMAN, reason=reason))
        else:
            reason = f"{r.name} (step {r.index}) {r.status.value}: {r.error}"
            await self.emit(self.event(EventType.COMPENSATION_STARTED, reason=reason))

    # -- forward ------------------------------------------------------------------------

    async def execute(self, index: int) -> None:
        """Run one step until it reaches an outcome, retrying transient failures."""
        step = self.step_of(index)
        rec = self.state.steps[index]
        if rec.status in _OUTCOME_REACHED:
            return
        args = self.args_of(index)
        if rec.status is StepStatus.PENDING and step.precondition is not None:
            reason = step.precondition(args)
            if reason:
                await self.emit(
                    self.event(
                        EventType.STEP_FAILED,
                        step=index,
                        error=f"precondition no longer holds: {reason}",
                        outcome="precondition",
                    )
                )
                return
        if rec.status is StepStatus.STARTED:
            found, result = await self._lookup(index, rec.attempts)
            if found:
                await self._succeed(index, result, via="lookup")
                return
        policy = step.policy
        while True:
            rec = self.state.steps[index]
            if rec.status is StepStatus.RETRY_WAIT:
                await self._wait_until(rec.next_attempt_at)
            attempt = rec.attempts + 1
            ctx = self.context(index, attempt)
            self._hook(Point.BEFORE_INTENT, index)
            await self.emit(
                self.event(
                    EventType.STEP_STARTED, index, attempt, key=ctx.key, by=self.options.owner
                )
            )
            self._hook(Point.AFTER_INTENT, index)
            try:
                result = await self._bounded(step.action(args, ctx), step.timeout)
            except Exception as exc:
                outcome, error = classify(exc, step.retry_on), describe(exc)
            else:
                self._hook(Point.AFTER_EFFECT, index)
                await self._succeed(index, to_jsonable_python(result, fallback=str))
                return
            if outcome is Outcome.TRANSIENT and not policy.exhausted(attempt):
                await self._schedule(EventType.STEP_RETRY_SCHEDULED, index, attempt, error, policy)
                continue
            if outcome is not Outcome.TRANSIENT and attempt == 1:
                await self.emit(
                    self.event(
                        EventType.STEP_FAILED, index, attempt, error=error, outcome=outcome.value
                    )
                )
                return
            # Retries ran out, or a retry was refused after an earlier attempt whose
            # outcome was never known: that attempt may have taken effect.
            await self._settle_doubt(index, attempt, error, outcome)
            return

    async def _succeed(self, index: int, result: Any, via: str = "action") -> None:
        await self.emit(
            self.event(EventType.STEP_SUCCEEDED, index, result=result, via=via), defer=True
        )

    async def _schedule(
        self, type: EventType, index: int, attempt: int, error: str, policy: RetryPolicy
    ) -> None:
        at = self.clock.now() + policy.delay(attempt, self.rng)
        await self.emit(self.event(type, index, attempt, error=error, next_attempt_at=at))

    async def _settle_doubt(self, index: int, attempt: int, error: str, outcome: Outcome) -> None:
        """An attempt may have taken effect: settle by lookup, else record it unknown.

        After an ``Abort`` an effect found by lookup is not a success: the step is recorded
        with an unknown outcome so that compensation undoes it.
        """
        found, result = await self._lookup(index, attempt)
        if found and outcome is not Outcome.ABORT:
            await self._succeed(index, result, via="lookup")
        elif found is False:
            await self.emit(
                self.event(
                    EventType.STEP_FAILED,
                    index,
                    attempt,
                    error=f"{error} (after {attempt} attempts; lookup found no effect)",
                    outcome="exhausted",
                )
            )
        else:
            await self.emit(
                self.event(
                    EventType.STEP_UNKNOWN,
                    index,
                    attempt,
                    error=f"{error} (after {attempt} attempts; outcome unknown)",
                )
            )

    # -- backward -----------------------------------------------------------------------

    async def compensate(self) -> None:
        """Undo, newest outcome first, every compensable step that may have taken effect."""
        todo = [
            r
            for r in self.state.steps
            if r.kind == StepKind.COMPENSABLE.value
            and r.status in _MAY_HAVE_EFFECT
            and r.undo_status not in _UNDO_SETTLED
        ]
        todo.sort(key=lambda r: (math.inf if r.seq is None else r.seq, r.index), reverse=True)
        for r in todo:
            await self.undo(r.index)
        dead = self.state.dead_letters
        if dead:
            names = ", ".join(f"{r.name} (step {r.index})" for r in dead)
            reason = f"{self.state.reason}; undo failed and was dead-lettered: {names}"
            await self.emit(self.event(EventType.SAGA_COMPENSATION_FAILED, reason=reason))
        else:
            await self.emit(self.event(EventType.SAGA_COMPENSATED, reason=self.state.reason))

    async def undo(self, index: int) -> None:
        """Run one step's undo until it succeeds or is parked as a dead letter."""
        policy = self.step_of(index).undo_retry
        while True:
            rec = self.state.steps[index]
            if rec.undo_status in _UNDO_SETTLED:
                return
            if rec.undo_status is UndoStatus.RETRY_WAIT:
                await self._wait_until(rec.undo_next_attempt_at)
            attempt = rec.undo_attempts + 1
            error = await self._undo_attempt(index, attempt)
            if error is None:
                return
            outcome, message = error
            if outcome is Outcome.TRANSIENT and not policy.exhausted(attempt):
                await self._schedule(
                    EventType.UNDO_RETRY_SCHEDULED, index, attempt, message, policy
                )
                continue
            await self._park(index, attempt, message, retries=0)
            return

    async def _undo_attempt(self, index: int, attempt: int) -> tuple[Outcome, str] | None:
        """One undo call under its intent; None when it succeeded."""
        step = self.step_of(index)
        assert step.undo is not None
        ctx = self.context(index, attempt, undo=True)
        self._hook(Point.BEFORE_UNDO_INTENT, index)
        await self.emit(
            self.event(EventType.UNDO_STARTED, index, attempt, key=ctx.key, by=self.options.owner)
        )
        self._hook(Point.AFTER_UNDO_INTENT, index)
        try:
            result = self.state.steps[index].result
            await self._bounded(step.undo(self.args_of(index), result, ctx), step.timeout)
        except Exception as exc:
            return classify(exc, step.retry_on), describe(exc)
        self._hook(Point.AFTER_UNDO_EFFECT, index)
        await self.emit(self.event(EventType.UNDO_SUCCEEDED, index, attempt), defer=True)
        return None

    async def _park(self, index: int, attempt: int, error: str, retries: int) -> None:
        """Dead-letter the undo; schedule its next retry by the step's dead-letter policy."""
        policy = self.step_of(index).dead_letter_retry
        next_retry = (
            None
            if policy.exhausted(retries + 1)
            else self.clock.now() + policy.delay(retries + 1, self.rng)
        )
        await self.emit(
            self.event(
                EventType.UNDO_DEAD_LETTERED, index, attempt, error=error, next_retry_at=next_retry
            )
        )

    # -- dead letters -------------------------------------------------------------------

    async def retry_dead_letter(self, index: int, retries: int) -> bool:
        """Try a parked undo once more, with the same undo key; True when it is settled."""
        rec = self.state.steps[index]
        if rec.undo_status in (UndoStatus.DONE, UndoStatus.RESOLVED):
            return True
        if rec.undo_status not in (UndoStatus.DEAD_LETTERED, UndoStatus.STARTED):
            return False
        error = await self._undo_attempt(index, rec.undo_attempts + 1)
        if error is not None:
            await self._park(index, rec.undo_attempts + 1, error[1], retries + 1)
            return False
        await self._settle()
        return True

    async def resolve_dead_letter(self, index: int, by: str, reason: str) -> None:
        """An operator settled the undo by hand."""
        await self.emit(
            self.event(EventType.DEAD_LETTER_RESOLVED, index, by=by, reason=reason), defer=True
        )
        await self._settle()

    async def _settle(self) -> None:
        """Once no dead letter is open, a compensation_failed saga is compensated."""
        if self.state.status is SagaStatus.COMPENSATION_FAILED and not self.state.dead_letters:
            await self.emit(
                self.event(
                    EventType.SAGA_COMPENSATED,
                    reason=f"{self.state.reason}; every dead letter has since been settled",
                )
            )
        else:
            await self.flush()
