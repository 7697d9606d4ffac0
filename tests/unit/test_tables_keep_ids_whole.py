"""Every table the CLI prints keeps what a person copies whole on one line at 80 columns:
saga ids, step names, undo keys, message ids, token ids, the sagas a worker leases. The
text beside them (reasons, names, notes) takes the squeeze instead."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from rich.console import Console, RenderableType

from pivotal.cli.outbox import messages_table
from pivotal.cli.report import group_table, partial_table
from pivotal.cli.tokens import tokens_table
from pivotal.cli.workers import workers_view
from pivotal.declarations.plan import ActorType, Provenance
from pivotal.planning.shadow import Reason, ShadowReport
from pivotal.sagas.outbox import Message
from pivotal.sagas.state import (
    ApprovalRecord,
    ApprovalStatus,
    SagaState,
    SagaStatus,
    StepRecord,
    StepStatus,
)
from pivotal.store.base import DeadLetter, PendingApproval, SagaSummary, Token, WorkerInfo
from pivotal.views import render
from pivotal.views.planning_view import shadow_report_view
from pivotal.views.report import CauseGroup, CauseKind, PartialUndo, SagaEntry, cause

WIDTH = 80
SAGA = "planner-bot.a92500722100.order-4471"  # an agent's saga id, as the CLI sees it
OTHER = "planner-bot.a92500722100.order-4472"
STEP = "reserve_warehouse_stock"
TOKEN = "tok_3f9a1c2b7d4e"
ERROR = "ConnectError: [Errno 111] Connection refused by the receiver at 10.0.3.17:443"
REASON = "capture_payment amount=180 exceeds the approval threshold 150"
AT = 1_800_000_000.0

Case = Callable[[], tuple[RenderableType, list[str]]]


def approvals() -> tuple[RenderableType, list[str]]:
    approval = ApprovalRecord(1, ApprovalStatus.PENDING, REASON, REASON, 0.0, AT)
    return render.approvals_table([PendingApproval(SAGA, "payments", STEP, approval)]), [
        SAGA,
        STEP,
    ]


def sagas() -> tuple[RenderableType, list[str]]:
    summary = SagaSummary(SAGA, "fulfilment", SagaStatus.NEEDS_HUMAN, ERROR, 0.0, AT)
    return render.sagas_table([summary]), [SAGA]


def dead_letters() -> tuple[RenderableType, list[str]]:
    key = f"{SAGA}:0:undo"
    letter = DeadLetter(7, SAGA, 0, STEP, key, ERROR, 5, "open", 0.0)
    return render.dead_letters_table([letter]), [SAGA, key]


def outbox() -> tuple[RenderableType, list[str]]:
    message = Message(
        f"{SAGA}:3", SAGA, "saga.compensation_failed", {}, 0.0, seq=12, status="dead",
        attempts=8, last_error=ERROR,
    )  # fmt: skip
    return messages_table([message]), [f"{SAGA}:3"]


def tokens() -> tuple[RenderableType, list[str]]:
    found = [
        Token(TOKEN, "Alice Fernández-Whitaker (payments approvals)", "approver", AT),
        Token("tok_0b1c2d3e4f5a", "planner-bot", "agent", AT, AT + 60, True),
    ]
    return tokens_table(found), [TOKEN, "tok_0b1c2d3e4f5a"]


def workers() -> tuple[RenderableType, list[str]]:
    worker = WorkerInfo("ip-10-0-3-17-4242", AT, AT, None, "0.9.0", ("checkout",), 2.0)
    busy = WorkerInfo("ip-10-0-3-18-77", AT, AT, None, "0.9.0", ("fulfilment",), 2.0)
    leased = WorkerInfo(busy.name, AT, AT, None, "0.9.0", busy.catalogues, 2.0, (SAGA, OTHER))
    return workers_view([worker, leased], AT + 1), [worker.name, busy.name, SAGA, OTHER]


def _group(*catalogues: str) -> CauseGroup:
    why = cause(CauseKind.STEP_FAILED, STEP, "permanent")
    who = Provenance(actor_type=ActorType.AGENT, actor_id="planner-bot", model="gpt-5.1-mini")
    entries = [
        SagaEntry(
            saga_id=saga_id,
            catalogue=catalogue,
            status=SagaStatus.COMPENSATED,
            reason=ERROR,
            cause=why,
            created_at=AT,
            updated_at=AT,
            provenance_ref="p",
            provenance=who,
            partial_undos=[PartialUndo(step=STEP, index=1, note="refunded, fee kept")],
        )
        for saga_id, catalogue in zip((SAGA, OTHER), catalogues, strict=False)
    ]
    return CauseGroup(cause=why, count=len(entries), statuses={}, sagas=entries)


def report_group() -> tuple[RenderableType, list[str]]:
    return group_table(_group("fulfilment", "fulfilment"), 10), [SAGA, OTHER]


def report_group_of_two_catalogues() -> tuple[RenderableType, list[str]]:
    return group_table(_group("fulfilment", "checkout"), 10), [SAGA, OTHER]


def report_partial() -> tuple[RenderableType, list[str]]:
    from pivotal.views.report import PlannerReport, Report

    planner = PlannerReport(runs=0, rejected_attempts=0, outcomes={}, codes=[], escalations=[])
    found = Report(
        since=0.0, until=AT, generated_at=AT, sagas=1, by_status={}, causes=[_group("f")],
        partial_undos=1, planner=planner, truncated=False, truncated_lists=[], limit=100,
    )  # fmt: skip
    return partial_table(found, 10), [SAGA, STEP]


def shadow_reasons() -> tuple[RenderableType, list[str]]:
    found = ShadowReport("b1", 3, 1, 1, 5, (Reason("argument_not_bound", STEP, 2),))
    return shadow_report_view(found), [STEP, "argument_not_bound"]


def saga_steps() -> tuple[RenderableType, list[str]]:
    state = SagaState(
        SAGA, "fulfilment", "d", "p", SagaStatus.NEEDS_HUMAN,
        (StepRecord(0, STEP, "compensable", status=StepStatus.SUCCEEDED, attempts=1,
                    result={"reservation": "r-1"}),
         StepRecord(1, "send_confirmation_email", "retriable", status=StepStatus.FAILED,
                    attempts=4, error=ERROR)),
        0.0, AT,
    )  # fmt: skip
    return render.steps_table(state), [STEP, "send_confirmation_email"]


TABLES: dict[str, Case] = {
    "approvals list": approvals,
    "sagas list": sagas,
    "dead-letters list": dead_letters,
    "outbox list": outbox,
    "tokens list": tokens,
    "workers": workers,
    "report (a cause)": report_group,
    "report (a cause, two catalogues)": report_group_of_two_catalogues,
    "report (partial undos)": report_partial,
    "shadow report": shadow_reasons,
    "sagas show (steps)": saga_steps,
}


def shown(view: RenderableType, width: int = WIDTH) -> list[str]:
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(view)
    return console.export_text().splitlines()


def test_a_wide_terminal_keeps_the_columns() -> None:
    view, _ = approvals()
    lines = shown(view, width=400)
    assert any(SAGA in line and STEP in line and REASON in line for line in lines)
    assert lines[0].startswith("┏")  # a table, not records


def test_records_when_the_ids_cannot_be_whole_in_columns() -> None:
    view, _ = sagas()
    lines = shown(view)
    assert lines[0] == SAGA  # then its fields, as many to a line as fit
    assert lines[1] == "  catalogue: fulfilment  status: needs_human  updated: 2027-01-15 08:00:00"
    assert lines[2].startswith("  reason: ConnectError")


@pytest.mark.parametrize("name", TABLES)
def test_what_a_person_copies_is_whole_on_one_line_at_80_columns(name: str) -> None:
    view, copied = TABLES[name]()
    lines = shown(view)
    assert max(len(line) for line in lines) <= WIDTH, "\n".join(lines)
    for text in copied:
        assert any(text in line for line in lines), f"{text!r} cut or folded:\n" + "\n".join(lines)


@pytest.mark.parametrize("name", TABLES)
def test_no_header_and_no_short_word_is_broken_at_80_columns(name: str) -> None:
    """Text folds between words: every header, and every word of 20 characters or fewer
    of what the table holds, is whole on one line (a longer word may fold)."""
    view, _ = TABLES[name]()
    text = "\n".join(shown(view))
    columns = getattr(view, "columns", ())
    in_columns = text.lstrip().startswith(("┏", "┌"))  # else records: "header: value"
    for header in [str(c.header) for c in columns] if in_columns else []:
        assert header in text, f"header {header!r} broken:\n{text}"
    cells = [str(cell) for column in getattr(view, "columns", ()) for cell in column._cells]
    for word in {w for cell in cells for w in cell.split() if len(w) <= 20}:
        if "…" in text and word not in text:  # a cell cut short on purpose (… at its end)
            continue
        assert word in text, f"{word!r} broken:\n{text}"
