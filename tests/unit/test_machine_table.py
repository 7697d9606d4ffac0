"""The saga machine's table, tested as data: every row a case, every pair of a phase and an
observation either declared or impossible, every set of facts answered."""

from __future__ import annotations

import itertools
from dataclasses import fields

import pytest

from pivotal.engine.machine import (
    IMPOSSIBLE,
    MAY_HAVE_LANDED,
    TABLE,
    Approval,
    Do,
    End,
    Facts,
    Found,
    Impossible,
    Outcome,
    Phase,
    Seen,
    Standing,
    Tick,
    check_table,
    decide,
    may_start,
    recording,
)

C, R, S, U, G = Phase.CALLED, Phase.RESUMED, Phase.SETTLED, Phase.UNDOING, Phase.UNDO_GATE
UC, RS = Phase.UNDO_CALLED, Phase.RESOLVING
P, A = Phase.UNIT_ENDED, Phase.GATE
BF, AF, XF = Phase.BEFORE_FROM, Phase.AT_FROM, Phase.AFTER_FROM
DONE, NEW, NONE, DOUBT = Standing.SUCCEEDED, Standing.NOT_RUN, Standing.NO_EFFECT, Standing.IN_DOUBT
BACK = Facts(compensating=True)
LATE = Facts(compensable=False)  # a step after the point of no return: never undone
PIVOT = Facts(compensable=False, is_pivot=True)

