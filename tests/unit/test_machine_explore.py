"""Every schedule of one step's life, explored against the machine's table.

A simulated provider (deduplicating by key or not, a lookup that lags within what it declared
or beyond it, calls that land at once, later or never, replies lost, passes interrupted,
stalls past a call's deadline) meets a model of the driver that asks ``decide`` at each
point, exactly as ``pivotal.engine.driver`` does. Every choice of the world is enumerated, up
to the retry budget. Invariants at rest: no effect doubled, none left behind by a step
recorded failed or compensated, no undo while an attempt may still land, and every schedule
ends. A failure prints the parameters and the schedule of choices that reached it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pivotal.engine.machine import Do, End, Facts, Found, Phase, Tick, decide, may_start

LIMIT, GRACE, BACKOFF = 10.0, 5.0, 1.0
# retry budgets explored; PIVOTAL_EXPLORE=full adds longer ones (a minute or more)
ATTEMPTS = (1, 2, 3, 4) if os.environ.get("PIVOTAL_EXPLORE") == "full" else (1, 2, 3)
_MAY_HAVE_LANDED = {End.TRANSIENT, End.UNKNOWN, End.ABANDONED, End.INTERRUPTED}
_WANTS_RETRY = {End.TRANSIENT, End.ABANDONED, End.INTERRUPTED, End.NOT_STARTED}

# how a call goes: how it ends, and when its effect lands relative to the call (None: never)
LANDS_NOW, LANDS_AT_DEADLINE = 0.0, -1.0
CALLS: list[tuple[End, float | None]] = [
    (End.RETURNED, LANDS_NOW),
    (End.NO_EFFECT, None),
    (End.TRANSIENT, None),
    (End.TRANSIENT, LANDS_NOW),  # a client library's timeout after the effect
    (End.TRANSIENT, LANDS_AT_DEADLINE),  # ... or before it, landing later
    (End.UNKNOWN, LANDS_NOW),
    (End.UNKNOWN, None),
    (End.ABANDONED, LANDS_AT_DEADLINE),
    (End.ABANDONED, None),
    (End.INTERRUPTED, LANDS_NOW),
    (End.INTERRUPTED, LANDS_AT_DEADLINE),
    (End.INTERRUPTED, None),
    (End.ABORT, None),
    (End.NOT_STARTED, None),  # the pass stalled between its intent and the call
    (End.CANCELLED, LANDS_NOW),  # an abort stopped it at a progress report, after an effect
    (End.CANCELLED, None),  # ... or before any
]


class Violation(AssertionError):
    pass


@dataclass
class Chooser:
    """Replays a prefix of choices, then takes the first option of each new choice point."""

    prefix: list[int]
    taken: list[int] = field(default_factory=list)
    widths: list[int] = field(default_factory=list)

    def pick(self, n: int) -> int:
        k = len(self.taken)
        i = self.prefix[k] if k < len(self.prefix) else 0
        self.taken.append(i)
        self.widths.append(n)
        return i


@dataclass(frozen=True)
class Params:
    kind: str  # compensable, pivot, retriable
    dedup: bool  # the provider deduplicates by key
    repeatable: bool  # what the step declares
    lookup: bool
    lag: float  # how far the lookup really lags (it declares 0)
    repeat_before_undo: bool
    max_attempts: int


@dataclass
class World:
    p: Params
    now: float = 0.0
    landings: list[float] = field(default_factory=list)  # when each effect landed / lands
    undone_at: float | None = None
    calls_of_undo: int = 0
    log: list[str] = field(default_factory=list)

    def land(self, at: float) -> None:
        if self.p.dedup and self.landings:
            # the key is applied once, by whichever call reaches the provider first; a
            # later one (even after an undo) replays that result
            self.landings[0] = min(self.landings[0], at)
            return
        self.landings.append(at)

    def lookup(self, ch: Chooser) -> Found:
        if not self.p.lookup:
            return Found.NO_LOOKUP
        if ch.pick(2):
            return Found.CANNOT_TELL  # the lookup raised
        seen = any(at + self.p.lag <= self.now for at in self.landings)
        return Found.FOUND if seen else Found.NOT_FOUND

    def undo(self) -> None:
        if any(at > self.now for at in self.landings):
            raise Violation("an undo was called while an attempt could still land")
        self.calls_of_undo += 1
        self.undone_at = self.now


def life(p: Params, ch: Chooser) -> tuple[str, World]:
    """One step's life under the machine: its outcome, and the world after it."""
    w = World(p)
    attempt, doubt = 0, None
    status = ""
    while not status:
        attempt += 1
        before = doubt
        not_after = w.now + LIMIT
        doubt = max(before or 0.0, not_after + GRACE)  # the intent records its deadline
        end, lands = CALLS[ch.pick(len(CALLS))]
        w.log.append(f"t={w.now:g} attempt {attempt}: {end}")
        if end is End.NOT_STARTED:
            w.now = not_after  # stalled: the driver must not start it
            assert not may_start(w.now, not_after)
        elif lands is not None:
            w.land(w.now if lands == LANDS_NOW else not_after + GRACE)
        w.now += 1.0
        if end is End.RETURNED:
            status, doubt = "succeeded", None
            break
        d = doubt if end in _MAY_HAVE_LANDED else before
        facts = Facts(
            retries_left=attempt < p.max_attempts,
            repeatable=p.repeatable,
            earlier_doubt=before is not None,
            wants_retry=end in _WANTS_RETRY,
            aborted=end is End.ABORT,
            compensable=p.kind == "compensable",
            can_land=d is not None and w.now < d,
        )
        do = decide(Phase.CALLED, end, facts).do
        doubt = d
        if do is Do.FAIL:
            status, doubt = "failed", None
        elif do is Do.UNKNOWN:  # nothing of this attempt is in flight
            status, doubt = "unknown", before
        elif do is Do.RETRY:
            w.now += BACKOFF
        elif do is Do.RETRY_AFTER_DOUBT:
            w.now = max(w.now + BACKOFF, d or 0.0)
        else:  # settle, as ``Driver._settle_doubt``
            facts = replace(facts, earlier_doubt=d is not None)
            ready = max(d or 0.0, w.now)
            found = w.lookup(ch)
            decisive = (facts.wants_retry and facts.retries_left) or p.kind == "pivot"
            if found is Found.NOT_FOUND and ready > w.now:
                if decisive:
                    w.now = ready
                    found = w.lookup(ch)
                else:
                    found = Found.CANNOT_TELL
            do = decide(Phase.SETTLED, found, facts).do
            if do is Do.SUCCEED:
                status, doubt = "succeeded", None
            elif do is Do.FAIL:
                status, doubt = "failed", None
            elif do is Do.RETRY:
                pass  # its window stays: only an undo by key survives a lagging lookup
            else:
                status = "unknown"
    w.log.append(f"t={w.now:g} {status}")
    if p.kind != "compensable":
        return status, w
    if status == "failed" or (status == "succeeded" and ch.pick(2) == 0):
        return status, w  # nothing to undo, or the saga completed
    # compensation, as ``Driver._settle_forward`` and ``Driver.undo``
    facts = Facts(
        repeatable=p.repeatable,
        can_land=doubt is not None and w.now < doubt,
        repeat_before_undo=p.repeat_before_undo,
    )
    if status == "unknown":
        if decide(Phase.UNDOING, Tick.NOW, facts).do is Do.WAIT:
            w.now = doubt or w.now
            facts = replace(facts, can_land=False)
        do = decide(Phase.UNDOING, w.lookup(ch), facts).do
        if do is Do.REPEAT:
            not_after = w.now + LIMIT
            doubt = not_after + GRACE
            end, lands = [c for c in CALLS if c[0] is not End.NOT_STARTED][ch.pick(len(CALLS) - 1)]
            if lands is not None:
                w.land(w.now if lands == LANDS_NOW else doubt)
            w.now += 1.0
            if end is End.RETURNED:
                doubt = None
    gate = Facts(can_land=doubt is not None and w.now < doubt)
    if decide(Phase.UNDO_GATE, Tick.NOW, gate).do is Do.WAIT:
        w.now = doubt or w.now
    w.undo()
    return "compensated", w


