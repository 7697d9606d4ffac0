"""What happens to a step whose call may have taken effect: declared once, as a table.

Pure: no asyncio, no store, no clock. Time arrives already compared (``Facts`` says whether
an attempt may still land at the ledger's ``now``), the world as one observation: how a call
ended (``End``) or what a lookup answered (``Found``). ``decide`` returns the first row of
``TABLE`` for that phase and observation whose conditions hold; a phase and observation with
no row is ``Impossible``, and so is a set of facts no row of theirs accepts.

The driver (``pivotal.engine.driver``) carries each decision out on every path that reaches it:
a first call, a retry, a pass resumed after a crash, compensation, a dead letter's retry.
A person resuming a parked saga from a step is asked of the same table, step by step
(``BEFORE_FROM``, ``AT_FROM``, ``AFTER_FROM``: ``pivotal.engine.resuming``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from enum import StrEnum

from pivotal.records import quick_init


class Phase(StrEnum):
    """Where a step, or its saga, is when something is observed."""

    CALLED = "called"  # a call of its action ended (or was found interrupted)
    RESUMED = "resumed"  # a new pass found an attempt without an outcome; its lookup answered
    SETTLED = "settled"  # no attempt can land any more and the lookup's lag passed: it answered
    UNDOING = "undoing"  # compensation reached a step whose outcome is not known
    UNDO_GATE = "undo_gate"  # an undo is about to be called
    UNDO_CALLED = "undo_called"  # a call of the undo ended (or was found interrupted)
    RESOLVING = "resolving"  # a person asks to record a step settled by hand (its undo)
    UNIT_ENDED = "unit_ended"  # a step of the unit ended failed, or with its outcome unknown
    GATE = "gate"  # the unit is the one a person's approval gates; its approval as it stands
    # a person resumes a parked saga from a step: each step, by where it is from that step
    BEFORE_FROM = "before_from"  # before it: settled by the person, unless it succeeded
    AT_FROM = "at_from"  # the step itself: the saga goes on here
    AFTER_FROM = "after_from"  # after it: runs in its turn


class End(StrEnum):
    """How a call of the action ended, as the driver saw it."""

    RETURNED = "returned"
    NO_EFFECT = "no_effect"  # ``Permanent`` or one of the step's ``no_effect_on``
    ABORT = "abort"  # the action raised ``Abort``: compensate
    TRANSIENT = "transient"  # raised an error worth retrying: it may have taken effect
    UNKNOWN = "unknown"  # raised anything else: it may have taken effect
    ABANDONED = "abandoned"  # its bound passed: it may still be running, and land
    INTERRUPTED = "interrupted"  # a pass ended during the call: found started on resume
    NOT_STARTED = "not_started"  # its ``not_after`` passed before it could start: not called
    CANCELLED = "cancelled"  # stopped at its progress report (an abort): nothing left in flight


class Found(StrEnum):
    """What a lookup by the action's key answered."""

    FOUND = "found"
    NOT_FOUND = "not_found"
    CANNOT_TELL = "cannot_tell"  # it raised, timed out, or the wait for its lag is too long
    NO_LOOKUP = "no_lookup"  # the step has none


class Tick(StrEnum):
    """Nothing was observed: the driver asks what to do now."""

    NOW = "now"


class Outcome(StrEnum):
    """How a step of a unit ended, when it did not succeed."""

    FAILED = "failed"  # it took no effect
    UNKNOWN = "unknown"  # it may have taken effect


class Approval(StrEnum):
    """The approval of the step a person's decision gates, as the ledger has it."""

    NONE = "none"  # never asked
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


class Standing(StrEnum):
    """Where a step of a parked saga stands when a person resumes the saga from a step."""

    SUCCEEDED = "succeeded"
    NOT_RUN = "not_run"  # never called
    NO_EFFECT = "no_effect"  # failed, or waits for a retry: provably no effect
    IN_DOUBT = "in_doubt"  # an attempt may have taken effect (unknown, started, or retried)


Seen = End | Found | Tick | Outcome | Approval | Standing


