"""The probes: a bounded series of calls to one step's action, lookup and undo, each row
naming a promise the catalogue relies on and what the provider did with it.

Every call goes through a ``Session``: bounded by the step's timeout, counted against the
check's budget, and, when it made an effect, noted so that the check undoes it at the end
(or says it could not). Keys are made from a saga id no saga has (``check-<run>-<step>``)
and an index per probe, so every probe starts from a key the provider has never seen.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from pivotal.clock import Clock
from pivotal.declarations.catalogue import Catalogue, Step, StepContext, action_key, undo_key
from pivotal.declarations.retry import Outcome, classify
from pivotal.kinds import StepKind
from pivotal.provider_check.model import (
    ORDER,
    Promise,
    Row,
    StepFindings,
    StepReport,
    Verdict,
    duration,
    reuse_span,
    suggested,
)

# the index of each probe's key within a step's check
REPLAY, CONCURRENT, UNMADE_LOOKUP, UNMADE_UNDO = range(4)
CUT_OFFS = 4  # and 5: a call cut off at each point
REFUSALS = 10  # and on: one per refusal given
_ANSWERED, _UNSEEN = object(), object()  # what a cut-off call came to, but a landing


@dataclass(frozen=True)
class Options:
    """How far a check may go: ``budget`` provider calls in all (the clean-up's undos
    come on top, one per effect made at most); ``wait`` seconds at most for a lookup to
    find an effect or a cut-off call to land, asked every ``poll`` seconds; a key reused
    ``window`` seconds after its first use (0: not probed)."""

    budget: int = 200
    wait: float = 10.0
    poll: float = 0.1
    window: float = 1.0

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise ValueError("budget must be at least 1 call")
        if not (0 < self.poll <= self.wait < math.inf):
            raise ValueError("a check needs 0 < poll <= wait (finite)")
        if not 0 <= self.window < math.inf:
            raise ValueError("window must be 0 or more seconds (finite)")


@dataclass(frozen=True)
class Refusal:
    """Arguments the sandbox refuses (a declined card, a SKU out of stock), and why."""

    args: BaseModel
    why: str = ""


class BudgetSpent(Exception):
    """The check's budget of calls is spent: the probes left are not run."""


def as_json(value: Any) -> Any:
    return to_jsonable_python(value, fallback=str)


