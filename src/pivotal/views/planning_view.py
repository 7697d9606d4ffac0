"""Rich views of planning runs, escalations and shadow reports (CLI and demo)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pivotal.planning.base import Attempt, PlanRequest
from pivotal.planning.records import Escalation, PlanningOutcome, PlanningRun
from pivotal.planning.shadow import ShadowReport
from pivotal.terminal import printable, safe_text
from pivotal.views.render import FittedTable, when

OUTCOME_STYLE = {
    PlanningOutcome.ACCEPTED: "bold green",
    PlanningOutcome.REJECTED: "bold red",
    PlanningOutcome.ESCALATED: "bold magenta",
}


def _short(value: Any, limit: int = 70) -> Text:
    """Data as plain text: request and planner text may hold markup and must not style."""
    text = "" if value is None else str(value)
    return safe_text(text if len(text) <= limit else text[: limit - 1] + "…")


def _plain(value: Any) -> Text:
    """One line of user text, control characters escaped."""
    return safe_text(value)


def _lines(*lines: str) -> Text:
    """Lines of user text, one cell: each line's own newlines and controls escaped."""
    return Text("\n".join(printable(line) for line in lines))


def _call_text(call: Any) -> str:
    if isinstance(call, dict) and "parallel" in call:
        inner = call["parallel"] if isinstance(call["parallel"], list) else []
        return "parallel[" + "; ".join(_call_text(c) for c in inner) + "]"
    if not isinstance(call, dict):
        return _short(json.dumps(call, default=str), 60).plain
    args = call.get("args")
    shown = ", ".join(f"{k}={v}" for k, v in args.items()) if isinstance(args, dict) else str(args)
    return f"{call.get('name')}({_short(shown, 80).plain})"


def _call_name(call: Any) -> str:
    if isinstance(call, dict) and isinstance(call.get("parallel"), list):
        return "parallel[" + ", ".join(_call_name(c) for c in call["parallel"]) + "]"
    return str(call.get("name")) if isinstance(call, dict) else "?"


def attempts_table(attempts: Sequence[Attempt], *, args: bool = True) -> Table:
    """One row per attempt: who proposed, which steps (with their arguments), the verdict."""
    table = FittedTable(title="attempts", title_justify="left", header_style="dim", show_lines=True)
    for col, role in (("#", "fixed"), ("planner", "text"), ("proposed steps", "text")):
        table.column(col, role)  # type: ignore[arg-type]
    table.column("verdict", "text")
    for a in attempts:
        steps = a.plan.get("steps") if isinstance(a.plan, dict) else None
        if not isinstance(steps, list):
            proposed = ["(none)"]
        else:
            proposed = [_call_text(c) if args else _call_name(c) for c in steps]
        if a.accepted:
            verdict = Text("accepted", style="green")
        else:
            verdict = _lines(*(f"[{e.code}] {e.where()}: {e.message}" for e in a.errors))
            verdict.stylize("red")
        label = [a.by.actor_id, *([f"model {a.by.model}"] if a.by.model else [])]
        repeat = [f"(repeats #{a.repeat_of})"] if a.repeat_of else []
        table.add_row(str(a.n), _lines(*label, *repeat), _lines(*proposed), verdict)
    return table


def request_panel(request: PlanRequest) -> Panel:
    grid = Table.grid(padding=(0, 2))
    grid.add_row("request", _plain(request.request_id))
    grid.add_row("text", _plain(repr(request.text)))
    for key, value in request.context.items():
        grid.add_row(_plain(key), _plain(value))
    if request.source_document_id:
        grid.add_row("source document", _plain(request.source_document_id))
    return Panel(grid, expand=False)


def run_view(run: PlanningRun) -> Group:
    head = Table.grid(padding=(0, 2))
    head.add_row("run", _plain(run.run_id))
    head.add_row("catalogue", _plain(run.catalogue))
    head.add_row("planner", _plain(run.planner.label()))
    head.add_row("outcome", Text(run.outcome.value, style=OUTCOME_STYLE[run.outcome]))
    if run.saga_id:
        head.add_row("saga", _plain(run.saga_id))
    if run.escalation_id is not None:
        head.add_row("escalation", str(run.escalation_id))
    if run.plan is not None and run.plan.rationale:
        head.add_row("rationale", _plain(run.plan.rationale))
    parts: list[RenderableType] = [request_panel(run.request), Panel(head, expand=False)]
    parts.append(attempts_table(run.attempts))
    return Group(*parts)


def escalations_table(items: Iterable[Escalation]) -> Table:
    table = FittedTable(header_style="dim")
    for col, role in (
        ("id", "fixed"),
        ("status", "fixed"),
        ("created", "date"),
        ("catalogue", "text"),
        ("request", "text"),
        ("tries", "fixed"),
        ("reason", "text"),
    ):
        table.column(col, role)  # type: ignore[arg-type]
    for e in items:
        table.add_row(
            str(e.id),
            e.status.value,
            when(e.created_at),
            _plain(e.run.catalogue),
            _short(e.run.request.text or e.run.request.context, 40),
            str(len(e.run.attempts)),
            _short(e.reason, 70),
        )
    return table


def escalation_view(e: Escalation) -> Group:
    head = Table.grid(padding=(0, 2))
    head.add_row("escalation", Text(str(e.id), style="bold"))
    head.add_row("status", e.status.value)
    head.add_row("created", when(e.created_at))
    head.add_row("reason", _plain(e.reason))
    if e.resolved_by:
        head.add_row(
            "resolved", _plain(f"{when(e.resolved_at)} by {e.resolved_by}: {e.resolution}")
        )
    if e.saga_id:
        head.add_row("saga", _plain(e.saga_id))
    return Group(
        Panel(head, expand=False), request_panel(e.run.request), attempts_table(e.run.attempts)
    )


SHOWN_UNACCEPTED = 20  # runs without a valid plan a report lists as text


def shadow_report_view(report: ShadowReport) -> Group:
    head = Table.grid(padding=(0, 2))
    head.add_row("batch", _plain(report.batch_id or "(all)"))
    head.add_row("requests", str(report.requests))
    head.add_row(
        "accepted",
        f"{report.accepted} ({report.acceptance_rate:.1%}); first try {report.first_try}",
    )
    head.add_row("mean attempts", f"{report.mean_attempts:.2f}")
    reasons = FittedTable(title="rejection reasons", title_justify="left", header_style="dim")
    for col, role in (("error code", "id"), ("step", "id"), ("count", "fixed")):
        reasons.column(col, role)  # type: ignore[arg-type]
    reasons.column("first message")
    for r in report.reasons:
        reasons.add_row(_plain(r.code), _plain(r.step or "-"), str(r.count), _plain(r.message))
    runs = FittedTable(
        title="requests without a valid plan (pivotal shadow show RUN)",
        title_justify="left",
        header_style="dim",
    )
    for col, role in (("run", "id"), ("attempts", "fixed"), ("last message", "text")):
        runs.column(col, role)  # type: ignore[arg-type]
    for u in report.unaccepted[:SHOWN_UNACCEPTED]:
        runs.add_row(_plain(u.run_id), str(u.attempts), _plain(u.message))
    parts: list[RenderableType] = [Panel(head, expand=False), reasons]
    if report.unaccepted:
        parts.append(runs)
    if len(report.unaccepted) > SHOWN_UNACCEPTED:
        more = len(report.unaccepted) - SHOWN_UNACCEPTED
        parts.append(Text(f"... and {more} more (--json lists them all)", style="dim"))
    return Group(*parts)