class Do(StrEnum):
    """What the driver does next."""

    SUCCEED = "succeed"  # record the result (the call's, or the lookup's)
    FAIL = "fail"  # record that the step took no effect
    RETRY = "retry"  # call again with the same key after the policy's backoff
    RETRY_AFTER_DOUBT = "retry_after_doubt"  # the same, never before the attempt cannot land
    SETTLE = "settle"  # once no attempt can land and the lookup's lag passed, ask the lookup
    UNKNOWN = "unknown"  # record the outcome unknown: compensation undoes it by its key
    CONTINUE = "continue"  # decide as after the interrupted call (``CALLED``, ``INTERRUPTED``)
    WAIT = "wait"  # until no attempt can land any more
    LOOKUP = "lookup"  # ask the step's lookup now
    UNDO = "undo"  # record the found result, then undo with it
    UNDO_BY_KEY = "undo_by_key"  # undo without a result: the undo finds the effect by key
    REPEAT = "repeat"  # call the action once more with its key, to give the undo its result
    DEAD_LETTER = "dead_letter"  # park the undo for a person; a window it may land in is kept
    GO = "go"  # call the undo; or run the gated step
    NEEDS_HUMAN = "needs_human"  # stop the saga for a person, with the reason
    COMPENSATE = "compensate"  # begin compensation, with the reason
    ASK = "ask"  # record the approval request: the saga waits for a person
    WAIT_FOR_PERSON = "wait_for_person"  # the pass ends; the decision resumes it
    EXPIRE = "expire"  # record the approval expired and begin compensation
    STOP = "stop"  # nothing to run: the saga is compensating already
    KEEP = "keep"  # leave the step as it stands
    BY_HAND = "by_hand"  # record the step settled by the person who resumes the saga
    REFUSE = "refuse"  # refuse the person's request, with the reason; nothing is recorded


@quick_init
@dataclass(frozen=True, slots=True)
class Facts:
    """What the rules read about one step, compared at the ledger's ``now``."""

    retries_left: bool = True  # the retry policy allows another attempt
    repeatable: bool = True  # the provider deduplicates by key: calling again is safe
    earlier_doubt: bool = False  # an earlier attempt may have taken effect
    wants_retry: bool = False  # the call ended the way a retry answers (transient, cut off)
    aborted: bool = False  # the call raised ``Abort``: an effect found is undone
    compensable: bool = True  # the step has an undo
    can_land: bool = False  # an attempt of the action may still land
    undo_can_land: bool = False  # an attempt of the undo may still land
    # an attempt of the undo may still be running: cut off by its bound or a lost pass (one
    # that raised has ended; its provider replays the undo key if it lands late)
    undo_running: bool = False
    # the step's lookup may not yet see what landed last: its declared ``lookup_lag`` has
    # not passed since the last moment an attempt could land
    lookup_lags: bool = False
    repeat_before_undo: bool = False  # the step opts in to a settling repeat before its undo
    repeated: bool = False  # that repeat was made already (at most one)
    passed_pivot: bool = False  # the point of no return took effect
    is_pivot: bool = False  # the step is the point of no return
    needed: bool = False  # the approval policy asks a person (a failing policy does too)
    expired: bool = False  # the approval's expiry has passed on the ledger's clock
    compensating: bool = False  # the saga was compensating when it was parked


@dataclass(frozen=True, slots=True)
class Row:
    """One transition: in ``phase``, on ``seen``, when every condition holds, ``do``.

    A condition names a field of ``Facts``; ``!name`` asks for it to be false. A row the
    driver can never take says why in ``unreachable`` (the simulation of the real program
    checks that it is never taken, and that every other row is)."""

    phase: Phase
    seen: Seen
    when: tuple[str, ...]
    do: Do
    why: str
    unreachable: str = ""

    def holds(self, facts: Facts) -> bool:
        for cond in self.when:
            want = not cond.startswith("!")
            if getattr(facts, cond.lstrip("!")) is not want:
                return False
        return True

    @property
    def id(self) -> str:
        return f"{self.phase}/{self.seen}/{','.join(self.when) or '*'}"


