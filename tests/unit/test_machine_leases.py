"""Two processes on one saga's step, every interleaving up to a depth: leases with epochs,
fenced writes, a lease check before every call, pauses of any length, a clock that reads the
ledger's time within a bounded error, calls that land at once, late or never, replies lost.
The step's decisions come from ``pivotal.engine.machine``.

Invariants: no call is started by a process that does not hold the saga's lease in the
ledger, no two calls of the step are in flight at once, no effect is doubled (the provider
does not deduplicate), and an effect that landed is never recorded as "failed".
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace

import pytest

from pivotal.engine.machine import Do, End, Facts, Found, Phase, decide, may_start

TTL, LIMIT, GRACE = 30.0, 40.0, 5.0  # a call may outlast its lease: the check matters
PAUSES = (1.0, TTL / 2, TTL + LIMIT + GRACE + 1)  # a beat, half a lease, past everything


class Violation(AssertionError):
    pass


@dataclass(frozen=True)
class Proc:
    name: str
    epoch: int = 0  # the lease this process believes it holds (0: none)
    expires: float = 0.0  # when it believes that lease runs out
    intended: float | None = None  # the not_after of the intent it wrote, not yet called
    calling: tuple[float, float, bool] | None = None  # (not_after, lands_at, lands)
    done: bool = False


@dataclass(frozen=True)
class World:
    now: float = 0.0
    epoch: int = 0  # the ledger's lease
    owner: str = ""
    expires: float = 0.0
    status: str = "pending"  # pending, started, succeeded, unknown, failed
    attempts: int = 0
    doubt: float | None = None
    landed: tuple[float, ...] = ()  # when each effect landed
    in_flight: tuple[tuple[str, float], ...] = ()  # (process, lands_at) of calls out
    procs: tuple[Proc, ...] = ()
    log: tuple[str, ...] = field(default=(), compare=False)

    def proc(self, name: str) -> Proc:
        return next(p for p in self.procs if p.name == name)

    def with_proc(self, p: Proc, note: str) -> World:
        procs = tuple(p if q.name == p.name else q for q in self.procs)
        return replace(self, procs=procs, log=(*self.log, f"t={self.now:g} {note}"))

    def visible(self) -> bool:
        """What the step's lookup answers now (it is consistent with the provider)."""
        return any(at <= self.now for at in self.landed)


MAX_ATTEMPTS = 2
# every interleaving up to this many moves; PIVOTAL_EXPLORE=full goes deeper (minutes)
DEPTH = 10 if os.environ.get("PIVOTAL_EXPLORE") == "full" else 7
CHECK_BEFORE_CALL = True  # the driver's lease check right before a call


def moves(w: World, skew: float) -> list[tuple[str, World]]:
    """Every next move of either process (``skew``: how far a process's reading of the
    ledger's time may be off)."""
    found: list[tuple[str, World]] = []
    for p in w.procs:
        if p.done:
            continue
        found += [(f"{p.name} {label}", nxt) for label, nxt in _moves_of(w, p, skew)]
    for pause in PAUSES:
        later = _advance(w, pause)
        found.append((f"time +{pause:g}", replace(later, log=(*w.log, f"t={later.now:g}"))))
    return found


def _advance(w: World, seconds: float) -> World:
    now = w.now + seconds
    landed = w.landed + tuple(at for _, at in w.in_flight if at <= now)
    flying = tuple((p, at) for p, at in w.in_flight if at > now)
    return replace(w, now=now, landed=landed, in_flight=flying)


