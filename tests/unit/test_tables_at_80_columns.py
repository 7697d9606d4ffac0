"""The CLI's tables read in a terminal of 80 columns: no line is wider, no column shrinks
to nothing, an id is shown whole on one line (when the ids cannot all be whole in columns,
each row becomes a record: see test_tables_keep_ids_whole), and long text folds onto more
lines instead of vanishing."""

from __future__ import annotations

import io
import re
from decimal import Decimal

import pytest
from rich.console import Console
from rich.table import Table

from pivotal.cli.outbox import messages_table
from pivotal.sagas.outbox import Message
from pivotal.sagas.state import ApprovalRecord, ApprovalStatus, SagaStatus
from pivotal.store.base import DeadLetter, PendingApproval, SagaSummary
from pivotal.views import render

WIDTH = 80
SHORT_ID = "order-4471"
SCOPED_ID = "planner-bot.a92500722100.order-4471"  # an agent's saga id, as the CLI sees it
RATIONALE = "Order 4471 was paid by card: take it, then send the receipt."
REASON = "capture_payment amount=180 exceeds the approval threshold 150"
ERROR = "ConnectError: [Errno 111] Connection refused by the receiver"


def shown(table: Table, width: int = WIDTH) -> list[str]:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(table)
    return console.export_text().splitlines()


def columns(lines: list[str]) -> list[int]:
    """The width of each column, read off the table's top border."""
    return [len(part) for part in re.split(r"[┳┏┓]", lines[0])[1:-1]]


def cell_text(lines: list[str], column: int) -> str:
    """What one column shows, its lines joined (a folded word comes back whole)."""
    body = [line for line in lines if line.startswith("│")]
    parts = [re.split(r"[│]", line)[column + 1].strip() for line in body]
    return "".join(parts) if parts else ""


def approvals(saga_id: str) -> Table:
    approval = ApprovalRecord(
        step=1,
        status=ApprovalStatus.PENDING,
        reason=REASON,
        rationale=RATIONALE,
        requested_at=0.0,
        expires_at=1_800_000_000.0,
    )
    return render.approvals_table(
        [
            PendingApproval(
                saga_id, "payments", "capture_payment", approval, Decimal("180.00"), "EUR"
            )
        ]
    )


def messages(saga_id: str) -> Table:
    return messages_table(
        [
            Message(
                id=f"{saga_id}:{n}",
                saga_id=saga_id,
                type=kind,
                payload={},
                created_at=0.0,
                seq=n,
                status=status,
                attempts=3,
                next_attempt_at=1_800_000_000.0,
                last_error=ERROR,
            )
            for n, (kind, status) in enumerate(
                [("saga.compensation_failed", "dead"), ("approval.requested", "pending")]
            )
        ]
    )


def sagas(saga_id: str) -> Table:
    summary = SagaSummary(saga_id, "payments", SagaStatus.NEEDS_HUMAN, ERROR, 0.0, 1e9)
    return render.sagas_table([summary])


def dead_letters(saga_id: str) -> Table:
    letter = DeadLetter(7, saga_id, 0, "hold_payment", f"{saga_id}:0:undo", ERROR, 5, "open", 0.0)
    return render.dead_letters_table([letter])


TABLES = {"approvals": approvals, "outbox": messages, "sagas": sagas, "dead letters": dead_letters}


@pytest.mark.parametrize("saga_id", [SHORT_ID, SCOPED_ID])
@pytest.mark.parametrize("name", TABLES)
def test_no_line_is_wider_than_the_terminal_and_no_column_vanishes(name: str, saga_id: str) -> None:
    lines = shown(TABLES[name](saga_id))
    assert max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    if lines[0].startswith("┏"):  # columns, not records
        assert min(columns(lines)) >= 4, "\n".join(lines)  # "id" and padding: the narrowest


@pytest.mark.parametrize("name", TABLES)
def test_a_short_id_is_whole_on_one_line(name: str) -> None:
    lines = shown(TABLES[name](SHORT_ID))
    assert any(SHORT_ID in line for line in lines), "\n".join(lines)
    cells = [cell.strip() for line in lines for cell in line.split("│")]
    assert not [c for c in cells if c.startswith(SHORT_ID[:5]) and "…" in c]  # text may be cut


def test_a_long_id_is_never_cut() -> None:
    lines = shown(approvals(SCOPED_ID))
    assert lines[0].startswith(SCOPED_ID)  # whole, on the record's first line


def test_at_80_columns_an_approval_is_a_record_with_its_amount_and_texts_whole() -> None:
    lines = shown(approvals(SHORT_ID))
    assert lines[0].split() == [SHORT_ID, "capture_payment"]
    assert "  catalogue: payments  amount: EUR 180.00" in lines
    assert f"  reason: {REASON}" in lines
    assert f"  rationale: {RATIONALE}" in lines


def test_the_rationale_and_the_reason_fold_rather_than_vanish() -> None:
    lines = shown(approvals(SHORT_ID), width=110)
    widths = columns(lines)
    assert cell_text(lines, 3) == "EUR 180.00"  # the amount at stake, in its currency
    assert widths[4] >= render.TEXT_MIN
    assert widths[5] >= render.TEXT_MIN
    assert cell_text(lines, 4).replace(" ", "") == REASON.replace(" ", "")
    assert cell_text(lines, 5).replace(" ", "") == RATIONALE.replace(" ", "")
    assert "2027-01-15" in cell_text(lines, 6)  # the date, whole, above its time


def test_the_outbox_keeps_its_ids_whole_and_breaks_no_word() -> None:
    lines = shown(messages(SHORT_ID))
    assert any(f"{SHORT_ID}:0" in line for line in lines)
    assert any(f"{SHORT_ID}:1" in line for line in lines)
    text = "\n".join(lines)
    assert "saga.compensation_failed" in text  # a type is whole: records, at this width
    assert all(word in text for word in ERROR.split())
    assert max(len(line) for line in lines) <= WIDTH


def test_a_wide_terminal_shows_every_cell_on_one_line() -> None:
    lines = shown(approvals(SCOPED_ID), width=240)
    row = next(line for line in lines if SCOPED_ID in line)
    assert RATIONALE in row
    assert REASON in row
