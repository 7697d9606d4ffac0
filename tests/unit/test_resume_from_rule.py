"""Resuming a parked saga from a step (``engine.resuming``), as a table: the saga as it was
when parked, the step a person names, the ledger's ``now``, and what the machine answers:
the steps settled by hand, or the reason it refuses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pivotal.engine.machine import Standing
from pivotal.engine.resuming import resume_from, standing, step_named
from pivotal.errors import InvalidInput
from pivotal.sagas.state import SagaState, SagaStatus, StepRecord, StepStatus

NOW = 1000.0
KINDS = ("compensable", "compensable", "pivot", "retriable", "retriable")
NAMES = ("reserve_stock", "authorize_payment", "capture_payment", "create_shipment", "confirm")
OK = StepStatus.SUCCEEDED


def parked(*statuses: StepStatus, status: SagaStatus = SagaStatus.RUNNING, **at: Any) -> SagaState:
    """The fulfilment saga as it was when parked: its steps' statuses, in order (the rest
    pending); ``at={index: {field: value}}`` changes a step further."""
    steps = []
    for i, (name, kind) in enumerate(zip(NAMES, KINDS, strict=True)):
        s = statuses[i] if i < len(statuses) else StepStatus.PENDING
        r = StepRecord(
            index=i, name=name, kind=kind, status=s, attempts=int(s is not StepStatus.PENDING)
        )
        steps.append(replace(r, **at.get(f"s{i}", {})))
    return SagaState(
        saga_id="s-1",
        catalogue="fulfilment",
        plan_digest="d",
        provenance_ref="p",
        status=status,
        steps=tuple(steps),
        created_at=1.0,
        updated_at=900.0,
    )


F, U, S, R = StepStatus.FAILED, StepStatus.UNKNOWN, StepStatus.STARTED, StepStatus.RETRY_WAIT
PASSED = {"doubt_until": NOW - 1}  # an attempt that cannot land any more
OPEN = {"doubt_until": NOW + 5}  # one that still may

ROWS: list[tuple[str, SagaState, int, tuple[int, ...] | str]] = [
    ("the shipment failed; go on at it (no effect)", parked(OK, OK, OK, F), 3, ()),
    ("the shipment failed; shipped by hand, go on at the e-mail", parked(OK, OK, OK, F), 4, (3,)),
    (
        "the shipment is in doubt, cannot land; shipped by hand",
        parked(OK, OK, OK, U, s3=PASSED),
        4,
        (3,),
    ),
    (
        "the capture is in doubt and cannot land: a person found it made",
        parked(OK, OK, U, s2=PASSED),
        3,
        (2,),
    ),
    (
        "the capture in doubt, the e-mail settled too (never run)",
        parked(OK, OK, U, s2=PASSED),
        4,
        (2, 3),
    ),
    (
        "a retry that provably took no effect is settled",
        parked(OK, OK, OK, R),
        4,
        (3,),
    ),
    (
        "a step in doubt is not called again",
        parked(OK, OK, OK, U, s3=PASSED),
        3,
        "called again from here",
    ),
    (
        "the pivot in doubt is not called again",
        parked(OK, OK, U, s2=PASSED),
        2,
        "called again from here",
    ),
    ("a started step is not called again", parked(OK, OK, OK, S, s3=OPEN), 3, "called again"),
    (
        "a step that may still land is not settled by hand",
        parked(OK, OK, OK, U, s3=OPEN),
        4,
        "may still land",
    ),
    (
        "the pivot that may still land is not settled by hand",
        parked(OK, OK, U, s2=OPEN),
        3,
        "capture_payment (step 2): an attempt of it may still land",
    ),
    (
        "an interrupted call without a bound may still land",
        parked(OK, OK, OK, S),
        4,
        "may still land",
    ),
    ("a step that succeeded is no place to go on", parked(OK, OK, OK, F), 2, "succeeded already"),
    (
        "a poison saga before the pivot does not skip it",
        parked(OK, OK),
        3,
        "capture_payment (step 2): it is the point of no return and never ran",
    ),
    (
        "nor settles a step before the pivot by hand",
        parked(OK, R),
        2,
        "authorize_payment (step 1): it comes before the point of no return",
    ),
    ("a poison saga before the pivot goes on where it was", parked(OK, R), 1, ()),
    (
        "a saga that was compensating goes back",
        parked(OK, F, status=SagaStatus.COMPENSATING),
        1,
        "it was compensating when parked",
    ),
]


@pytest.mark.parametrize(
    ("before", "start", "want"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_resume_from(before: SagaState, start: int, want: tuple[int, ...] | str) -> None:
    found = resume_from(before, start, NOW)
    if isinstance(want, str):
        assert found.refused, found
        assert want in "; ".join(found.refused)
    else:
        assert found.refused == ()
        assert found.settled == want


def test_a_reason_given_for_many_steps_is_said_once() -> None:
    found = resume_from(parked(OK, F, status=SagaStatus.COMPENSATING), 1, NOW)
    assert len(found.refused) == 1
    assert found.refused[0].startswith("reserve_stock (step 0), authorize_payment (step 1),")


STANDINGS = [
    (StepRecord(0, "a", "retriable", status=OK), Standing.SUCCEEDED),
    (StepRecord(0, "a", "retriable"), Standing.NOT_RUN),
    (StepRecord(0, "a", "retriable", status=F, attempts=1), Standing.NO_EFFECT),
    (StepRecord(0, "a", "retriable", status=R, attempts=1), Standing.NO_EFFECT),
    (StepRecord(0, "a", "retriable", status=R, attempts=1, doubt_until=1.0), Standing.IN_DOUBT),
    (StepRecord(0, "a", "retriable", status=U, attempts=3), Standing.IN_DOUBT),
    (StepRecord(0, "a", "retriable", status=S, attempts=1), Standing.IN_DOUBT),
    (StepRecord(0, "a", "retriable", status=StepStatus.PENDING, attempts=2), Standing.NO_EFFECT),
]


@pytest.mark.parametrize(("record", "want"), STANDINGS)
def test_where_a_step_stands(record: StepRecord, want: Standing) -> None:
    assert standing(record) is want


def test_a_step_is_named_by_its_index_or_its_name() -> None:
    saga = parked(OK)
    assert step_named(saga, "3") == 3
    assert step_named(saga, "confirm") == 4
    for bad, said in (
        ("5", "has no step 5"),
        ("ship", "has no step 'ship'"),
        ("-1", "no step"),
        ("\u00b2", "no step"),
    ):
        with pytest.raises(InvalidInput, match=said):
            step_named(saga, bad)
    twice = replace(saga, steps=(*saga.steps, replace(saga.steps[4], index=5)))
    with pytest.raises(InvalidInput, match="calls confirm 2 times"):
        step_named(twice, "confirm")
