"""Running a step forward: its attempts, their calls, and how each outcome is recorded
as the machine decides (a retry, a failure, an unknown, a success, a wait for doubt)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import BaseModel

from pivotal.declarations.catalogue import Step, StepContext, StepKind
from pivotal.declarations.retry import Outcome, RetryPolicy, classify
from pivotal.engine.calls import Abandoned, Calls, Cancelled
from pivotal.engine.journal import Suspended
from pivotal.engine.machine import MAY_HAVE_LANDED, Do, End, Facts, Found, Phase, decide, may_start
from pivotal.engine.values import _outcome_name, describe, jsonable
from pivotal.hooks import Point
from pivotal.moments import moment
from pivotal.sagas.outbox import ANNOUNCE_FAILED, checked_announcements
from pivotal.sagas.state import EventType, StepStatus
from pivotal.tracebacks import from_exception

_OUTCOME_REACHED = (StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.UNKNOWN)
_UNTOLD_ON_RESUME = (
    "resumed in doubt, but its lookup could not tell whether an earlier attempt took effect; "
    "it is not repeated (the provider may no longer know its key): resume the saga again "
    "once the lookup answers, or resolve it by hand"
)


class Forward(Calls):
    """One step run forward to its outcome."""

    __slots__ = ()

    async def execute(self, index: int) -> None:
        """Run one step until it reaches an outcome, retrying transient failures.

        Every call into the step's code is contained: what it raises becomes a recorded
        outcome. An attempt whose outcome was never recorded (the process stopped during the
        call) counts against the retry budget.
        """
        step = self.step_of(index)
        rec = self.state.steps[index]
        if rec.status in _OUTCOME_REACHED:
            return
        args = self._args_or_error(index)
        if isinstance(args, str):
            if rec.status is StepStatus.PENDING:  # nothing was called: no effect
                await self._fail(index, None, args, "arguments")
            else:
                await self._unknown(index, rec.attempts, args)
            return
        if rec.status is StepStatus.PENDING and step.precondition is not None:
            reason = self._precondition(step, args)
            if reason:
                await self._fail(index, None, reason, "precondition")
                return
        policy = step.policy
        resumed = rec.status is StepStatus.RETRY_WAIT and rec.attempts == 0 and rec.doubt_until
        if rec.status is StepStatus.STARTED or resumed:
            # an attempt may have taken effect (interrupted, or in doubt when a person
            # resumed the saga): a found effect settles it at once
            found, result = await self._lookup(index, rec.attempts)
            if decide(Phase.RESUMED, found, Facts()).do is Do.SUCCEED:
                await self._succeed(index, result, via="lookup")
                return
            if resumed and found is Found.CANNOT_TELL:
                # the wait for a person may have outlived the provider's record of the key:
                # a repeat could make the effect twice, so only a lookup may settle it
                await self._unknown(index, 0, _UNTOLD_ON_RESUME, doubt=rec.doubt_until)
                return
        if rec.status is StepStatus.STARTED:
            # how the attempt ended is not known: it is not called again before it cannot
            # land (a person's resume is scheduled the same way: ``SAGA_RESUMED``)
            error = f"attempt {rec.attempts} was interrupted before its outcome was recorded"
            if await self._after_call(index, rec.attempts, End.INTERRUPTED, error, None):
                return
        while True:
            rec = self.state.steps[index]
            if rec.status is StepStatus.RETRY_WAIT:
                await self._wait_until(rec.next_attempt_at)
                rec = self.state.steps[index]
                if rec.doubt_until is not None and (
                    policy.exhausted(rec.attempts) or not _repeatable(step)
                ):
                    # an earlier attempt may have taken effect, and calling again needs
                    # proof that it did not: its lookup, now that it cannot land
                    facts = self._facts_of(index, rec.attempts, End.INTERRUPTED, rec.doubt_until)
                    error, doubt = rec.error or "", rec.doubt_until
                    if await self._settle_doubt(index, rec.attempts, error, facts, doubt):
                        return
                    continue  # called again (nothing landed), or a durable wait recorded
            attempt = rec.attempts + 1
            ctx = self.context(index, attempt)
            if self.options.pause_before(index):
                raise Suspended(f"paused before step {index}")
            not_after = await self._intent(index, ctx)
            end, result, error = await self._call_action(index, step, args, ctx, not_after)
            if end is End.RETURNED and decide(Phase.CALLED, end, _RETURNED).do is Do.SUCCEED:
                await self._hook(Point.AFTER_EFFECT, index)
                await self._succeed(index, jsonable(result), messages=ctx.outbox)
                return
            if await self._after_call(index, attempt, end, error, rec.doubt_until):
                return

    async def _call_action(
        self, index: int, step: Step, args: BaseModel, ctx: StepContext, not_after: float
    ) -> tuple[End, Any, str]:
        """Call the action, bounded by ``not_after`` (fixed before its intent): how it ended,
        its result, and what it raised."""
        call = self._call(ctx)
        with self.telemetry.call(call):
            if call.traceparent != ctx.traceparent:  # an observer started a span
                ctx = replace(ctx, traceparent=call.traceparent)
            now = self.clock.now()  # one reading: whether the call may start, and for how long
            if not may_start(now, not_after):
                call.outcome = "not_started"
                return End.NOT_STARTED, None, "its deadline passed before the call could begin"
            try:
                result = await self._bounded(step.action(args, ctx), not_after - now)
            except Exception as exc:
                outcome = classify(exc, step.retry_on, step.no_effect_on)
                self._traces[index, False] = from_exception(exc)
                call.outcome = _outcome_name(exc, outcome)
                return _end_of(exc, outcome), None, describe(exc)
            call.outcome = "succeeded"
            return End.RETURNED, result, ""

    def _facts_of(self, index: int, attempt: int, end: End, before: float | None = None) -> Facts:
        """What the machine reads about step ``index`` after its attempt ``attempt`` ended
        with ``end`` (``before``: until when earlier attempts may land)."""
        step, rec = self.step_of(index), self.state.steps[index]
        doubt = rec.doubt_until
        return Facts(
            retries_left=not step.policy.exhausted(attempt),
            repeatable=_repeatable(step),
            earlier_doubt=before is not None,
            wants_retry=end in _WANTS_RETRY,
            aborted=end is End.ABORT,
            compensable=step.kind is StepKind.COMPENSABLE,
            can_land=doubt is not None and self.clock.now() < doubt,
        )

    async def _after_call(
        self, index: int, attempt: int, end: End, error: str, before: float | None
    ) -> bool:
        """Carry out what the machine decides once attempt ``attempt`` ended with ``end``
        (``before``: until when earlier attempts may land). True: the step has its outcome
        (or waits, settled later); False: call it again."""
        step = self.step_of(index)
        # whoever cut a call short (our bound, a client library's timeout, a lost pass), it
        # may land until its deadline; only a call that provably took no effect does not
        landed = end in MAY_HAVE_LANDED
        doubt = self.state.steps[index].doubt_until if landed else before
        facts = self._facts_of(index, attempt, end, before)
        do = decide(Phase.CALLED, end, replace(facts, can_land=_open(doubt, self.clock.now()))).do
        if do is Do.FAIL:
            await self._fail(index, attempt, error, _FAILED_AS[end])
            return True
        if do is Do.UNKNOWN:  # stopped at a report: only earlier attempts may still land
            await self._unknown(index, attempt, error, doubt=before, end=end)
            return True
        if do in (Do.RETRY, Do.RETRY_AFTER_DOUBT):
            not_before = doubt if do is Do.RETRY_AFTER_DOUBT else None
            await self._schedule(
                EventType.STEP_RETRY_SCHEDULED,
                index,
                attempt,
                error,
                step.policy,
                doubt=doubt,
                not_before=not_before,
                end=end,
            )
            return False
        facts = replace(facts, earlier_doubt=doubt is not None)
        return await self._settle_doubt(index, attempt, error, facts, doubt, end)

    async def _doubt_wait(
        self, index: int, attempt: int, error: str, at: float, doubt: float | None, end: End
    ) -> None:
        """Record that the step waits, in doubt until ``doubt``, for its lookup at ``at``."""
        await self.emit(
            self.event(
                EventType.STEP_RETRY_SCHEDULED,
                index,
                attempt,
                error=f"{error}; it may still take effect until {moment(doubt or at)}",
                next_attempt_at=at,
                doubt_until=doubt,
                running=end in _RUNNING,
            )
        )

    @staticmethod
    def _precondition(step: Step, args: BaseModel) -> str | None:
        """Why the precondition does not hold (a raising one does not hold), else None."""
        try:
            reason = step.precondition(args) if step.precondition else None
        except Exception as exc:
            return f"precondition raised {describe(exc)}"
        return f"precondition no longer holds: {reason}" if reason else None

    async def _fail(self, index: int, attempt: int | None, error: str, outcome: str) -> None:
        """The step took no effect."""
        await self.emit(
            self.event(EventType.STEP_FAILED, index, attempt, error=error, outcome=outcome)
        )

    async def _unknown(
        self,
        index: int,
        attempt: int,
        error: str,
        *,
        doubt: float | None = None,
        end: End | None = None,
    ) -> None:
        """The outcome is not known; ``doubt``: until when an attempt may still land;
        ``end``: how the last call ended, when one did (see ``_RUNNING``)."""
        extra = {} if end is None else {"running": end in _RUNNING}
        await self.emit(
            self.event(
                EventType.STEP_UNKNOWN, index, attempt, error=error, doubt_until=doubt, **extra
            )
        )

    async def _succeed(
        self,
        index: int,
        result: Any,
        via: str = "action",
        messages: list[dict[str, Any]] | None = None,
    ) -> None:
        """Record the step's success (held back for the next commit) with its messages:
        those its call published (``messages``: none when a lookup established it) and
        those its ``announce`` derives from ``result``, in the same transaction."""
        messages = [*(messages or ()), *self._announced(index, result)]
        extra: dict[str, Any] = {"messages": messages} if messages else {}
        await self.emit(
            self.event(EventType.STEP_SUCCEEDED, index, result=result, via=via, **extra),
            defer=True,
        )

    def _announced(self, index: int, result: Any) -> list[dict[str, Any]]:
        """The messages the step's ``announce`` derives from its recorded result. One that
        raises, or returns what cannot be kept, is contained: the success stands (the effect
        exists) and a ``step.announce_failed`` message says why, never a silent loss."""
        announce = self.step_of(index).announce
        if announce is None:
            return []
        try:
            return checked_announcements(announce(self.args_of(index), result))
        except Exception as exc:
            return [{"type": ANNOUNCE_FAILED, "data": {"error": describe(exc)}}]

    async def _schedule(
        self,
        type: EventType,
        index: int,
        attempt: int,
        error: str,
        policy: RetryPolicy,
        *,
        doubt: float | None = None,
        not_before: float | None = None,
        end: End | None = None,
    ) -> None:
        """Schedule the next attempt after backoff, and never before ``not_before``;
        ``doubt``: until when an earlier attempt may land; ``end``: how the call ended (see
        ``_RUNNING``)."""
        at = self.clock.now() + policy.delay(attempt, self.rng)
        if not_before is not None:
            at = max(at, not_before)
        extra = {} if end is None else {"running": end in _RUNNING}
        await self.emit(
            self.event(
                type, index, attempt, error=error, next_attempt_at=at, doubt_until=doubt, **extra
            )
        )

    async def _settle_doubt(
        self,
        index: int,
        attempt: int,
        error: str,
        facts: Facts,
        doubt: float | None,
        end: End = End.INTERRUPTED,
    ) -> bool:
        """An attempt may have taken effect (``doubt``: until when one may land): once none
        can and the lookup's ``lookup_lag`` has passed, its lookup settles it, as the
        machine decides. A wait longer than the pass may take is recorded, when a retry
        waits on the answer; else nobody can tell yet. True: the step has its outcome;
        False: go on (called again, or a durable wait was recorded)."""
        now = self.clock.now()
        # the lag counts from the last moment an attempt could land, never from now (a pass
        # resumed later must not push it further out: it would never be over)
        ready = (now if doubt is None else doubt) + self.step_of(index).lookup_lag
        found, result = await self._lookup(index, attempt)  # a found effect counts at once
        # "not found" counts only once nothing can land; it is waited for only where it
        # decides something (a retry, or a pivot compensating rather than going to a
        # person): a compensable step is looked up again before its undo either way, a
        # retriable one goes to a person either way
        decisive = (facts.wants_retry and facts.retries_left) or (
            self.step_of(index).kind is StepKind.PIVOT
        )
        if found is Found.NOT_FOUND and ready > now and not decisive:
            found = Found.CANNOT_TELL
        elif found is Found.NOT_FOUND and ready > now:
            if ready - now > self.options.max_inline_wait or self.options.should_stop():
                if facts.wants_retry and facts.retries_left:
                    await self._doubt_wait(index, attempt, error, ready, doubt, end)
                    return False
                found = Found.CANNOT_TELL  # it may still land, or the lookup not yet see it
            else:
                await self.clock.sleep(ready - now)
                found, result = await self._lookup(index, attempt)
        do = decide(Phase.SETTLED, found, facts).do
        tried = f"after {attempt} attempts"
        if do is Do.SUCCEED:
            await self._succeed(index, result, via="lookup")
        elif do is Do.FAIL:
            await self._fail(
                index, attempt, f"{error} ({tried}; lookup found no effect)", "exhausted"
            )
        elif do is Do.RETRY:  # provably nothing landed, and none can: call it again
            await self.emit(
                self.event(
                    EventType.STEP_RETRY_SCHEDULED,
                    index,
                    attempt,
                    error=f"{error} (lookup found no effect: called again)",
                    next_attempt_at=self.clock.now(),
                    # none can land and the declared lag passed: provably no effect, so
                    # no window is left (kept, the next pass would settle it again)
                    doubt_until=None,
                    running=False,
                )
            )
            return False
        else:
            told = "lookup found no effect" if found is Found.NOT_FOUND else "outcome unknown"
            await self._unknown(index, attempt, f"{error} ({tried}; {told})", doubt=doubt, end=end)
        return True


# the ends after which the call itself may still be running (cut off by its bound, or its
# pass ended mid-call): recorded as ``running`` on the event that follows, so that a
# person's resume does not call the step again before it cannot land (``SAGA_RESUMED``)
_RUNNING = frozenset({End.ABANDONED, End.INTERRUPTED})
_RETURNED = Facts()  # a call that returned: no fact decides it
_WANTS_RETRY = frozenset({End.TRANSIENT, End.ABANDONED, End.INTERRUPTED, End.NOT_STARTED})
_FAILED_AS = {End.NO_EFFECT: "permanent", End.ABORT: "abort", End.NOT_STARTED: "not_started"}


def _end_of(exc: BaseException, outcome: Outcome) -> End:
    if isinstance(exc, Abandoned):
        return End.ABANDONED
    if isinstance(exc, Cancelled):
        return End.CANCELLED
    return {
        Outcome.TRANSIENT: End.TRANSIENT,
        Outcome.PERMANENT: End.NO_EFFECT,
        Outcome.ABORT: End.ABORT,
        Outcome.UNKNOWN: End.UNKNOWN,
    }[outcome]


def _repeatable(step: Step) -> bool:
    """Whether the step's provider deduplicates by key, so calling it again is safe."""
    return step.repeatable and step.retryable


def _open(doubt: float | None, now: float) -> bool:
    """Whether an attempt in doubt until ``doubt`` may still land at ``now``."""
    return doubt is not None and now < doubt