# (phase, observation, facts, decision): the rules the reviews found broken, as rows
CASES = [
    (C, End.RETURNED, Facts(), Do.SUCCEED),
    # a client library's timeout is no proof of "no effect": never FAIL, never believed
    (C, End.TRANSIENT, Facts(retries_left=False), Do.SETTLE),
    (C, End.UNKNOWN, Facts(), Do.SETTLE),
    (C, End.TRANSIENT, Facts(), Do.RETRY),
    (C, End.ABANDONED, Facts(), Do.RETRY_AFTER_DOUBT),
    (C, End.INTERRUPTED, Facts(), Do.RETRY_AFTER_DOUBT),
    # repeatable=False: on every path, called again only on the lookup's proof
    (C, End.TRANSIENT, Facts(repeatable=False), Do.SETTLE),
    (C, End.ABANDONED, Facts(repeatable=False), Do.SETTLE),
    (C, End.INTERRUPTED, Facts(repeatable=False), Do.SETTLE),
    (S, Found.NOT_FOUND, Facts(repeatable=False, wants_retry=True), Do.RETRY),
    (S, Found.CANNOT_TELL, Facts(repeatable=False, wants_retry=True), Do.UNKNOWN),
    (C, End.NO_EFFECT, Facts(), Do.FAIL),
    (C, End.NO_EFFECT, Facts(earlier_doubt=True), Do.SETTLE),
    (C, End.ABORT, Facts(), Do.FAIL),
    (C, End.ABORT, Facts(earlier_doubt=True), Do.SETTLE),
    (C, End.NOT_STARTED, Facts(), Do.RETRY),
    (C, End.NOT_STARTED, Facts(retries_left=False), Do.FAIL),
    (C, End.NOT_STARTED, Facts(retries_left=False, earlier_doubt=True), Do.SETTLE),
    # an abort stopped the call at its progress report: undone at once, never called again
    (C, End.CANCELLED, Facts(), Do.UNKNOWN),
    (C, End.CANCELLED, Facts(retries_left=True, repeatable=True), Do.UNKNOWN),
    (R, Found.FOUND, Facts(), Do.SUCCEED),
    (R, Found.NOT_FOUND, Facts(), Do.CONTINUE),
    (R, Found.CANNOT_TELL, Facts(), Do.CONTINUE),
    (R, Found.NO_LOOKUP, Facts(), Do.CONTINUE),
    (S, Found.FOUND, Facts(), Do.SUCCEED),
    (S, Found.FOUND, Facts(aborted=True), Do.UNKNOWN),
    # once nothing can land and the declared lag passed, not found is no effect (000)
    (S, Found.NOT_FOUND, Facts(wants_retry=True, aborted=True), Do.FAIL),
    (S, Found.NOT_FOUND, Facts(), Do.FAIL),
    (S, Found.NOT_FOUND, Facts(compensable=False), Do.FAIL),
    (S, Found.NO_LOOKUP, Facts(), Do.UNKNOWN),
    # compensating a step in doubt: wait, look up, undo by key; never repeat by default
    (U, Tick.NOW, Facts(can_land=True), Do.WAIT),
    (U, Tick.NOW, Facts(lookup_lags=True), Do.WAIT),
    (U, Tick.NOW, Facts(), Do.LOOKUP),
    (U, Found.FOUND, Facts(), Do.UNDO),
    # nothing to undo: never a step that never ran (004)
    (U, Found.NOT_FOUND, Facts(), Do.FAIL),
    (U, Found.NOT_FOUND, Facts(repeat_before_undo=True), Do.FAIL),
    (U, Found.CANNOT_TELL, Facts(), Do.UNDO_BY_KEY),
    (U, Found.NO_LOOKUP, Facts(), Do.UNDO_BY_KEY),
    (U, Found.NO_LOOKUP, Facts(repeat_before_undo=True), Do.REPEAT),
    (U, Found.CANNOT_TELL, Facts(repeat_before_undo=True), Do.REPEAT),
    (U, Found.NO_LOOKUP, Facts(repeat_before_undo=True, repeated=True), Do.UNDO_BY_KEY),
    (U, Found.NO_LOOKUP, Facts(repeat_before_undo=True, repeatable=False), Do.UNDO_BY_KEY),
    # no undo while the action, or an earlier undo attempt, may still land
    (G, Tick.NOW, Facts(can_land=True), Do.WAIT),
    (G, Tick.NOW, Facts(undo_running=True), Do.WAIT),
    (G, Tick.NOW, Facts(undo_can_land=True), Do.GO),  # it raised: its key is replayed
    # an undo call ended: whatever may have landed keeps its window, in a dead letter too
    (UC, End.RETURNED, Facts(), Do.SUCCEED),
    (UC, End.NO_EFFECT, Facts(), Do.DEAD_LETTER),
    (UC, End.ABORT, Facts(), Do.DEAD_LETTER),
    (UC, End.NOT_STARTED, Facts(), Do.RETRY),
    (UC, End.NOT_STARTED, Facts(retries_left=False), Do.DEAD_LETTER),
    (UC, End.TRANSIENT, Facts(), Do.RETRY),
    (UC, End.UNKNOWN, Facts(), Do.RETRY),
    (UC, End.ABANDONED, Facts(), Do.RETRY_AFTER_DOUBT),
    (UC, End.INTERRUPTED, Facts(), Do.RETRY_AFTER_DOUBT),
    *((UC, end, Facts(retries_left=False), Do.DEAD_LETTER) for end in sorted(MAY_HAVE_LANDED)),
    # a person settles an undo (a dead letter), or a parked saga, by hand
    (RS, Tick.NOW, Facts(can_land=True), Do.REFUSE),
    (RS, Tick.NOW, Facts(undo_can_land=True), Do.REFUSE),
    (RS, Tick.NOW, Facts(undo_running=True, undo_can_land=True), Do.REFUSE),
    (RS, Tick.NOW, Facts(), Do.BY_HAND),
    (G, Tick.NOW, Facts(), Do.GO),
    # a step of the unit did not succeed
    (P, Outcome.FAILED, Facts(), Do.COMPENSATE),
    (P, Outcome.FAILED, Facts(passed_pivot=True), Do.NEEDS_HUMAN),
    (P, Outcome.UNKNOWN, Facts(), Do.COMPENSATE),
    (P, Outcome.UNKNOWN, Facts(is_pivot=True), Do.NEEDS_HUMAN),
    (P, Outcome.UNKNOWN, Facts(passed_pivot=True), Do.NEEDS_HUMAN),
    # the gated step is next
    (A, Approval.NONE, Facts(), Do.GO),
    (A, Approval.NONE, Facts(needed=True), Do.ASK),
    (A, Approval.PENDING, Facts(), Do.WAIT_FOR_PERSON),
    (A, Approval.PENDING, Facts(expired=True), Do.EXPIRE),
    (A, Approval.APPROVED, Facts(), Do.GO),
    # an approval that ran out while the plan was re-checked is not acted on
    (A, Approval.APPROVED, Facts(expired=True), Do.EXPIRE),
    (A, Approval.REJECTED, Facts(), Do.STOP),
    (A, Approval.EXPIRED, Facts(expired=True), Do.STOP),
    # a person resumes a parked saga from a step: a saga compensating goes back, never on
    *((phase, seen, BACK, Do.REFUSE) for phase in (BF, AF, XF) for seen in Standing),
    # before the step: what had not succeeded is settled by the person ...
    (BF, DONE, Facts(), Do.KEEP),
    (BF, NEW, LATE, Do.BY_HAND),
    (BF, NONE, LATE, Do.BY_HAND),
    (BF, DOUBT, LATE, Do.BY_HAND),
    (BF, DOUBT, PIVOT, Do.BY_HAND),  # a person found the capture made, and it cannot land
    # ... never while an attempt may still land, never before the point of no return
    (BF, DOUBT, Facts(can_land=True, compensable=False), Do.REFUSE),
    (BF, DOUBT, Facts(can_land=True, compensable=False, is_pivot=True), Do.REFUSE),
    (BF, NEW, Facts(compensable=True), Do.REFUSE),
    (BF, NONE, Facts(compensable=True), Do.REFUSE),
    (BF, DOUBT, Facts(compensable=True), Do.REFUSE),
    # ... and the point of no return is never passed by hand without having run
    (BF, NEW, PIVOT, Do.REFUSE),
    (BF, NONE, PIVOT, Do.REFUSE),
    # the step itself runs, unless it is done or in doubt (nothing in doubt is called again)
    (AF, NEW, Facts(), Do.GO),
    (AF, NONE, Facts(), Do.GO),
    (AF, DONE, Facts(), Do.REFUSE),
    (AF, DOUBT, Facts(), Do.REFUSE),
    (AF, DOUBT, Facts(can_land=False, repeatable=True), Do.REFUSE),
    # after it: in their turn, unless one in doubt would be called again
    (XF, DONE, Facts(), Do.KEEP),
    (XF, NEW, Facts(), Do.KEEP),
    (XF, NONE, Facts(), Do.KEEP),
    (XF, DOUBT, Facts(), Do.REFUSE),
]