def _moves_of(w: World, p: Proc, skew: float) -> list[tuple[str, World]]:
    seen = w.now + skew  # this process's reading of the ledger's time
    if p.calling is not None:
        _, lands_at, lands = p.calling
        out = []
        # the call ends: it returned, or it was cut off (its effect may still land)
        for end in (End.RETURNED, End.TRANSIENT, End.ABANDONED):
            if end is End.RETURNED and (not lands or lands_at > w.now):
                continue  # it returns only once its effect exists
            out.append((f"call ended {end}", _after_call(w, replace(p, calling=None), end)))
        return out
    if p.intended is not None:
        return [("calls", c) for c in _call(w, p, seen)]
    if p.epoch == 0 or seen >= p.expires:
        # it holds no lease it trusts: it claims one that ran out (the ledger decides)
        if w.now >= w.expires and w.status in ("pending", "started"):
            epoch = w.epoch + 1
            q = replace(p, epoch=epoch, expires=seen + TTL)
            nxt = replace(w, epoch=epoch, owner=p.name, expires=w.now + TTL)
            return [("claims", nxt.with_proc(q, f"{p.name} claims epoch {epoch}"))]
        return []
    # it believes it holds the lease: every write is fenced by its epoch
    if w.epoch != p.epoch:
        return [("fenced", w.with_proc(replace(p, done=True), f"{p.name} write fenced"))]
    if w.status in ("succeeded", "unknown", "failed"):
        return [("rests", w.with_proc(replace(p, done=True), f"{p.name} rests"))]
    if w.status == "started":  # a pass found an attempt without an outcome: settle it
        return [("resumes", _resume(w, p, seen))]
    return [("intent", _intent(w, p, seen))]


def _lease_check(w: World, p: Proc, seen: float) -> Proc | None:
    """``LeaseKeeper.ensure``: the process's own belief, renewed by a heartbeat when it is
    about to run out; None when the lease was taken over."""
    if seen + TTL / 3 < p.expires:
        return p
    if w.epoch != p.epoch:
        return None
    return replace(p, expires=seen + TTL)


def _intent(w: World, p: Proc, seen: float) -> World:
    checked = _lease_check(w, p, seen)
    if checked is None:
        return w.with_proc(replace(p, done=True), f"{p.name} lease lost before intent")
    if checked is not p:
        w = replace(w, expires=w.now + TTL)  # renewed by a heartbeat
    not_after = seen + LIMIT
    w = replace(
        w, status="started", attempts=w.attempts + 1, doubt=max(w.doubt or 0.0, not_after + GRACE)
    )
    return w.with_proc(replace(checked, intended=not_after), f"{p.name} intent {w.attempts}")


def _call(w: World, p: Proc, seen: float) -> list[World]:
    not_after = p.intended
    assert not_after is not None
    checked = _lease_check(w, p, seen) if CHECK_BEFORE_CALL else p  # right before the call
    if checked is None:
        return [w.with_proc(replace(p, done=True), f"{p.name} lease lost before call")]
    if checked is not p:
        w = replace(w, expires=w.now + TTL)
    checked = replace(checked, intended=None)
    if not may_start(seen, not_after):
        return [w.with_proc(replace(checked, done=True), f"{p.name} call not started")]
    if w.owner != p.name or w.epoch != p.epoch or w.now >= w.expires:
        raise Violation(f"{p.name} starts a call without holding the lease\n" + _story(w))
    if w.in_flight:
        raise Violation("two calls of the step in flight at once\n" + _story(w))
    out = []
    # it lands at once, or as late as it can: it is abandoned when this process reads its
    # not_after (true time: not_after - skew), and may land ``GRACE`` after that
    late = not_after - (seen - w.now) + GRACE
    for lands_at, lands in ((w.now, True), (late, True), (w.now, False)):
        flying = (*w.in_flight, (p.name, lands_at)) if lands and lands_at > w.now else w.in_flight
        landed = (*w.landed, lands_at) if lands and lands_at <= w.now else w.landed
        if len(landed) + len(flying) > 1:
            raise Violation("the effect was made twice\n" + _story(w))
        q = replace(checked, calling=(not_after, lands_at, lands))
        nxt = replace(w, in_flight=flying, landed=landed)
        out.append(nxt.with_proc(q, f"{p.name} calls (lands {lands_at:g}: {lands})"))
    return out


def _story(w: World) -> str:
    return "  " + "\n  ".join(w.log)


def _after_call(w: World, p: Proc, end: End) -> World:
    if w.epoch != p.epoch:  # the outcome's commit is fenced
        return w.with_proc(replace(p, done=True), f"{p.name} outcome refused: fenced")
    seen = w.now
    facts = Facts(
        retries_left=w.attempts < MAX_ATTEMPTS,
        repeatable=False,
        earlier_doubt=w.attempts > 1,
        wants_retry=end is not End.RETURNED,
        compensable=False,
        can_land=w.doubt is not None and seen < w.doubt,
    )
    do = decide(Phase.CALLED, end, facts).do
    if do is Do.SUCCEED:
        return replace(w, status="succeeded", doubt=None).with_proc(p, f"{p.name} succeeded")
    return _settle(w, p, facts, seen)