@dataclass(frozen=True, slots=True)
class Decision:
    do: Do
    row: Row


class Impossible(Exception):
    """The table has no transition for what was observed: a bug in the driver or the table."""


# the ends after which the call may still take effect, until its deadline: whoever cut it
# short; only a call that provably took no effect (or never began, or stopped at a report)
# cannot
MAY_HAVE_LANDED = frozenset({End.TRANSIENT, End.UNKNOWN, End.ABANDONED, End.INTERRUPTED})


_BEGUN_WITH = (
    "an approval's {} is recorded in the one commit that begins compensation, and a "
    "compensating saga is compensated before any gate is asked"
)


def _rows() -> tuple[Row, ...]:
    C, R, S, U, G = Phase.CALLED, Phase.RESUMED, Phase.SETTLED, Phase.UNDOING, Phase.UNDO_GATE
    rows = [
        # -- a call ended ----------------------------------------------------------------
        Row(C, End.RETURNED, (), Do.SUCCEED, "the call returned its result"),
        Row(C, End.NOT_STARTED, ("retries_left",), Do.RETRY, "nothing was called: try again"),
        Row(
            C,
            End.NOT_STARTED,
            ("earlier_doubt",),
            Do.SETTLE,
            "nothing was called this time, and retries ran out; an earlier attempt may have "
            "taken effect",
        ),
        Row(C, End.NOT_STARTED, (), Do.FAIL, "nothing was ever called"),
        Row(C, End.NO_EFFECT, ("!earlier_doubt",), Do.FAIL, "the provider refused: no effect"),
        Row(
            C,
            End.NO_EFFECT,
            ("earlier_doubt",),
            Do.SETTLE,
            "this call took no effect, but an earlier one may have (a provider may refuse a "
            "key it applied)",
        ),
        Row(C, End.ABORT, ("!earlier_doubt",), Do.FAIL, "aborted before any effect"),
        Row(C, End.ABORT, ("earlier_doubt",), Do.SETTLE, "aborted; an earlier attempt may land"),
        Row(
            C,
            End.CANCELLED,
            (),
            Do.UNKNOWN,
            "the saga was aborted and the call stopped at its progress report: what it did "
            "is undone by its key at once (nothing of it is in flight); never called again",
        ),
    ]
    for end in sorted(MAY_HAVE_LANDED, key=list(End).index):
        if end is not End.UNKNOWN:
            rows.append(
                Row(
                    C,
                    end,
                    ("retries_left", "repeatable"),
                    Do.RETRY if end is End.TRANSIENT else Do.RETRY_AFTER_DOUBT,
                    "the provider deduplicates by key: calling again cannot double it"
                    + ("" if end is End.TRANSIENT else "; never beside a call that may run"),
                )
            )
        rows.append(
            Row(
                C,
                end,
                (),
                Do.SETTLE,
                "it may have taken effect: only its lookup, once nothing can land, tells; "
                "a step that is not repeatable is never called again on a guess",
            )
        )
    rows += [
        # -- a new pass found an attempt without an outcome, and asked its lookup ----------
        Row(R, Found.FOUND, (), Do.SUCCEED, "a found effect settles it at once"),
        Row(R, Found.NOT_FOUND, (), Do.CONTINUE, "it may still land: decide as interrupted"),
        Row(R, Found.CANNOT_TELL, (), Do.CONTINUE, "decide as interrupted"),
        Row(R, Found.NO_LOOKUP, (), Do.CONTINUE, "decide as interrupted"),
        # -- settling forward: no attempt can land, the lookup's lag passed ------------------
        Row(S, Found.FOUND, ("!aborted",), Do.SUCCEED, "the effect exists: its result counts"),
        Row(S, Found.FOUND, ("aborted",), Do.UNKNOWN, "aborted: the found effect is undone"),
        Row(
            S,
            Found.NOT_FOUND,
            ("wants_retry", "retries_left", "!aborted"),
            Do.RETRY,
            "provably nothing landed: calling again is safe",
        ),
        Row(
            S,
            Found.NOT_FOUND,
            (),
            Do.FAIL,
            "nothing can land and the lookup's declared lag has passed: not found is no "
            "effect, and nothing is undone (000: treat not-found as already compensated)",
        ),
        Row(S, Found.CANNOT_TELL, (), Do.UNKNOWN, "nobody can tell: compensation decides"),
        Row(S, Found.NO_LOOKUP, (), Do.UNKNOWN, "nobody can tell: compensation decides"),
        # -- compensation reached a step whose outcome is not known -------------------------
        Row(U, Tick.NOW, ("can_land",), Do.WAIT, "no undo while an attempt may land"),
        Row(
            U,
            Tick.NOW,
            ("lookup_lags",),
            Do.WAIT,
            "its lookup may not see yet what landed last: wait its declared lag",
        ),
        Row(U, Tick.NOW, (), Do.LOOKUP, "look the effect up by its key"),
        Row(U, Found.FOUND, (), Do.UNDO, "undo the effect found, with its result"),
        Row(
            U,
            Found.NOT_FOUND,
            (),
            Do.FAIL,
            "nothing can land and the lookup's declared lag has passed: no effect, nothing "
            "to undo (004: never undo a step that never ran)",
        ),
    ]
    for found in (Found.CANNOT_TELL, Found.NO_LOOKUP):
        rows += [
            Row(
                U,
                found,
                ("repeat_before_undo", "!repeated", "repeatable"),
                Do.REPEAT,
                "the step opted in: its provider replays by key and its undo needs the result",
            ),
            Row(
                U,
                found,
                (),
                Do.UNDO_BY_KEY,
                "nobody can tell: never repeated forward just to be undone, the undo by key "
                "treats not found as done",
            ),
        ]
    P, A = Phase.UNIT_ENDED, Phase.GATE
    rows += [
        # -- a step of the unit did not succeed: the saga's way on -------------------------
        Row(P, Outcome.FAILED, ("passed_pivot",), Do.NEEDS_HUMAN, "nothing is undone past it"),
        Row(P, Outcome.FAILED, (), Do.COMPENSATE, "it took no effect: undo what did"),
        Row(P, Outcome.UNKNOWN, ("passed_pivot",), Do.NEEDS_HUMAN, "nothing is undone past it"),
        Row(
            P,
            Outcome.UNKNOWN,
            ("is_pivot",),
            Do.NEEDS_HUMAN,
            "the point of no return may have taken effect: never compensated on a guess",
        ),
        Row(P, Outcome.UNKNOWN, (), Do.COMPENSATE, "undo it (by key) and what came before"),
        # -- the step a person's approval gates is next -----------------------------------
        Row(A, Approval.NONE, ("needed",), Do.ASK, "ask a person; the saga waits"),
        Row(A, Approval.NONE, (), Do.GO, "no approval is needed"),
        Row(A, Approval.PENDING, ("expired",), Do.EXPIRE, "nobody decided in time"),
        Row(A, Approval.PENDING, (), Do.WAIT_FOR_PERSON, "a person has not decided yet"),
        Row(
            A,
            Approval.APPROVED,
            ("expired",),
            Do.EXPIRE,
            "approved, but its time ran out before the step could begin (checked again "
            "right before it, after the plan's re-check)",
        ),
        Row(A, Approval.APPROVED, (), Do.GO, "approved in time"),
        Row(
            A,
            Approval.REJECTED,
            (),
            Do.STOP,
            "rejected: compensation already began",
            unreachable=_BEGUN_WITH.format("rejection"),
        ),
        Row(
            A,
            Approval.EXPIRED,
            (),
            Do.STOP,
            "expired: compensation already began",
            unreachable=_BEGUN_WITH.format("expiry"),
        ),
    ]
    rows += [
        # -- an undo is about to be called (compensation, or a dead letter's retry) ---------
        Row(G, Tick.NOW, ("can_land",), Do.WAIT, "the action may still land: undo after it"),
        Row(G, Tick.NOW, ("undo_running",), Do.WAIT, "an earlier undo attempt may still run"),
        Row(G, Tick.NOW, (), Do.GO, "nothing of the step can land any more"),
    ]
    rows += _undo_rows()
    rows += _resume_from_rows()
    return tuple(rows)


