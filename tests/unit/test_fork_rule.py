"""Forking a finished saga (``pivotal.orchestration.fork``), as tables: which sagas may be forked at
the ledger's ``now``, how an edit is read, and which edits of a plan are refused (with the
validator's errors) before anything is submitted."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from pivotal import parse_plan
from pivotal.declarations.plan import ArgChange, Plan
from pivotal.declarations.plan_errors import ErrorCode
from pivotal.errors import InvalidInput, PlanRejected
from pivotal.examples.commerce import create_app
from pivotal.orchestration.fork import Edit, edited, fork_id, parse_edit, refusal
from pivotal.sagas.state import SagaState, SagaStatus, StepRecord, StepStatus, UndoStatus

NOW = 1000.0


def saga(status: SagaStatus, **changes: Any) -> SagaState:
    """A saga of two steps that succeeded, ended ``status``; ``changes`` to its step 1."""
    steps = tuple(
        StepRecord(index=i, name=n, kind="compensable", status=StepStatus.SUCCEEDED, attempts=1)
        for i, n in enumerate(("reserve_stock", "charge_payment"))
    )
    steps = (steps[0], replace(steps[1], **changes))
    return SagaState(
        saga_id="s-1",
        catalogue="checkout",
        plan_digest="d",
        provenance_ref="p",
        status=status,
        steps=steps,
        created_at=1.0,
        updated_at=900.0,
    )


FINISHED = (
    SagaStatus.COMPLETED,
    SagaStatus.COMPENSATED,
    SagaStatus.COMPENSATION_FAILED,
    SagaStatus.RESOLVED,
)

REFUSALS: list[tuple[str, SagaState, str | None]] = [
    *((f"{s.value}: forked", saga(s), None) for s in FINISHED),
    (
        "compensated, its doubt passed",
        saga(SagaStatus.COMPENSATED, doubt_until=NOW, undo_doubt_until=NOW - 1),
        None,
    ),
    (
        "compensation_failed, an undo dead-lettered (a person's, not the fork's)",
        saga(SagaStatus.COMPENSATION_FAILED, undo_status=UndoStatus.DEAD_LETTERED),
        None,
    ),
    (
        "compensated, an undo undone only in part",
        saga(SagaStatus.COMPENSATED, undo_status=UndoStatus.PARTIAL),
        None,
    ),
    (
        "needs_human: resumed or resolved first",
        saga(SagaStatus.NEEDS_HUMAN),
        "is needs_human: only a finished saga",
    ),
    *(
        (f"{s.value}: not finished", saga(s), f"is {s.value}: only a finished saga")
        for s in SagaStatus
        if s not in FINISHED and s is not SagaStatus.NEEDS_HUMAN
    ),
    (
        "completed, an attempt may still land",
        saga(SagaStatus.COMPLETED, doubt_until=NOW + 2),
        "charge_payment (step 1) may still take effect for 2.0 s",
    ),
    (
        "compensated, an undo may still land",
        saga(SagaStatus.COMPENSATED, undo_doubt_until=NOW + 4),
        "the undo of charge_payment (step 1) may still take effect for 4.0 s",
    ),
    (
        "compensation_failed, an undo not ended",
        saga(SagaStatus.COMPENSATION_FAILED, undo_status=UndoStatus.RETRY_WAIT),
        "undo not ended: charge_payment (step 1)",
    ),
]


@pytest.mark.parametrize(("state", "said"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_which_sagas_are_forked(state: SagaState, said: str | None) -> None:
    found = refusal(state, NOW)
    if said is None:
        assert found is None
    else:
        assert found is not None
        assert said in found, found


def test_every_saga_status_has_a_row() -> None:
    named = {r[1].status for r in REFUSALS}
    assert named == set(SagaStatus)


EDITS: list[tuple[str, Edit | None]] = [
    ("2.amount=1500", Edit("2", "amount", 1500)),
    ("0.sku=B-7", Edit("0", "sku", "B-7")),
    ('0.sku="123"', Edit("0", "sku", "123")),
    ("0.sku=123", Edit("0", "sku", 123)),
    ("charge_payment.amount=24.95", Edit("charge_payment", "amount", 24.95)),
    ('1.amount="24.95"', Edit("1", "amount", "24.95")),
    ("0.warehouse=", Edit("0", "warehouse", "")),
    ('3.tags=["a", "b"]', Edit("3", "tags", ["a", "b"])),
    ("amount=1500", None),
    ("2.=1500", None),
    ("2.amount", None),
    (".amount=1", None),
    ("2.amount.value=1", None),
    ("2.9lives=1", None),
]


@pytest.mark.parametrize(("text", "read"), EDITS, ids=[e[0] for e in EDITS])
def test_how_an_edit_is_read(text: str, read: Edit | None) -> None:
    if read is None:
        with pytest.raises(InvalidInput, match=r"is not STEP\.ARGUMENT=VALUE"):
            parse_edit(text)
    else:
        assert parse_edit(text) == read


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Any:
    app = create_app(tmp_path_factory.mktemp("fork") / "commerce.db")
    yield app.catalogue("checkout")
    app.services.close()


def plan() -> Plan:
    call = {"order_id": "o-1"}
    return parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {"name": "reserve_stock", "args": call | {"sku": "sku-1", "quantity": 2}},
                {"name": "charge_payment", "args": call | {"amount": "49.90"}},
                {"name": "create_shipment", "args": call},
            ],
        }
    )


REFUSED_EDITS: list[tuple[str, list[str], ErrorCode | None, str]] = [
    ("no call 5", ["5.amount=1"], ErrorCode.UNKNOWN_STEP, "the plan has no call 5"),
    ("no such step", ["refund.amount=1"], ErrorCode.UNKNOWN_STEP, "does not call 'refund'"),
    ("a digit that is no index", ["\u00b2.amount=1"], ErrorCode.UNKNOWN_STEP, "does not call"),
    ("no such argument", ["1.price=1"], ErrorCode.INVALID_ARGS, "has no argument 'price'"),
    ("by name, no such argument", ["create_shipment.sku=x"], ErrorCode.INVALID_ARGS, "sku"),
    ("the same argument twice", ["1.amount=1", "charge_payment.amount=2"], None, "twice"),
    ("no edit at all", [], None, "at least one argument"),
]


@pytest.mark.parametrize(
    ("edits", "code", "said"), [r[1:] for r in REFUSED_EDITS], ids=[r[0] for r in REFUSED_EDITS]
)
def test_edits_that_name_nothing_are_refused(
    checkout: Any, edits: list[str], code: ErrorCode | None, said: str
) -> None:
    with pytest.raises(PlanRejected if code else InvalidInput) as refused:
        edited(plan(), [parse_edit(e) for e in edits], checkout)
    if isinstance(refused.value, PlanRejected):
        assert [e.code for e in refused.value.errors] == [code]
        assert said in refused.value.errors[0].message
    else:
        assert said in refused.value.message


def test_edits_change_only_what_they_name(checkout: Any) -> None:
    edits = [parse_edit("0.quantity=1"), parse_edit('charge_payment.amount="24.95"')]
    changed, changes = edited(plan(), edits, checkout)
    args = [f.call.args for f in changed.calls()]
    assert args[0] == {"order_id": "o-1", "sku": "sku-1", "quantity": 1}
    assert args[1] == {"order_id": "o-1", "amount": "24.95"}
    assert args[2] == {"order_id": "o-1"}
    assert changes == [
        ArgChange(step=0, name="reserve_stock", argument="quantity", was=2, now=1),
        ArgChange(step=1, name="charge_payment", argument="amount", was="49.90", now="24.95"),
    ]
    default = edited(plan(), [parse_edit("2.warehouse=B")], checkout)[1]
    assert default[0].was is None  # the plan left it to its default


@pytest.mark.parametrize(
    ("text", "was", "now"),
    [
        ("1.amount=24.95", "49.90", "24.95"),  # money the plan gave as text stays text
        ("1.amount= 25 ", "49.90", "25"),
        ('1.amount="24.95"', "49.90", "24.95"),
        ("0.quantity=1", 2, 1),
        ("0.quantity=1.5", 2, 1.5),
        ("0.sku=true", "sku-1", True),  # not a number: as JSON read it
        ("0.sku=null", "sku-1", None),
        ("2.warehouse=7", None, 7),  # left to its default: as JSON read it
    ],
)
def test_a_number_for_an_argument_given_as_text_stays_text(text: str, was: Any, now: Any) -> None:
    assert parse_edit(text).for_argument(was) == now
    assert type(parse_edit(text).for_argument(was)) is type(now)


def test_a_fork_id_is_one_per_saga_edits_and_person() -> None:
    one = [ArgChange(step=0, name="reserve_stock", argument="quantity", was=2, now=1)]
    other = [ArgChange(step=0, name="reserve_stock", argument="quantity", was=2, now=3)]
    assert fork_id("s-1", one, "alice") == fork_id("s-1", one, "Alice\u200b")
    assert fork_id("s-1", one, "alice").startswith("fk_")
    assert (
        len(
            {
                fork_id("s-1", one, "alice"),
                fork_id("s-2", one, "alice"),
                fork_id("s-1", other, "alice"),
                fork_id("s-1", one, "bob"),
            }
        )
        == 4
    )