def _resume(w: World, p: Proc, seen: float) -> World:
    found = Found.FOUND if w.visible() else Found.NOT_FOUND
    if decide(Phase.RESUMED, found, Facts()).do is Do.SUCCEED:
        return replace(w, status="succeeded", doubt=None).with_proc(p, f"{p.name} found it")
    facts = Facts(
        retries_left=w.attempts < MAX_ATTEMPTS,
        repeatable=False,
        earlier_doubt=True,
        wants_retry=True,
        compensable=False,
        can_land=w.doubt is not None and seen < w.doubt,
    )
    decide(Phase.CALLED, End.INTERRUPTED, facts)
    return _settle(w, p, facts, seen)


def _settle(w: World, p: Proc, facts: Facts, seen: float) -> World:
    """``Driver._settle_doubt``: a 'not found' counts once no attempt can land; the wait
    for it is recorded and the pass ends (the process rests; a later pass settles)."""
    found = Found.FOUND if w.visible() else Found.NOT_FOUND
    if found is Found.NOT_FOUND and w.doubt is not None and seen < w.doubt:
        return replace(w, status="started").with_proc(replace(p, done=True), f"{p.name} waits")
    do = decide(Phase.SETTLED, found, facts).do
    if do is Do.SUCCEED:
        return replace(w, status="succeeded", doubt=None).with_proc(p, f"{p.name} settled")
    if do is Do.RETRY:
        return replace(w, status="pending").with_proc(p, f"{p.name} will call again")
    if do is Do.FAIL:
        if w.landed or w.in_flight:
            raise Violation("recorded failed while its effect exists or may land\n" + _story(w))
        return replace(w, status="failed", doubt=None).with_proc(p, f"{p.name} failed")
    return replace(w, status="unknown").with_proc(p, f"{p.name} unknown")


def explore(skew: float, depth: int) -> tuple[int, int]:
    """Every interleaving up to ``depth`` moves, each state expanded once at the smallest
    depth it is reached: (distinct states, transitions)."""
    start = World(procs=(Proc("A"), Proc("B")))
    stack: list[tuple[World, int]] = [(start, 0)]
    best: dict[World, int] = {}
    transitions = 0
    while stack:
        w, d = stack.pop()
        if best.get(w, depth + 1) <= d:
            continue
        best[w] = d
        if d >= depth:
            continue
        for _label, n in moves(w, skew):
            transitions += 1
            stack.append((n, d + 1))
    return len(best), transitions


def _explore_or_explain(skew: float, depth: int) -> tuple[int, int]:
    try:
        return explore(skew, depth)
    except Violation as exc:
        raise AssertionError(f"skew {skew}: {exc}") from None


def test_two_processes_every_interleaving_keeps_the_invariants() -> None:
    states = transitions = 0
    for skew in (0.0, 1.0, -1.0):  # a ledger clock read within a second
        found, moved = _explore_or_explain(skew, depth=DEPTH)
        states += found
        transitions += moved
    print(f"two processes, depth {DEPTH}: {states} states, {transitions} transitions")
    assert states > 1000


def test_a_clock_read_far_behind_the_ledger_is_what_breaks_it() -> None:
    """Every deadline and lease check uses the process's reading of the ledger's time: read
    half a lease behind, a call's recorded deadline is too early, and the exploration finds
    a second call while the first is still in flight. This is why every time comes from
    the ledger's clock, and why its error must stay well inside ``doubt_grace``."""
    with pytest.raises(Violation, match=r"in flight at once|without holding the lease"):
        explore(-TTL / 2, depth=max(DEPTH, 8))


def test_a_driver_without_the_lease_check_before_its_call_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exploration is not blind: a driver that writes its intent under its lease and
    then, after a pause, calls without checking it again, is found."""
    monkeypatch.setattr(sys.modules[__name__], "CHECK_BEFORE_CALL", False)
    with pytest.raises(Violation, match="without holding the lease"):
        explore(0.0, depth=max(DEPTH, 8))