def _undo_rows() -> list[Row]:
    """How a call of an undo ended, and a person settling a step's undo by hand. An undo
    that may have landed keeps its window whoever cut it short, as a call of the action
    does: its dead letter says until when, and no person settles it by hand before then."""
    UC, RS = Phase.UNDO_CALLED, Phase.RESOLVING
    parked = "a person must look (the dead letter keeps any window an earlier attempt left)"
    rows = [
        Row(UC, End.RETURNED, (), Do.SUCCEED, "the undo returned: the step is undone"),
        Row(UC, End.NO_EFFECT, (), Do.DEAD_LETTER, f"the provider refused the undo: {parked}"),
        Row(UC, End.ABORT, (), Do.DEAD_LETTER, f"the undo gave up (Abort): {parked}"),
        Row(UC, End.NOT_STARTED, ("retries_left",), Do.RETRY, "nothing was called: try again"),
        Row(UC, End.NOT_STARTED, (), Do.DEAD_LETTER, f"nothing was called this time: {parked}"),
    ]
    for end in sorted(MAY_HAVE_LANDED, key=list(End).index):
        cut = end in (End.ABANDONED, End.INTERRUPTED)  # the call itself may still run
        rows.append(
            Row(
                UC,
                end,
                ("retries_left",),
                Do.RETRY_AFTER_DOUBT if cut else Do.RETRY,
                "called again with its undo key, which the provider replays; "
                + ("never beside an attempt that may still run" if cut else "its window kept"),
            )
        )
        rows.append(
            Row(
                UC,
                end,
                (),
                Do.DEAD_LETTER,
                "its budget ran out and it may still land until its deadline: the dead letter "
                "keeps that window, and nobody settles it by hand before it ends",
            )
        )
    rows += [
        Row(
            RS,
            Tick.NOW,
            ("can_land",),
            Do.REFUSE,
            "an attempt of its action may still land, and what it makes after the person's "
            "word would stay",
        ),
        Row(
            RS,
            Tick.NOW,
            ("undo_can_land",),
            Do.REFUSE,
            "an attempt of its undo may still land, and undone by hand as well it would be "
            "undone twice",
        ),
        Row(RS, Tick.NOW, (), Do.BY_HAND, "nothing of the step can land any more"),
    ]
    return rows


