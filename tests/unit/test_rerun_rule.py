"""When the plan of a saga may run again (``pivotal.orchestration.rerun.refusal``), as a table: the
saga's state, the ledger's ``now``, and what the refusal must say (None: it may run again)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pivotal.declarations.plan import Plan, Provenance, Rerun, StepCall
from pivotal.orchestration.rerun import refusal
from pivotal.sagas.state import SagaState, SagaStatus, StepRecord, StepStatus, UndoStatus

NOW = 1000.0


def step(index: int, name: str, **changes: object) -> StepRecord:
    """A compensable step that succeeded and was undone in full, with ``changes``."""
    done = StepRecord(
        index=index,
        name=name,
        kind="compensable",
        status=StepStatus.SUCCEEDED,
        attempts=1,
        undo_status=UndoStatus.DONE,
        undo_attempts=1,
    )
    return replace(done, **changes)  # type: ignore[arg-type]


def saga(*steps: StepRecord, status: SagaStatus = SagaStatus.COMPENSATED) -> SagaState:
    base = (
        step(0, "reserve_stock"),
        step(1, "charge_payment"),
        StepRecord(index=2, name="create_shipment", kind="retriable", status=StepStatus.FAILED),
    )
    merged = tuple(next((s for s in steps if s.index == b.index), b) for b in base)
    return SagaState(
        saga_id="s-1",
        catalogue="checkout",
        plan_digest="d",
        provenance_ref="p",
        status=status,
        steps=merged,
        created_at=1.0,
        updated_at=900.0,
    )


ROWS: list[tuple[str, SagaState, tuple[str, ...] | None]] = [
    ("compensated, every undo done", saga(), None),
    (
        "compensated, a hold lapsed on its own",
        saga(step(0, "reserve_stock", undo_status=UndoStatus.LAPSED, undo_attempts=0)),
        None,
    ),
    (
        "compensated, a dead letter resolved by a person",
        saga(step(1, "charge_payment", undo_status=UndoStatus.RESOLVED)),
        None,
    ),
    (
        "compensated, a step that failed before any effect",
        saga(step(1, "charge_payment", status=StepStatus.FAILED, undo_status=UndoStatus.NONE)),
        None,
    ),
    (
        "compensated, doubts that passed",
        saga(step(0, "reserve_stock", doubt_until=NOW - 1, undo_doubt_until=NOW)),
        None,
    ),
    (
        "an undo restored only part",
        saga(step(0, "reserve_stock", undo_status=UndoStatus.PARTIAL)),
        ("undone only in part: reserve_stock (step 0)",),
    ),
    (
        "two undos restored only part",
        saga(
            step(0, "reserve_stock", undo_status=UndoStatus.PARTIAL),
            step(1, "charge_payment", undo_status=UndoStatus.PARTIAL),
        ),
        ("undone only in part: reserve_stock (step 0), charge_payment (step 1)",),
    ),
    (
        "a dead letter not resolved",
        saga(step(1, "charge_payment", undo_status=UndoStatus.DEAD_LETTERED)),
        ("undo dead-lettered, not resolved: charge_payment (step 1)",),
    ),
    (
        "an undo started, not ended",
        saga(step(1, "charge_payment", undo_status=UndoStatus.STARTED)),
        ("undo not ended: charge_payment (step 1)",),
    ),
    (
        "an undo waiting for its retry",
        saga(step(1, "charge_payment", undo_status=UndoStatus.RETRY_WAIT)),
        ("undo not ended: charge_payment (step 1)",),
    ),
    (
        "an attempt of a step may still land",
        saga(step(1, "charge_payment", doubt_until=NOW + 12.5)),
        ("charge_payment (step 1) may still take effect for 12.5 s",),
    ),
    (
        "an attempt of an undo may still land",
        saga(step(0, "reserve_stock", undo_doubt_until=NOW + 3)),
        ("the undo of reserve_stock (step 0) may still take effect for 3.0 s",),
    ),
    (
        "a partial undo and a doubt: both named",
        saga(
            step(0, "reserve_stock", undo_status=UndoStatus.PARTIAL),
            step(1, "charge_payment", doubt_until=NOW + 1),
        ),
        ("undone only in part: reserve_stock (step 0)", "charge_payment (step 1) may still"),
    ),
    *(
        (
            f"the saga is {status.value}",
            saga(status=status),
            (f"saga s-1 is {status.value}: only a compensated saga runs its plan again",),
        )
        for status in SagaStatus
        if status is not SagaStatus.COMPENSATED
    ),
]


@pytest.mark.parametrize(("state", "said"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_refusal(state: SagaState, said: tuple[str, ...] | None) -> None:
    found = refusal(state, NOW)
    if said is None:
        assert found is None
        return
    assert found is not None
    for text in said:
        assert text in found


def test_every_saga_status_and_undo_status_has_a_row() -> None:
    statuses = {r[1].status for r in ROWS}
    undos = {s.undo_status for r in ROWS for s in r[1].steps}
    assert statuses == set(SagaStatus)
    assert undos == set(UndoStatus)


def test_a_doubt_ends_on_the_ledgers_clock() -> None:
    state = saga(step(1, "charge_payment", doubt_until=NOW))
    assert refusal(state, NOW - 0.5) is not None
    assert refusal(state, NOW) is None


def test_a_rerun_without_a_reason_keeps_the_digest_and_record_it_had() -> None:
    """``rerun_of.reason`` (a bulk rerun's) came later: a rerun recorded without one keeps
    its plan digest, its provenance record's id and its stored JSON."""
    plan = Plan(
        catalogue="checkout",
        steps=[StepCall(name="reserve_stock", args={"sku": "A-1"})],
        provenance=Provenance(actor_id="ana", rerun_of=Rerun(saga_id="s-1", by="ana")),
    )
    assert plan.digest() == "abac6062993376ba541447b7507dea83d5f7acfdd2ea7ae4c0929609abe3b431"
    assert plan.provenance.ref() == "prov_2c75331faf62350b"
    assert '"rerun_of":{"saga_id":"s-1","by":"ana"}' in plan.to_json()
    why = Rerun(saga_id="s-1", by="ana", reason="card fixed")
    given = plan.model_copy(
        update={"provenance": plan.provenance.model_copy(update={"rerun_of": why})}
    )
    assert '"rerun_of":{"saga_id":"s-1","by":"ana","reason":"card fixed"}' in given.to_json()
    assert Plan.model_validate_json(given.to_json()) == given
    assert given.digest() != plan.digest()
