"""An overdue retry: its time came on the ledger's clock and it still waits (nothing picked it
up). Decided as a table; shown under the step's status (or its undo's) by ``sagas show``."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pivotal.sagas.overdue import late, step_overdue, undo_overdue
from pivotal.sagas.state import SagaState, SagaStatus, StepRecord, StepStatus, UndoStatus
from pivotal.store.base import DeadLetter
from pivotal.views import render

DUE = 1_800_000_000.0


@pytest.mark.parametrize(
    ("due", "waiting", "now", "expected"),
    [
        (DUE, True, DUE + 125, 125.0),  # due, still waiting: late by the difference
        (DUE, True, DUE, None),  # due this very moment: not late yet
        (DUE, True, DUE - 5, None),  # not due yet
        (DUE, False, DUE + 125, None),  # picked up (running, or settled)
        (None, True, DUE + 125, None),  # nothing scheduled
        (DUE, True, None, None),  # no time known: never marked
    ],
)
def test_when_a_retry_is_late(
    due: float | None, waiting: bool, now: float | None, expected: float | None
) -> None:
    assert late(due, waiting, now) == expected


WAITING = StepRecord(0, "reserve_stock", "compensable", status=StepStatus.RETRY_WAIT,
                     attempts=4, next_attempt_at=DUE)  # fmt: skip
RUNNING = StepRecord(0, "reserve_stock", "compensable", status=StepStatus.STARTED,
                     attempts=5, next_attempt_at=DUE)  # fmt: skip
UNDO_WAITING = StepRecord(0, "reserve_stock", "compensable", status=StepStatus.SUCCEEDED,
                          undo_status=UndoStatus.RETRY_WAIT, undo_attempts=2,
                          undo_next_attempt_at=DUE)  # fmt: skip
PARKED = StepRecord(0, "reserve_stock", "compensable", status=StepStatus.SUCCEEDED,
                    undo_status=UndoStatus.DEAD_LETTERED, undo_attempts=5,
                    undo_next_attempt_at=DUE)  # fmt: skip


@pytest.mark.parametrize(
    ("record", "step", "undo"),
    [
        (WAITING, "overdue 2m 5s", None),
        (RUNNING, None, None),
        (UNDO_WAITING, None, "overdue 2m 5s"),
        (PARKED, None, "overdue 2m 5s"),  # a dead letter the sweep should have retried
    ],
)
def test_the_step_or_its_undo_is_overdue(
    record: StepRecord, step: str | None, undo: str | None
) -> None:
    assert step_overdue(record, DUE + 125) == step
    assert undo_overdue(record, DUE + 125) == undo


def shown(now: float | None) -> str:
    state = SagaState("s1", "checkout", "d", "p", SagaStatus.RUNNING, (WAITING,), 0.0, DUE)
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(render.steps_table(state, now=now))
    return console.export_text()


def test_sagas_show_marks_the_overdue_retry_and_says_what_try_counts() -> None:
    text = shown(DUE + 125)
    assert "retry_wait" in text
    assert "overdue 2m 5s" in text
    assert "try: attempts of the step's action" in text
    assert "overdue" not in shown(DUE - 1)


def test_dead_letters_list_says_what_its_two_numbers_of_tries_count() -> None:
    letter = DeadLetter(7, "s1", 0, "reserve_stock", "s1:0:undo", "busy", 4, "open", 0.0, 1)
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(render.dead_letters_table([letter]))
    text = console.export_text()
    assert "4 + 1" in text
    assert "tries: attempts before it was parked + retries since" in text