def _resume_from_rows() -> list[Row]:
    """A person resumes a parked saga from a step, declaring the steps before it that did
    not succeed settled by hand: what becomes of each step, or why the request is refused.
    Nothing in doubt is called again, nothing that may still land is settled by hand, and
    nothing before the point of no return (which Pivotal would have to undo) is either."""
    B, F, A = Phase.BEFORE_FROM, Phase.AT_FROM, Phase.AFTER_FROM
    back = "it was compensating when parked: it goes back, never on from a step"
    rows = [Row(p, s, ("compensating",), Do.REFUSE, back) for p in (B, F, A) for s in Standing]
    unsettled = (Standing.NOT_RUN, Standing.NO_EFFECT, Standing.IN_DOUBT)
    rows += [
        Row(B, Standing.SUCCEEDED, (), Do.KEEP, "it succeeded: nothing to settle"),
        Row(
            B,
            Standing.IN_DOUBT,
            ("can_land",),
            Do.REFUSE,
            "an attempt of it may still land: settled by hand as well, its effect could be "
            "made twice; ask again once it cannot land",
        ),
        *(
            Row(
                B,
                s,
                ("compensable",),
                Do.REFUSE,
                "it comes before the point of no return: settled by hand, its effect could "
                "never be undone by the saga",
            )
            for s in unsettled
        ),
        Row(
            B,
            Standing.NOT_RUN,
            ("is_pivot",),
            Do.REFUSE,
            "it is the point of no return and never ran: it is not passed by hand, past "
            "its approval and its re-check",
        ),
        Row(
            B,
            Standing.NO_EFFECT,
            ("is_pivot",),
            Do.REFUSE,
            "it is the point of no return and took no effect: it is not passed by hand, "
            "past its approval and its re-check",
        ),
        *(Row(B, s, (), Do.BY_HAND, "the person settled it outside") for s in unsettled),
        Row(
            F,
            Standing.SUCCEEDED,
            (),
            Do.REFUSE,
            "it succeeded already: name the first step to run again",
        ),
        Row(
            F,
            Standing.IN_DOUBT,
            (),
            Do.REFUSE,
            "an attempt of it may have taken effect: called again from here, it could be "
            "made twice; resume from the step after it (it is settled by hand), or without "
            "a step (it is settled by its lookup once it cannot land)",
        ),
        Row(F, Standing.NOT_RUN, (), Do.GO, "the saga goes on here"),
        Row(F, Standing.NO_EFFECT, (), Do.GO, "it took no effect: the saga goes on here"),
        Row(
            A,
            Standing.IN_DOUBT,
            (),
            Do.REFUSE,
            "an attempt of it may have taken effect: the saga would call it again",
        ),
        *(
            Row(A, s, (), Do.KEEP, "it runs in its turn")
            for s in (Standing.SUCCEEDED, Standing.NOT_RUN, Standing.NO_EFFECT)
        ),
    ]
    return rows