@pytest.mark.parametrize(("phase", "seen", "facts", "want"), CASES)
def test_each_row(phase: Phase, seen: Seen, facts: Facts, want: Do) -> None:
    assert decide(phase, seen, facts).do is want


def test_every_declared_row_is_exercised_by_the_cases() -> None:
    with recording() as hits:
        for phase, seen, facts, _ in CASES:
            decide(phase, seen, facts)
    missed = [row.id for row in TABLE if row.id not in hits]
    assert missed == []


def test_every_declared_pair_answers_every_set_of_facts() -> None:
    """Each set of the facts a pair's rows read (the others cannot change its answer)."""
    assert {f.name for f in fields(Facts)} >= {c.lstrip("!") for r in TABLE for c in r.when}
    for phase, seen in {(row.phase, row.seen) for row in TABLE}:
        names = sorted(
            {c.lstrip("!") for r in TABLE if (r.phase, r.seen) == (phase, seen) for c in r.when}
        )
        for values in itertools.product((False, True), repeat=len(names)):
            # raises Impossible when no row accepts them
            decide(phase, seen, Facts(**dict(zip(names, values, strict=True))))


def test_every_other_pair_is_impossible() -> None:
    declared = {(row.phase, row.seen) for row in TABLE}
    everything = {
        (p, s) for p in Phase for s in (*End, *Found, *Tick, *Outcome, *Approval, *Standing)
    }
    assert declared | IMPOSSIBLE == everything
    assert not declared & IMPOSSIBLE
    for phase, seen in IMPOSSIBLE:
        with pytest.raises(Impossible):
            decide(phase, seen, Facts())


def test_no_row_is_shadowed_and_every_fact_exists() -> None:
    check_table()


def test_no_call_after_its_not_after() -> None:
    assert may_start(9.999, 10.0)
    assert not may_start(10.0, 10.0)
    assert not may_start(11.0, 10.0)


def test_no_decision_without_a_reason() -> None:
    assert all(row.why for row in TABLE)


def _written_with(kind: str) -> list[tuple[str, set[str]]]:
    """Wherever the package writes an event of ``kind`` (``.event(EventType.<kind>, ...)``):
    the file, and every kind the same write holds (the list, or the ``emit``, it is in)."""
    import ast
    from pathlib import Path

    import pivotal

    def kinds(node: ast.AST) -> set[str]:
        return {
            n.args[0].attr
            for n in ast.walk(node)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "event"
            and n.args
            and isinstance(n.args[0], ast.Attribute)
        }

    found = []
    for path in Path(pivotal.__file__).parent.rglob("*.py"):
        source = path.read_text()
        if f"EventType.{kind}" not in source:
            continue
        tree = ast.parse(source)
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if kind not in kinds(node) or not isinstance(node, ast.Call):
                continue
            if node.func.attr != "event":  # type: ignore[attr-defined]
                continue
            write: ast.AST = node
            while write in parents and not (
                isinstance(write, ast.List)
                or (isinstance(write, ast.Call) and getattr(write.func, "attr", "") == "emit")
            ):
                write = parents[write]
            found.append((path.name, kinds(write)))
    return found


@pytest.mark.parametrize("kind", ["APPROVAL_REJECTED", "APPROVAL_EXPIRED"])
def test_a_rejection_or_an_expiry_is_written_with_the_start_of_compensation(kind: str) -> None:
    """Why the gate's rows for a rejected or expired approval are unreachable: every write
    of either holds the start of compensation, and a compensating saga is compensated before
    any gate is asked (``Driver._drive``)."""
    writes = _written_with(kind)
    assert writes, f"nothing writes {kind}"
    for where, together in writes:
        assert "COMPENSATION_STARTED" in together, f"{where} writes {kind} alone"
    unreachable = {row.id for row in TABLE if row.unreachable}
    assert f"gate/{kind.split('_')[1].lower()}/*" in unreachable
