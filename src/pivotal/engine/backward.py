"""Compensation: the steps that may have taken effect undone, newest first, after their
doubt is settled; an undo that keeps failing is dead-lettered, retried or resolved."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pivotal.declarations.catalogue import NothingToUndo, Partial
from pivotal.declarations.holds import lapsed_since
from pivotal.declarations.retry import Outcome, classify
from pivotal.engine import by_hand
from pivotal.engine.calls import Abandoned
from pivotal.engine.forward import _RETURNED, Forward, _open, _repeatable
from pivotal.engine.machine import MAY_HAVE_LANDED, Do, End, Facts, Phase, Tick, decide, may_start
from pivotal.engine.values import _note, _outcome_name, describe, jsonable
from pivotal.hooks import Point
from pivotal.moments import moment
from pivotal.sagas.state import (
    UNDO_SETTLED,
    EventType,
    SagaState,
    SagaStatus,
    StepStatus,
    UndoStatus,
)
from pivotal.tracebacks import from_exception

_UNDO_ENDED = (UndoStatus.DONE, UndoStatus.PARTIAL, UndoStatus.LAPSED, UndoStatus.RESOLVED)
_UNDO_OPEN = (UndoStatus.STARTED, UndoStatus.RETRY_WAIT, UndoStatus.DEAD_LETTERED)
# how an undo call that raised ended, by what ``classify`` made of it (abandoned aside)
_UNDO_END = {
    Outcome.TRANSIENT: End.TRANSIENT,
    Outcome.UNKNOWN: End.UNKNOWN,
    Outcome.PERMANENT: End.NO_EFFECT,
    Outcome.ABORT: End.ABORT,
}


class Backward(Forward):
    """A saga's compensation and its dead letters."""

    __slots__ = ()

    async def compensate(self) -> None:
        """Undo, newest outcome first, every compensable step that may have taken effect."""
        for r in self.state.to_undo:
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
        can land any more and its lookup's declared lag has passed, then look it up by its
        key. Found: its result is recorded and the undo gets it. Not found: it took no
        effect, and nothing is undone (it is recorded failed). Nobody can tell (no lookup,
        or one that raised): the undo is called by its key (it treats "not found" as done),
        unless the step opted in to one settling repeat (``repeat_before_undo``).
        True: undo it."""
        rec = self.state.steps[index]
        if rec.status is StepStatus.SUCCEEDED or rec.undo_attempts > 0:
            return True  # its result is known, or its undo has begun: never act again
        step = self.step_of(index)
        now = self.clock.now()
        seen_by = self._seen_by(index)
        facts = Facts(
            repeatable=_repeatable(step),
            can_land=_open(rec.doubt_until, now),
            lookup_lags=_open(seen_by, now),
            repeat_before_undo=step.repeat_before_undo,
            repeated=rec.settle_attempt is not None,
        )
        if decide(Phase.UNDOING, Tick.NOW, facts).do is Do.WAIT:
            until = max(t for t in (rec.doubt_until, seen_by) if t is not None)
            await self._undo_wait_recorded(index, until)
            await self._wait_until(until)
            facts = replace(facts, can_land=False, lookup_lags=False)
            decide(Phase.UNDOING, Tick.NOW, facts)
        found, result = await self._lookup(index, rec.attempts)
        do = decide(Phase.UNDOING, found, facts).do
        if do is Do.UNDO:
            await self._succeed(index, result, via="lookup")
            return True
        if do is Do.FAIL:
            rec = self.state.steps[index]
            error = f"{rec.error or 'its outcome was not known'}; its lookup found no effect"
            await self._fail(index, rec.attempts, f"{error}: nothing to undo", "not_found")
            return False
        if do is Do.REPEAT:
            return await self._repeat(index)
        rec = self.state.steps[index]
        if rec.status is StepStatus.STARTED:  # its last attempt never told
            error = f"attempt {rec.attempts} was interrupted before its outcome was recorded"
            await self._unknown(index, rec.attempts, error, doubt=rec.doubt_until)
        return True  # undo by its key: the undo treats "not found" as undone

    def _seen_by(self, index: int) -> float | None:
        """By when the step's lookup sees whatever an attempt of it made: its declared
        ``lookup_lag`` after the last moment one could land (None: no lookup, or no lag)."""
        step, rec = self.step_of(index), self.state.steps[index]
        if step.lookup is None or not step.lookup_lag or rec.made_by is None:
            return None
        return rec.made_by + step.lookup_lag

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
        if end is End.RETURNED and decide(Phase.CALLED, end, _RETURNED).do is Do.SUCCEED:
            await self._hook(Point.AFTER_EFFECT, index)
            await self._succeed(index, jsonable(result), via="settle", messages=ctx.outbox)
            return True
        # even a refusal proves nothing here (a provider may refuse a key it has applied):
        # the undo, by the key, looks for the effect itself, once the repeat cannot land
        doubt = self.state.steps[index].doubt_until if end in MAY_HAVE_LANDED else before
        await self._unknown(index, attempt, f"settling forward: {error}", doubt=doubt)
        return True

    async def undo(self, index: int) -> None:
        """Run one step's undo until it succeeds or is parked as a dead letter, as the
        machine decides after each call (``UNDO_CALLED``): any failure but ``Permanent``,
        ``Abort`` (or an exception the step declares as "no effect") is retried with the
        same undo key while its budget lasts; an undo attempt interrupted before its
        outcome was recorded counts against the budget. Whatever may have landed keeps its
        window, in the dead letter too.
        """
        policy = self.step_of(index).undo_retry
        while True:
            rec = self.state.steps[index]
            if rec.undo_status in UNDO_SETTLED or await self._lapsed(index):
                return
            if rec.undo_status is UndoStatus.STARTED:  # its last attempt never told
                interrupted = f"undo attempt {rec.undo_attempts} was interrupted before its outcome"
                end = End.INTERRUPTED
                if await self._after_undo(index, rec.undo_attempts, end, interrupted, None):
                    return
                continue
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
            ended = await self._undo_attempt(index, attempt)
            if ended is None:
                return
            if await self._after_undo(index, attempt, *ended, before):
                return

    async def _after_undo(
        self,
        index: int,
        attempt: int,
        end: End,
        error: str,
        before: float | None,
        letter: int | None = None,
    ) -> bool:
        """Carry out what the machine decides once undo attempt ``attempt`` ended with
        ``end`` (``before``: until when earlier undo attempts may land; ``letter``: the
        retries a dead letter had, when this was one). True: the undo is parked as a dead
        letter; False: it is scheduled again."""
        rec = self.state.steps[index]
        policy = self.step_of(index).undo_retry
        facts = Facts(retries_left=letter is None and not policy.exhausted(attempt))
        do = decide(Phase.UNDO_CALLED, end, facts).do
        # whoever cut it short, an undo that may have landed keeps its window
        doubt = rec.undo_doubt_until if end in MAY_HAVE_LANDED else before
        if do is Do.DEAD_LETTER:
            retries = 0 if letter is None else letter + 1
            await self._park(index, attempt, error, retries=retries, doubt=doubt)
            return True
        await self._schedule(
            EventType.UNDO_RETRY_SCHEDULED,
            index,
            attempt,
            error,
            policy,
            doubt=doubt,
            # never beside an attempt that may still run; one that raised has ended
            not_before=doubt if do is Do.RETRY_AFTER_DOUBT else None,
        )
        return False

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

    def _undo_barred(self, index: int, *, letter: bool = False) -> bool:
        """The machine's gate before any undo call (compensation, a dead letter's retry):
        True while an attempt of the action may still land, or one of the undo may still
        run. A retry the machine scheduled inside the undo's window (its attempt raised, and
        the provider replays the undo key) is not held back by it; a dead letter's retry
        (``letter``) waits for the whole window."""
        rec, now = self.state.steps[index], self.clock.now()
        retrying = (
            not letter
            and rec.undo_status is UndoStatus.RETRY_WAIT
            and rec.undo_next_attempt_at is not None
            and rec.undo_doubt_until is not None
            and rec.undo_next_attempt_at < rec.undo_doubt_until
        )
        facts = Facts(
            can_land=_open(rec.doubt_until, now),
            undo_running=not retrying and _open(rec.undo_doubt_until, now),
        )
        return decide(Phase.UNDO_GATE, Tick.NOW, facts).do is Do.WAIT

    async def _lapsed(self, index: int) -> bool:
        """True when the step's effect is a hold that has certainly lapsed on its own: its
        undo is then recorded as lapsed, and nothing is called (see
        ``pivotal.declarations.holds``)."""
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

    async def _undo_attempt(self, index: int, attempt: int) -> tuple[End, str] | None:
        """One undo call under its intent; None when it succeeded, else how it ended and
        what it raised."""
        step = self.step_of(index)
        assert step.undo is not None
        args = self._args_or_error(index)
        if isinstance(args, str):
            return End.NO_EFFECT, args  # nothing can be called: a person must look
        ctx = self.context(index, attempt, undo=True)
        not_after = await self._intent(index, ctx, undo=True)
        call = self._call(ctx, undo=True)
        with self.telemetry.call(call):
            if call.traceparent != ctx.traceparent:
                ctx = replace(ctx, traceparent=call.traceparent)
            now = self.clock.now()  # one reading: whether the undo may start, and for how long
            if not may_start(now, not_after):  # nothing was called
                call.outcome = "not_started"
                return End.NOT_STARTED, "its deadline passed before the undo could begin"
            try:
                result = self.state.steps[index].result
                note = await self._bounded(step.undo(args, result, ctx), not_after - now)
            except Exception as exc:
                outcome = classify(exc, step.retry_on, step.no_effect_on)
                call.outcome = _outcome_name(exc, outcome)
                self._traces[index, True] = from_exception(exc)
                end = End.ABANDONED if isinstance(exc, Abandoned) else _UNDO_END[outcome]
                return end, describe(exc)
            call.outcome = "succeeded"
        decide(Phase.UNDO_CALLED, End.RETURNED, _RETURNED)
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
        if self._undo_barred(index, letter=True):
            return False  # an attempt of the undo or of the action may still land: not now
        before = rec.undo_doubt_until
        attempt = rec.undo_attempts + 1
        ended = await self._undo_attempt(index, attempt)
        if ended is not None:
            await self._after_undo(index, attempt, *ended, before, letter=retries)
            return False
        await self._settle()
        return True

    async def resolve_dead_letter(self, index: int, by: str, reason: str) -> None:
        """A person settled the undo by hand: refused (``by_hand.MayStillLand``, nothing
        recorded) while an attempt of the action or of the undo may still land."""
        by_hand.check(self.state, [index], self.clock.now(), "the dead letter's undo")
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
