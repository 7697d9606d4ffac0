"""Compensation: the steps that may have taken effect undone, newest first, after their
doubt is settled; an undo that keeps failing is dead-lettered, retried or resolved."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from pivotal.catalogue import NothingToUndo, Partial, StepKind
from pivotal.engine.calls import Abandoned
from pivotal.engine.forward import Forward, _open, _repeatable
from pivotal.engine.machine import MAY_HAVE_LANDED, Do, End, Facts, Phase, Tick, decide, may_start
from pivotal.engine.values import _note, _outcome_name, describe, jsonable
from pivotal.holds import lapsed_since
from pivotal.hooks import Point
from pivotal.moments import moment
from pivotal.retry import Outcome, classify
from pivotal.state import EventType, SagaState, SagaStatus, StepStatus, UndoStatus
from pivotal.tracebacks import from_exception

_MAY_HAVE_EFFECT = (
    StepStatus.STARTED,
    StepStatus.RETRY_WAIT,
    StepStatus.SUCCEEDED,
    StepStatus.UNKNOWN,
)
_UNDO_SETTLED = (
    UndoStatus.DONE,
    UndoStatus.PARTIAL,
    UndoStatus.LAPSED,
    UndoStatus.DEAD_LETTERED,
    UndoStatus.RESOLVED,
)
_UNDO_ENDED = (UndoStatus.DONE, UndoStatus.PARTIAL, UndoStatus.LAPSED, UndoStatus.RESOLVED)
_UNDO_OPEN = (UndoStatus.STARTED, UndoStatus.RETRY_WAIT, UndoStatus.DEAD_LETTERED)


class Backward(Forward):
    """A saga's compensation and its dead letters."""

    __slots__ = ()

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
            if not await self._lapsed(r.index) and await self._settle_forward(r.index):
                await self.undo(r.index)
        dead = self.state.dead_letters
        if dead:
            names = ", ".join(f"{r.name} (step {r.index})" for r in dead)
            reason = f"{self.state.reason}; undo failed and was dead-lettered: {names}"
            await self.emit(self.event(EventType.SAGA_COMPENSATION_FAILED, reason=reason))
        else:
            ended = _with_partial_undos(self.state.reason, self.state)
            await self.emit(self.event(EventType.SAGA_COMPENSATED, reason=ended))

    async def _settle_forward(self, index: int) -> bool:
        """Before a step whose outcome is not known is undone: wait until no attempt of it
        can land any more, then look it up by its key. Found: its result is recorded and
        the undo gets it. Otherwise the undo is called by its key (it treats "not found" as
        done), unless the step opted in to one settling repeat (``repeat_before_undo``).
        True: undo it."""
        rec = self.state.steps[index]
        if rec.status is StepStatus.SUCCEEDED or rec.undo_attempts > 0:
            return True  # its result is known, or its undo has begun: never act again
        step = self.step_of(index)
        facts = Facts(
            repeatable=_repeatable(step),
            can_land=_open(rec.doubt_until, self.clock.now()),
            repeat_before_undo=step.repeat_before_undo,
            repeated=rec.settle_attempt is not None,
        )
        if decide(Phase.UNDOING, Tick.NOW, facts).do is Do.WAIT and rec.doubt_until:
            await self._undo_wait_recorded(index, rec.doubt_until)
            await self._wait_until(rec.doubt_until)
            facts = replace(facts, can_land=False)
            decide(Phase.UNDOING, Tick.NOW, facts)
        found, result = await self._lookup(index, rec.attempts)
        do = decide(Phase.UNDOING, found, facts).do
        if do is Do.UNDO:
            await self._succeed(index, result, via="lookup")
            return True
        if do is Do.REPEAT:
            return await self._repeat(index)
        rec = self.state.steps[index]
        if rec.status is StepStatus.STARTED:  # its last attempt never told
            error = f"attempt {rec.attempts} was interrupted before its outcome was recorded"
            await self._unknown(index, rec.attempts, error, doubt=rec.doubt_until)
        return True  # undo by its key: the undo treats "not found" as undone

    async def _repeat(self, index: int) -> bool:
        """One more attempt of an in-doubt action with its key, to learn its outcome."""
        step = self.step_of(index)
        args = self._args_or_error(index)
        if isinstance(args, str):
            return True
        attempt = self.state.steps[index].attempts + 1
        before = self.state.steps[index].doubt_until
        ctx = self.context(index, attempt)
        not_after = await self._intent(index, ctx, settle=True)
        end, result, error = await self._call_action(index, step, args, ctx, not_after)
        if end is End.RETURNED:
            await self._hook(Point.AFTER_EFFECT, index)
            await self._succeed(index, jsonable(result), via="settle", messages=ctx.outbox)
            return True
        # even a refusal proves nothing here (a provider may refuse a key it has applied):
        # the undo, by the key, looks for the effect itself, once the repeat cannot land
        doubt = self.state.steps[index].doubt_until if end in MAY_HAVE_LANDED else before
        await self._unknown(index, attempt, f"settling forward: {error}", doubt=doubt)
        return True

    async def undo(self, index: int) -> None:
        """Run one step's undo until it succeeds or is parked as a dead letter.

        Any failure but ``Permanent`` (or an exception the step declares as "no effect") is
        retried with the same undo key; an undo attempt interrupted before its outcome was
        recorded counts against the budget.
        """
        policy = self.step_of(index).undo_retry
        while True:
            rec = self.state.steps[index]
            if rec.undo_status in _UNDO_SETTLED or await self._lapsed(index):
                return
            if rec.undo_status is UndoStatus.STARTED:
                doubt = rec.undo_doubt_until
                interrupted = f"undo attempt {rec.undo_attempts} was interrupted before its outcome"
                if doubt is not None and self.clock.now() < doubt:
                    # it may still be running: the undo key is never called twice at once
                    await self._schedule_undo_at(index, rec.undo_attempts, interrupted, doubt)
                    continue
                if policy.exhausted(rec.undo_attempts):
                    await self._park(index, rec.undo_attempts, interrupted, retries=0, doubt=doubt)
                    return
            if rec.undo_status is UndoStatus.RETRY_WAIT:
                await self._wait_until(rec.undo_next_attempt_at)
                if policy.exhausted(rec.undo_attempts):  # only a wait for doubt gets here
                    last, doubt = rec.undo_error or "", rec.undo_doubt_until
                    await self._park(index, rec.undo_attempts, last, retries=0, doubt=doubt)
                    return
            if await self._undo_waits(index):
                continue
            attempt = rec.undo_attempts + 1
            before = rec.undo_doubt_until
            error = await self._undo_attempt(index, attempt)
            if error is None:
                return
            outcome, message, abandoned = error
            doubt = self.state.steps[index].undo_doubt_until if abandoned else before
            retry = outcome in (Outcome.TRANSIENT, Outcome.UNKNOWN)
            if retry and not policy.exhausted(attempt):
                await self._schedule(
                    EventType.UNDO_RETRY_SCHEDULED,
                    index,
                    attempt,
                    message,
                    policy,
                    doubt=doubt,
                    not_before=doubt,  # never beside an undo attempt that may still run
                )
                continue
            await self._park(index, attempt, message, retries=0, doubt=doubt)
            return

    async def _undo_waits(self, index: int) -> bool:
        """True when the machine says no undo may be called now (an attempt of the action
        or of the undo may still land): the wait is recorded, and the loop waits for it."""
        if not self._undo_barred(index):
            return False
        rec = self.state.steps[index]
        until = max(t for t in (rec.doubt_until, rec.undo_doubt_until) if t is not None)
        await self._undo_wait_recorded(index, until)
        return True

    async def _undo_wait_recorded(self, index: int, until: float) -> None:
        """The undo waits until ``until`` for an attempt that may still land; the undo's
        own window is kept as it was (an action's window is not the undo's)."""
        rec = self.state.steps[index]
        await self.emit(
            self.event(
                EventType.UNDO_RETRY_SCHEDULED,
                index,
                rec.undo_attempts,
                error=f"{rec.name} (step {index}) may still take effect until {moment(until)}",
                next_attempt_at=until,
                doubt_until=rec.undo_doubt_until,
            )
        )

    def _undo_barred(self, index: int) -> bool:
        """The machine's gate before any undo call (compensation, a dead letter's retry):
        True while an attempt of the action, or of the undo, may still land."""
        rec, now = self.state.steps[index], self.clock.now()
        facts = Facts(
            can_land=_open(rec.doubt_until, now), undo_can_land=_open(rec.undo_doubt_until, now)
        )
        return decide(Phase.UNDO_GATE, Tick.NOW, facts).do is Do.WAIT

    async def _lapsed(self, index: int) -> bool:
        """True when the step's effect is a hold that has certainly lapsed on its own: its
        undo is then recorded as lapsed, and nothing is called (see ``pivotal.holds``)."""
        step, rec = self.step_of(index), self.state.steps[index]
        since = lapsed_since(step, rec, self.catalogue.doubt_grace)
        if since is None or self.clock.now() < since:
            return False
        note = (
            f"the hold lapsed on its own: made by {moment(rec.made_by or since)} at the latest, "
            f"it lapses {step.lapses_after:g}s after; nothing was called"
        )
        await self.emit(self.event(EventType.UNDO_LAPSED, index, note=note), defer=True)
        return True

    async def _schedule_undo_at(self, index: int, attempt: int, error: str, at: float) -> None:
        await self.emit(
            self.event(
                EventType.UNDO_RETRY_SCHEDULED,
                index,
                attempt,
                error=f"{error}; it may still take effect until {moment(at)}",
                next_attempt_at=at,
                doubt_until=at,
            )
        )

    async def _undo_attempt(self, index: int, attempt: int) -> tuple[Outcome, str, bool] | None:
        """One undo call under its intent; None when it succeeded, else its outcome, what
        it raised and whether it was abandoned (it may still take effect)."""
        step = self.step_of(index)
        assert step.undo is not None
        args = self._args_or_error(index)
        if isinstance(args, str):
            return Outcome.PERMANENT, args, False  # nothing can be called: a person must look
        ctx = self.context(index, attempt, undo=True)
        not_after = await self._intent(index, ctx, undo=True)
        call = self._call(ctx, undo=True)
        with self.telemetry.call(call):
            if call.traceparent != ctx.traceparent:
                ctx = replace(ctx, traceparent=call.traceparent)
            now = self.clock.now()  # one reading: whether the undo may start, and for how long
            if not may_start(now, not_after):  # nothing was called
                call.outcome = "not_started"
                return Outcome.TRANSIENT, "its deadline passed before the undo could begin", False
            try:
                result = self.state.steps[index].result
                note = await self._bounded(step.undo(args, result, ctx), not_after - now)
            except Exception as exc:
                outcome = classify(exc, step.retry_on, step.no_effect_on)
                call.outcome = _outcome_name(exc, outcome)
                self._traces[index, True] = from_exception(exc)
                return outcome, describe(exc), isinstance(exc, Abandoned)
            call.outcome = "succeeded"
        await self._hook(Point.AFTER_UNDO_EFFECT, index)
        extra: dict[str, Any] = {} if note is None else {"note": _note(note)}
        if isinstance(note, NothingToUndo):
            extra["noop"] = True
        if ctx.outbox:
            extra["messages"] = list(ctx.outbox)
        # a partial undo is settled like any other: only its record and its announcement differ
        kind = EventType.UNDO_PARTIAL if isinstance(note, Partial) else EventType.UNDO_SUCCEEDED
        await self.emit(self.event(kind, index, attempt, **extra), defer=True)
        return None

    async def _park(
        self,
        index: int,
        attempt: int,
        error: str,
        retries: int,
        *,
        doubt: float | None,
    ) -> None:
        """Dead-letter the undo; schedule its next retry by the step's dead-letter policy.
        ``doubt``: until when an undo attempt may still land."""
        policy = self.step_of(index).dead_letter_retry
        next_retry = (
            None
            if policy.exhausted(retries + 1)
            else self.clock.now() + policy.delay(retries + 1, self.rng)
        )
        if next_retry is not None and doubt is not None:
            next_retry = max(next_retry, doubt)  # never beside an undo that may still run
        await self.emit(
            self.event(
                EventType.UNDO_DEAD_LETTERED,
                index,
                attempt,
                error=error,
                next_retry_at=next_retry,
                doubt_until=doubt,
            )
        )

    # -- dead letters -------------------------------------------------------------------

    async def retry_dead_letter(self, index: int, retries: int) -> bool:
        """Try a parked undo once more, with the same undo key; True when it is settled."""
        rec = self.state.steps[index]
        if rec.undo_status in _UNDO_ENDED:
            return True
        if rec.undo_status not in (UndoStatus.DEAD_LETTERED, UndoStatus.STARTED):
            return False
        if await self._lapsed(index):  # a parked release of a hold that has since lapsed
            await self._settle()
            return True
        if self._undo_barred(index):
            return False  # an attempt of the undo or of the action may still land: not now
        before = rec.undo_doubt_until
        error = await self._undo_attempt(index, rec.undo_attempts + 1)
        if error is not None:
            doubt = self.state.steps[index].undo_doubt_until if error[2] else before
            await self._park(index, rec.undo_attempts + 1, error[1], retries + 1, doubt=doubt)
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
        """Once no undo is parked, in doubt or waiting, a compensation_failed saga is
        compensated."""
        in_doubt = any(r.undo_status in _UNDO_OPEN for r in self.state.steps)
        if self.state.status is SagaStatus.COMPENSATION_FAILED and not in_doubt:
            await self.emit(
                self.event(
                    EventType.SAGA_COMPENSATED,
                    reason=_with_partial_undos(
                        f"{self.state.reason}; every dead letter has since been settled",
                        self.state,
                    ),
                )
            )
        else:
            await self.flush()


def _with_partial_undos(reason: str | None, state: SagaState) -> str | None:
    """A compensated saga's reason, naming the undos that could restore only part of what
    was there (their notes are on their ``undo_partial`` events)."""
    partial = state.partial_undos
    if not partial:
        return reason
    names = ", ".join(f"{r.name} (step {r.index})" for r in partial)
    return f"{reason}; undone only in part: {names}"