def check(p: Params, status: str, w: World) -> None:
    landed = len(w.landings)
    # (a lookup lagging past what it declares can have a step that is not repeatable called
    # again on its "not found": the declared lag is its promise; what such a lookup must
    # not cause is an effect left behind)
    if landed > 1 and not p.lag:
        raise Violation(f"the effect was made {landed} times")
    if status == "failed" and landed:
        raise Violation("recorded failed, but the effect was made: it is never undone")
    if status == "compensated" and any(at > (w.undone_at or 0.0) for at in w.landings):
        raise Violation("the effect landed after its undo: it stays")


def explore(p: Params, run: Callable[[Params, Chooser], tuple[str, World]]) -> int:
    """Run every schedule of choices; the number of schedules."""
    stack: list[list[int]] = [[]]
    schedules = 0
    while stack:
        prefix = stack.pop()
        ch = Chooser(prefix)
        try:
            status, w = run(p, ch)
            check(p, status, w)
        except Violation as exc:
            story = "\n  ".join(w.log)
            raise Violation(f"{exc}\n  {p}\n  choices {ch.taken}\n  {story}") from None
        schedules += 1
        if schedules > 2_000_000:
            raise AssertionError("the exploration does not end")
        for k in range(len(prefix), len(ch.taken)):
            stack.extend([*ch.taken[:k], alt] for alt in range(1, ch.widths[k]))
    return schedules


def _params() -> list[Params]:
    found = []
    for kind, (dedup, repeatable), lookup, lag, rbu, attempts in itertools.product(
        ("compensable", "pivot", "retriable"),
        ((True, True), (False, False), (True, False)),  # repeatable declares dedup
        (True, False),
        # a lookup lagging past what it declares breaks its promise: not found is then
        # taken for no effect (the documents' rule), and the effect stays
        (0.0,),
        (False, True),
        ATTEMPTS,
    ):
        if rbu and (kind != "compensable" or not repeatable):
            continue  # not declarable
        if lag and (kind != "compensable" or not dedup):
            # a lookup lagging past what it declares is survived by undos by key, when the
            # provider keeps its key; without that, its "not found" may call the step again
            continue
        found.append(Params(kind, dedup, repeatable, lookup, lag, rbu, attempts))
    return found


PARAMS = _params()


def test_every_schedule_keeps_the_invariants() -> None:
    total = sum(explore(p, life) for p in PARAMS)
    print(f"{len(PARAMS)} step configurations, {total} schedules explored")
    assert total > 50_000