TABLE: tuple[Row, ...] = _rows()
# the rows the driver can take: the simulation of the real program must take every one
REACHABLE: tuple[Row, ...] = tuple(row for row in TABLE if not row.unreachable)
_BY_KEY: dict[tuple[Phase, Seen], tuple[Row, ...]] = {}
for _row in TABLE:
    _BY_KEY[_row.phase, _row.seen] = (*_BY_KEY.get((_row.phase, _row.seen), ()), _row)

# Every pair of a phase and an observation that has no row, said out loud.
IMPOSSIBLE: frozenset[tuple[Phase, Seen]] = frozenset(
    (phase, seen)
    for phase in Phase
    for seen in (*End, *Found, *Tick, *Outcome, *Approval, *Standing)
    if (phase, seen) not in _BY_KEY
)

_FACT_NAMES = frozenset(f.name for f in fields(Facts))
_hits: Counter[str] | None = None


def decide(phase: Phase, seen: Seen, facts: Facts) -> Decision:
    """The first row for ``phase`` and ``seen`` whose conditions hold."""
    for row in _BY_KEY.get((phase, seen), ()):
        if row.holds(facts):
            if _hits is not None:
                _hits[row.id] += 1
            return Decision(row.do, row)
    raise Impossible(f"no transition in {phase} on {seen} with {facts}")


@contextmanager
def recording() -> Iterator[Counter[str]]:
    """Count the rows ``decide`` takes meanwhile, by ``Row.id`` (for coverage checks)."""
    global _hits
    outer, _hits = _hits, Counter()
    try:
        yield _hits
    finally:
        found, _hits = _hits, outer
        if outer is not None:
            outer.update(found)


def may_start(now: float, not_after: float) -> bool:
    """Whether a call whose deadline is ``not_after`` may still begin at ``now``."""
    return now < not_after


def check_table() -> None:
    """Raise ``ValueError`` when a row names a fact that does not exist, or a row can never
    be taken because an earlier one of its phase and observation always wins."""
    for row in TABLE:
        unknown = {c.lstrip("!") for c in row.when} - _FACT_NAMES
        if unknown:
            raise ValueError(f"row {row.id} names unknown facts {sorted(unknown)}")
    for rows in _BY_KEY.values():
        for i, row in enumerate(rows):
            for earlier in rows[:i]:
                if set(earlier.when) <= set(row.when):
                    raise ValueError(f"row {row.id} is shadowed by {earlier.id}")


check_table()