def short(value: Any, limit: int = 80) -> str:
    text = str(as_json(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def described(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {short(text, 120)}" if text else type(exc).__name__


async def attempt(call: Awaitable[Any]) -> tuple[Any, Exception | None]:
    """What a provider call answered, or what it raised; the end of the budget (and a
    cancellation) goes on up."""
    try:
        return await call, None
    except BudgetSpent:
        raise
    except Exception as exc:
        return None, exc


@dataclass
class Session:
    """One check's calls to one catalogue's providers."""

    catalogue: Catalogue
    clock: Clock
    options: Options
    run: str  # a word of the check's own, in every key it makes
    spent: int = 0
    # per step: the index of every effect made, its arguments and result, not yet undone
    made: dict[str, dict[int, tuple[BaseModel, Any]]] = field(default_factory=dict)

    def saga_id(self, step: Step) -> str:
        return f"check-{self.run}-{step.name}"

    def context(self, step: Step, index: int, *, undo: bool = False) -> StepContext:
        saga = self.saga_id(step)
        forward = action_key(saga, index)
        key = undo_key(saga, index) if undo else forward
        return StepContext(saga, index, step.name, key, forward, 1)

    def spend(self) -> None:
        if self.spent >= self.options.budget:
            raise BudgetSpent(f"the budget of {self.options.budget} calls was spent")
        self.spent += 1

    async def _bounded(self, step: Step, call: Awaitable[Any]) -> Any:
        async with asyncio.timeout(self.catalogue.timeout_of(step)):
            return await call

    async def act(self, step: Step, args: BaseModel, index: int) -> Any:
        self.spend()
        made = self.made.setdefault(step.name, {})
        # until it answers, it may have taken effect: the clean-up undoes it by its key
        made.setdefault(index, (args, None))
        result = await self._bounded(step, step.action(args, self.context(step, index)))
        made[index] = (args, result)
        return result

    async def lookup(self, step: Step, args: BaseModel, index: int) -> Any:
        assert step.lookup is not None
        self.spend()
        return await self._bounded(step, step.lookup(args, self.context(step, index)))

    async def undo(self, step: Step, args: BaseModel, result: Any, index: int) -> Any:
        assert step.undo is not None
        self.spend()
        context = self.context(step, index, undo=True)
        done = await self._bounded(step, step.undo(args, as_json(result), context))
        self.made.get(step.name, {}).pop(index, None)
        return done

    async def found(
        self, step: Step, args: BaseModel, index: int, since: float, bound: float
    ) -> tuple[Any, float] | None:
        """The effect made with key ``index`` as the lookup finds it, and how long after
        ``since`` the lookup that first found it was asked (0 for the first lookup: what
        landed before ``since`` is found at once); None when not within ``bound`` seconds."""
        asked = 0.0
        while True:
            got = await self.lookup(step, args, index)
            if got is not None:
                return got, asked
            waited = max(0.0, self.clock.now() - since)
            if waited >= bound:
                return None
            await self.clock.sleep(min(self.options.poll, bound - waited))
            asked = max(0.0, self.clock.now() - since)


def _row(step: Step, promise: Promise, verdict: Verdict, observed: str, implies: str = "") -> Row:
    return Row(step=step.name, promise=promise, verdict=verdict, observed=observed, implies=implies)


@dataclass
class StepCheck:
    """The probes of one step, in order, sharing what earlier ones made."""

    s: Session
    step: Step
    args: BaseModel
    refusals: Sequence[Refusal]
    rows: list[Row] = field(default_factory=list)
    seen: StepFindings = field(default_factory=StepFindings)
    first: Any = None  # the replay key's first result (None: not made)
    first_at: float = 0.0
    first_took: float = 0.0  # how long the first call took, on the check's clock
    # why what the lookup says cannot be relied on (it missed an effect, or found one
    # never made); None: it can
    untrusted: str | None = None

    async def run(self) -> StepReport:
        # each probe, with the promises its rows are about
        probes: list[tuple[Callable[[], Awaitable[None]], tuple[Promise, ...]]] = [
            (self.replay, (Promise.REPLAY, Promise.LOOKUP)),
            (self.concurrent, (Promise.CONCURRENT,)),
            (self.unmade_lookup, (Promise.LOOKUP_UNMADE,)),
            (self.window, (Promise.WINDOW,)),
            (self.undo_twice, (Promise.UNDO_TWICE,)),
            (self.unmade_undo, (Promise.UNDO_UNMADE,)),
            (self.cut_off, (Promise.CUT_OFF,)),
            (self.refused, (Promise.REFUSAL,)),
        ]
        for n, (probe, promises) in enumerate(probes):
            try:
                await probe()
            except BudgetSpent as spent:
                self._unknown([p for _, of in probes[n:] for p in of], f"not probed: {spent}")
                break
            except Exception as exc:  # a lookup or an undo raised where it must answer
                said = f"{described(exc)} was raised"
                self.untrusted = self.untrusted or said
                self._unknown(promises, f"the probe stopped: {said}")
        left = await self.clean_up()
        return StepReport(
            step=self.step.name,
            kind=self.step.kind.value,
            rows=sorted(self.rows, key=lambda row: ORDER[row.promise]),
            left=left,
            observed=self.seen,
        )

    def _unknown(self, promises: Sequence[Promise], why: str) -> None:
        """A row saying ``why`` for each of ``promises`` that has none yet."""
        have = {row.promise for row in self.rows}
        for promise in promises:
            if promise not in have:
                self.add(promise, Verdict.UNKNOWN, why)

    def add(self, promise: Promise, verdict: Verdict, observed: str, implies: str = "") -> None:
        self.rows.append(_row(self.step, promise, verdict, observed, implies))

    # -- one key, one effect ------------------------------------------------------------

    def _doubled(self, promise: Promise, observed: str) -> None:
        """One key made two effects: what the catalogue relies on decides the verdict."""
        self.seen.replays = False
        if self.step.repeatable:
            self.add(promise, Verdict.BROKEN, observed, "declare repeatable=False")
        else:
            self.add(promise, Verdict.COVERED, observed, "repeatable=False, as declared")

    async def replay(self) -> None:
        step, args = self.step, self.args
        started = self.s.clock.now()
        first, exc = await attempt(self.s.act(step, args, REPLAY))
        if exc is not None:
            self.add(
                Promise.REPLAY,
                Verdict.UNKNOWN,
                f"the action refused the sandbox arguments: {described(exc)}",
                "give arguments the sandbox accepts",
            )
            return
        self.first, self.first_at = first, self.s.clock.now()
        self.first_took = max(0.0, self.first_at - started)
        await self._lookup_lag(REPLAY, first)
        again, exc = await attempt(self.s.act(step, args, REPLAY))
        if exc is not None:
            self._second_call_raised(Promise.REPLAY, exc)
            return
        if as_json(again) == as_json(first):
            self.seen.replays = self.seen.replays is not False
            self.add(Promise.REPLAY, Verdict.KEPT, "the second call answered the first's result")
        else:
            self._doubled(
                Promise.REPLAY,
                f"the second call answered {short(again)}, the first {short(first)}",
            )

    def _second_call_raised(self, promise: Promise, exc: BaseException) -> None:
        outcome = classify(exc, self.step.retry_on, self.step.no_effect_on)
        said = f"a call with a key already used raised {described(exc)}"
        if outcome is Outcome.PERMANENT:
            self.add(
                promise,
                Verdict.BROKEN,
                said + ", which the step takes for a refusal with no effect",
                "the engine would record no effect where the first call made one",
            )
        elif self.step.lookup is not None:
            self.add(promise, Verdict.COVERED, said, "the engine finds the effect by lookup")
        else:
            self.add(promise, Verdict.BROKEN, said, "declare a lookup, or a provider that replays")

    async def concurrent(self) -> None:
        step, args = self.step, self.args
        both = await asyncio.gather(
            self.s.act(step, args, CONCURRENT),
            self.s.act(step, args, CONCURRENT),
            return_exceptions=True,
        )
        for got in both:
            if isinstance(got, BudgetSpent | asyncio.CancelledError):
                raise got
        answers = [got for got in both if not isinstance(got, BaseException)]
        refused = [got for got in both if isinstance(got, BaseException)]
        if not answers:
            self.add(
                Promise.CONCURRENT,
                Verdict.UNKNOWN,
                f"both calls raised: {described(refused[0])}",
                "give arguments the sandbox accepts",
            )
            return
        if refused:
            outcome = classify(refused[0], step.retry_on, step.no_effect_on)
            if outcome is Outcome.PERMANENT:
                self._second_call_raised(Promise.CONCURRENT, refused[0])
                return
            # the refused one, retried as the engine would: does it replay?
            retried, exc = await attempt(self.s.act(step, args, CONCURRENT))
            if exc is not None:
                self._second_call_raised(Promise.CONCURRENT, exc)
                return
            answers.append(retried)
        texts = {repr(as_json(a)) for a in answers}
        if len(texts) == 1:
            if self.seen.replays is None:
                self.seen.replays = True
            said = "both calls answered one result"
            if refused:
                said = (
                    f"one call was refused while the other was in flight "
                    f"({described(refused[0])}), and its retry answered the same result"
                )
            self.add(Promise.CONCURRENT, Verdict.KEPT, said)
        else:
            self._doubled(
                Promise.CONCURRENT,
                f"two calls at once answered two results: {short(answers[0], 50)} and "
                f"{short(answers[1], 50)}",
            )

    # -- lookups --------------------------------------------------------------------------

    async def _lookup_lag(self, index: int, made: Any) -> None:
        step = self.step
        if step.lookup is None:
            self.add(
                Promise.LOOKUP,
                Verdict.UNKNOWN,
                "the step declares no lookup",
                "" if not step.repeatable else "a lost reply is settled only by calling again",
            )
            return
        since = self.s.clock.now()
        found = await self.s.found(step, self.args, index, since, self.s.options.wait)
        if found is None:
            self.untrusted = "the lookup missed an effect"
            self.add(
                Promise.LOOKUP,
                Verdict.BROKEN,
                f"not found {duration(self.s.options.wait)} after the call answered",
                "fix the lookup (it must find an effect by ctx.key), or declare none",
            )
            return
        got, lag = found
        self.seen.lookup_lag = lag
        differs = "" if as_json(got) == as_json(made) else f" (it answered {short(got, 50)})"
        if lag <= step.lookup_lag:
            when = "at once" if lag == 0 else f"{duration(lag)} after the call answered"
            self.add(Promise.LOOKUP, Verdict.KEPT, f"found {when}{differs}")
        else:
            self.add(
                Promise.LOOKUP,
                Verdict.BROKEN,
                f"found only {duration(lag)} after the call answered{differs}; the step declares "
                f"lookup_lag={step.lookup_lag:g}",
                f"declare lookup_lag={suggested(lag)}",
            )

    async def unmade_lookup(self) -> None:
        if self.step.lookup is None:
            self.add(Promise.LOOKUP_UNMADE, Verdict.UNKNOWN, "the step declares no lookup")
            return
        got = await self.s.lookup(self.step, self.args, UNMADE_LOOKUP)
        if got is None:
            self.add(Promise.LOOKUP_UNMADE, Verdict.KEPT, "nothing found")
        else:
            self.untrusted = "the lookup found an effect never made"
            self.add(
                Promise.LOOKUP_UNMADE,
                Verdict.BROKEN,
                f"found {short(got)} for a key never used",
                "the engine would take a call that never landed for done: fix the lookup",
            )

    # -- the idempotency window -----------------------------------------------------------

    async def window(self) -> None:
        wait, span = self.s.options.window, reuse_span(self.s.catalogue, self.step)
        if wait <= 0 or self.first is None or self.seen.replays is False:
            why = (
                "the window was not asked for"
                if wait <= 0
                else "no effect was made"
                if self.first is None
                else "a key used again is not replayed at all"
            )
            self.add(Promise.WINDOW, Verdict.UNKNOWN, f"not probed: {why}")
            return
        left = self.first_at + wait - self.s.clock.now()
        if left > 0:
            await self.s.clock.sleep(left)
        again, exc = await attempt(self.s.act(self.step, self.args, REPLAY))
        if exc is not None:
            self._second_call_raised(Promise.WINDOW, exc)
            return
        waited = max(0.0, self.s.clock.now() - self.first_at)
        if as_json(again) == as_json(self.first):
            observed = f"remembered {duration(waited)} after its first use"
            if wait >= span:  # it slept until first use + wait, at least
                self.add(Promise.WINDOW, Verdict.KEPT, observed)
            else:
                self.add(
                    Promise.WINDOW,
                    Verdict.UNKNOWN,
                    f"{observed}; the catalogue may reuse it up to {duration(span)} later",
                    f"check with --window {math.ceil(span)} to prove it",
                )
            return
        self.seen.forgets_key_within = waited
        self.seen.replays = False
        self.add(
            Promise.WINDOW,
            Verdict.BROKEN,
            f"forgotten within {duration(waited)}: a new effect ({short(again, 50)}); "
            f"the catalogue may reuse a key up to {duration(span)} after its first use",
            "shorten the retries and the approval's expiry, or use a provider that keeps keys",
        )

    # -- undos ----------------------------------------------------------------------------

    async def undo_twice(self) -> None:
        step = self.step
        if step.kind is not StepKind.COMPENSABLE:
            self.add(Promise.UNDO_TWICE, Verdict.UNKNOWN, f"a {step.kind.value} step: no undo")
            return
        if self.first is None:
            self.add(Promise.UNDO_TWICE, Verdict.UNKNOWN, "not probed: no effect was made")
            return
        note, exc = await attempt(self.s.undo(step, self.args, self.first, REPLAY))
        if exc is not None:
            self.add(
                Promise.UNDO_TWICE,
                Verdict.UNKNOWN,
                f"the undo raised {described(exc)}",
                "its effect stays in the sandbox",
            )
            return
        again, exc = await attempt(self.s.undo(step, self.args, self.first, REPLAY))
        if exc is not None:
            self.add(
                Promise.UNDO_TWICE,
                Verdict.BROKEN,
                f"the second undo raised {described(exc)}",
                "an undo whose reply was lost is called again: make it answer 'done'",
            )
            return
        self.add(
            Promise.UNDO_TWICE,
            Verdict.KEPT,
            f"first: {short(note, 40)}; second: {short(again, 40)}",
        )

    async def unmade_undo(self) -> None:
        step = self.step
        if step.kind is not StepKind.COMPENSABLE:
            self.add(Promise.UNDO_UNMADE, Verdict.UNKNOWN, f"a {step.kind.value} step: no undo")
            return
        note, exc = await attempt(self.s.undo(step, self.args, None, UNMADE_UNDO))
        if exc is not None:
            self.add(
                Promise.UNDO_UNMADE,
                Verdict.BROKEN,
                f"raised {described(exc)}",
                "an undo of a call that never landed must treat 'not found' as done "
                "(return NothingToUndo): the engine would retry it until dead-lettered",
            )
            return
        self.add(Promise.UNDO_UNMADE, Verdict.KEPT, f"answered {short(note, 60)}")

    # -- a call cut off by its client -----------------------------------------------------

    async def cut_off(self) -> None:
        """Calls cut off by their client partway: at half and at nine tenths of what the
        first call took (its request is on its way by then), or, when that call took no
        time this clock can see, at its first wait. Each is watched by the lookup."""
        took = self.first_took
        cuts: list[float | None] = [took * 0.5, took * 0.9] if took > 0.001 else [None]
        seen: list[tuple[str, float | None]] = []  # (where it was cut, when it landed)
        for n, cut in enumerate(cuts):
            at = "at its first wait" if cut is None else f"after {duration(cut)}"
            landed = await self._cut(CUT_OFFS + n, cut)
            if landed is _ANSWERED:
                continue
            if landed is _UNSEEN:
                why = self.untrusted or "the step declares no lookup"
                self.add(
                    Promise.CUT_OFF, Verdict.UNKNOWN, f"whether it landed cannot be seen: {why}"
                )
                return
            seen.append((at, landed if isinstance(landed, float) else None))
        if not seen:
            self.add(
                Promise.CUT_OFF,
                Verdict.UNKNOWN,
                "it answered before any cut-off: no client timeout cut it",
            )
            return
        self._judge_cut_offs(seen)

    def _judge_cut_offs(self, seen: list[tuple[str, float | None]]) -> None:
        step, grace = self.step, self.s.catalogue.doubt_grace
        landings = [(at, landed) for at, landed in seen if landed is not None]
        if not landings:
            watched = self.s.options.wait
            where = ", ".join(at for at, _ in seen)
            said = f"cut off {where}: did not land within {duration(watched)}"
            if watched >= grace + step.lookup_lag:
                self.add(Promise.CUT_OFF, Verdict.KEPT, said)
            else:
                self.add(
                    Promise.CUT_OFF,
                    Verdict.UNKNOWN,
                    f"{said}; the engine waits {duration(grace + step.lookup_lag)}",
                    f"check with --wait {math.ceil(grace + step.lookup_lag)}",
                )
            return
        at, latest = max(landings, key=lambda pair: pair[1] or 0.0)
        assert latest is not None
        self.seen.lands_after_cut_off = latest
        said = f"cut off {at}, it landed {duration(latest)} later"
        if latest <= grace:
            self.add(Promise.CUT_OFF, Verdict.KEPT, f"{said} (doubt_grace {duration(grace)})")
        else:
            self.add(
                Promise.CUT_OFF,
                Verdict.BROKEN,
                f"{said}; the catalogue's doubt_grace is {duration(grace)}",
                f"declare doubt_grace={suggested(latest)} on the catalogue",
            )

    async def _cut(self, index: int, cut: float | None) -> float | object:
        """One call cut off after ``cut`` seconds (None: at its first wait): how long after
        the cut-off its effect landed (a float), None when it did not within the wait,
        ``_ANSWERED`` when it answered first, ``_UNSEEN`` when no lookup can tell."""
        step, s = self.step, self.s
        s.spend()
        call = asyncio.ensure_future(step.action(self.args, s.context(step, index)))
        if cut is None:
            await asyncio.sleep(0)  # it starts, and goes as far as its first wait
        else:
            await asyncio.wait({call}, timeout=cut)
        if call.done():
            if not call.cancelled() and call.exception() is None:
                s.made.setdefault(step.name, {})[index] = (self.args, call.result())
            return _ANSWERED
        call.cancel()
        # an action that swallows its cancellation is waited for no longer than its bound
        await asyncio.wait({call}, timeout=s.catalogue.timeout_of(step))
        if call.done() and not call.cancelled() and call.exception() is None:
            # it finished despite the cancel: it took its effect
            s.made.setdefault(step.name, {})[index] = (self.args, call.result())
        # it may land: the clean-up undoes it by its key (None: its result is not known)
        s.made.setdefault(step.name, {}).setdefault(index, (self.args, None))
        cut_at = s.clock.now()
        if step.lookup is None or self.untrusted:
            return _UNSEEN
        found = await s.found(step, self.args, index, cut_at, s.options.wait)
        if found is None:
            return None
        got, seen_after = found
        s.made.setdefault(step.name, {})[index] = (self.args, got)
        # it landed by the lookup's lag before it was seen
        return max(0.0, seen_after - (self.seen.lookup_lag or 0.0))

    # -- refusals -------------------------------------------------------------------------

    async def refused(self) -> None:
        if not self.refusals:
            self.add(
                Promise.REFUSAL,
                Verdict.UNKNOWN,
                "not probed: no arguments the sandbox refuses were given ('refused')",
            )
            return
        for n, refusal in enumerate(self.refusals):
            await self._refusal(REFUSALS + n, refusal)

    async def _refusal(self, index: int, refusal: Refusal) -> None:
        step, s = self.step, self.s
        label = f"{refusal.why}: " if refusal.why else ""
        _, raised = await attempt(s.act(step, refusal.args, index))
        if raised is None:
            self.add(
                Promise.REFUSAL,
                Verdict.UNKNOWN,
                f"{label}not refused: the call answered",
                "give arguments the sandbox refuses",
            )
            return
        outcome = classify(raised, step.retry_on, step.no_effect_on)
        said = f"{label}refused with {described(raised)}"
        if step.lookup is None or self.untrusted:
            why = self.untrusted or "the step declares no lookup"
            self.add(
                Promise.REFUSAL,
                Verdict.UNKNOWN,
                f"{said}; whether it left an effect cannot be seen: {why}",
            )
            return
        if self.seen.lookup_lag or step.lookup_lag:
            await s.clock.sleep(max(self.seen.lookup_lag or 0.0, step.lookup_lag))
        got = await s.lookup(step, refusal.args, index)
        if got is not None:
            s.made.setdefault(step.name, {})[index] = (refusal.args, got)
        else:  # a lookup trusted so far found none, after its lag
            s.made.get(step.name, {}).pop(index, None)
        no_effect = outcome is Outcome.PERMANENT
        kind = type(raised).__name__
        if got is not None and no_effect:
            self.add(
                Promise.REFUSAL,
                Verdict.BROKEN,
                f"{said}, taken for no effect, but the lookup found {short(got, 50)}",
                f"take {kind} out of no_effect_on (or raise something other than Permanent)",
            )
        elif got is not None:
            self.add(
                Promise.REFUSAL,
                Verdict.COVERED,
                f"{said}, and it left an effect; the step keeps such a call in doubt",
            )
        elif no_effect:
            self.add(Promise.REFUSAL, Verdict.KEPT, f"{said}, taken for no effect: none found")
        else:
            self.add(
                Promise.REFUSAL,
                Verdict.KEPT,
                f"{said}, kept in doubt by the step (looked up, retried): none found",
                f"no_effect_on=({kind},) if the provider documents it as no effect",
            )

    # -- leaving the sandbox as it was ----------------------------------------------------

    async def clean_up(self) -> list[str]:
        """Undo every effect the probes made and did not undo; the keys of those that
        stay (no undo, or it failed). The budget does not stop the clean-up: it makes
        one call an effect at most."""
        step, s = self.step, self.s
        left: list[str] = []
        for index, (args, result) in sorted(s.made.pop(step.name, {}).items()):
            key = action_key(s.saga_id(step), index)
            if step.undo is None:
                may = "" if result is not None else "may have landed; "
                left.append(f"{key} ({may}a {step.kind.value} step has no undo)")
                continue
            try:
                async with asyncio.timeout(s.catalogue.timeout_of(step)):
                    await step.undo(args, as_json(result), s.context(step, index, undo=True))
            except Exception as exc:
                left.append(f"{key} (its undo raised {described(exc)})")
        return left
