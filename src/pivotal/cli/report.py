"""``pivotal report``: what went wrong over a period, grouped by cause, and who proposed it."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from pivotal.cli._shared import (
    MAX_LIMIT,
    JsonFlag,
    WideFlag,
    bounded,
    dump,
    reading,
    run,
    settings_of,
)
from pivotal.cli._shared import show as print_view
from pivotal.declarations.plan import Provenance
from pivotal.terminal import printable, safe_text
from pivotal.views.render import FittedTable, status_text, when
from pivotal.views.report import (
    DEFAULT_LIMIT,
    REVIEWED,
    CauseGroup,
    Period,
    PlannerReport,
    Report,
    build_report,
)


def register(cli: typer.Typer) -> None:
    """Add this module's commands to ``cli``."""
    cli.command("report")(report)


def report(
    ctx: typer.Context,
    since: Annotated[
        str,
        typer.Option(
            "--since",
            help="Start of the period: 7d, 24h, 30m (back from now) or an ISO date.",
            callback=bounded(64),
        ),
    ] = "7d",
    until: Annotated[
        str | None,
        typer.Option("--until", help="End of the period (default: now).", callback=bounded(64)),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit", min=1, max=MAX_LIMIT, help="Rows read per list (sagas of a status, runs)."
        ),
    ] = DEFAULT_LIMIT,
    show: Annotated[
        int, typer.Option("--show", min=0, max=MAX_LIMIT, help="Sagas shown per cause.")
    ] = 10,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """The sagas of a period that ended compensated, compensation_failed or needs_human,
    grouped by cause with who proposed them, and the planner's rejections of the period."""
    now = time.time()
    period = Period.parse(since, until, now)

    async def work() -> Report:
        async with reading(settings_of(ctx)) as store:
            return await build_report(store, period, now=now, limit=limit)

    found = run(work())
    if as_json:
        dump(found.model_dump(mode="json"))
    else:
        print_view(render(found, show=show), wide=wide)


# -- for people ----------------------------------------------------------------------------


def render(found: Report, *, show: int = 10) -> Group:
    """The report as Rich tables: causes, the sagas of each cause, the planner's rejections."""
    parts: list[RenderableType] = [
        Text(f"review report {when(found.since)} to {when(found.until)} UTC", style="bold"),
        _totals(found),
    ]
    if found.truncated:
        lists = ", ".join(found.truncated_lists)
        parts.append(
            Text(
                f"partial: {lists} reached the limit of {found.limit} rows; "
                f"--limit {found.limit * 10} reads more",
                style="bold yellow",
            )
        )
    if found.causes:
        parts.append(causes_table(found))
        parts += [group_table(g, show) for g in found.causes]
    if found.partial_undos:
        parts.append(partial_table(found, show))
    parts += planner_parts(found.planner)
    parts += rollout_parts(found)
    return Group(*parts)


def _totals(found: Report) -> Text:
    counts = ", ".join(f"{found.by_status[s.value]} {s.value}" for s in REVIEWED)
    if not found.sagas:
        return Text("no saga of the period ended compensated, compensation_failed or needs_human")
    return Text(f"{plural(found.sagas, 'saga')} did not complete: {counts}")


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def causes_table(found: Report) -> Table:
    table = FittedTable(title="by cause", title_justify="left", header_style="dim")
    table.column("cause", "text")
    table.column("sagas", "fixed", justify="right")
    for status in REVIEWED:
        table.column(status.value, "fixed", justify="right")
    for g in found.causes:
        table.add_row(
            safe_text(g.cause.label),
            str(g.count),
            *(str(g.statuses.get(s.value, 0) or "") for s in REVIEWED),
        )
    return table


def proposer(p: Provenance | None) -> str:
    """Who proposed a plan, in one line: actor, model and prompt, for whom."""
    if p is None:
        return "(not kept)"
    text = f"{p.actor_type.value}:{p.actor_id}"
    detail = [x for x in (p.model, p.prompt_version and f"prompt {p.prompt_version}") if x]
    if detail:
        text += f" ({', '.join(detail)})"
    if p.on_behalf_of:
        text += f" for {p.on_behalf_of}"
    return text


def group_table(group: CauseGroup, show: int) -> Table:
    catalogues = sorted({e.catalogue for e in group.sagas[:show]})
    one = len(catalogues) == 1  # then it is said once, in the title
    title = f"{printable(group.cause.label)}: {plural(group.count, 'saga')}"
    if one:
        title += f" (catalogue {printable(catalogues[0])})"
    table = FittedTable(
        title=title, title_justify="left", header_style="dim", box=None, pad_edge=False
    )
    for col, role in (
        ("saga", "id"),
        *(() if one else (("catalogue", "text"),)),
        ("status", "fixed"),
        ("ended", "date"),
        ("proposed by", "text"),
        ("reason", "text"),
    ):
        table.column(col, role)
    for e in group.sagas[:show]:
        reason = e.reason or ""
        if e.trigger is not None:
            reason = f"[started by {e.trigger.label}] {reason}"
        table.add_row(
            safe_text(e.saga_id),
            *(() if one else (safe_text(e.catalogue),)),
            status_text(e.status),
            when(e.updated_at),
            safe_text(proposer(e.provenance)),
            safe_text(reason),
        )
    if group.count > show:
        table.caption = f"{group.count - show} more not shown (--show N, or --json)"
        table.caption_justify = "left"
    return table


def partial_table(found: Report, show: int) -> Table:
    """The undos that restored only part of what was there, with their notes."""
    title = f"undone only in part: {plural(found.partial_undos, 'undo')}"
    table = FittedTable(title=title, title_justify="left", header_style="dim")
    for col, role in (("saga", "id"), ("step", "id"), ("status", "fixed"), ("note", "text")):
        table.column(col, role)  # type: ignore[arg-type]
    rows = [(e, p) for g in found.causes for e in g.sagas for p in e.partial_undos]
    for e, p in rows[:show]:
        table.add_row(
            safe_text(e.saga_id),
            safe_text(f"{p.step} (step {p.index})"),
            status_text(e.status),
            safe_text(p.note or ""),
        )
    if len(rows) > show:
        table.caption = f"{len(rows) - show} more not shown (--show N, or --json)"
        table.caption_justify = "left"
    return table


def planner_parts(planner: PlannerReport) -> list[RenderableType]:
    """What the planner got wrong: runs by outcome, error codes, escalations."""
    if not planner.runs and not planner.escalations:
        return [Text("planner: no planning run or escalation in the period")]
    modes = "; ".join(
        f"{mode}: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
        for mode, counts in planner.outcomes.items()
    )
    parts: list[RenderableType] = [
        safe_text(
            f"planner: {plural(planner.runs, 'run')}{f' ({modes})' if modes else ''}, "
            f"{plural(planner.rejected_attempts, 'rejected attempt')}, "
            f"{plural(len(planner.escalations), 'escalation')} opened"
        )
    ]
    if planner.codes:
        codes = FittedTable(
            title="rejections by error code", title_justify="left", header_style="dim"
        )
        codes.column("code", "id")
        codes.column("errors", "fixed", justify="right")
        codes.column("attempts", "fixed", justify="right")
        codes.column("from", "fixed")
        for c in planner.codes:
            source = "validator" if c.validator else "planner"
            codes.add_row(safe_text(c.code), str(c.errors), str(c.attempts), source)
        parts.append(codes)
    if planner.escalations:
        table = FittedTable(title="escalations", title_justify="left", header_style="dim")
        for col, role in (
            ("id", "fixed"),
            ("status", "fixed"),
            ("opened", "date"),
            ("planner", "text"),
            ("codes", "text"),
            ("reason", "text"),
        ):
            table.column(col, role)  # type: ignore[arg-type]
        for e in planner.escalations:
            table.add_row(
                str(e.id),
                safe_text(e.status),
                when(e.created_at),
                safe_text(e.planner),
                safe_text(", ".join(e.codes)),
                safe_text(e.reason),
            )
        parts.append(table)
    return parts


def rollout_parts(found: Report) -> list[RenderableType]:
    """Each catalogue whose rollout limited agent plans: its setting and what it did."""
    if not found.rollout:
        return []
    table = FittedTable(title="rollout (agent plans)", title_justify="left", header_style="dim")
    table.column("catalogue", "text")
    table.column("setting", "text")
    for column in ("executed", "shadowed", "refused"):
        table.column(column, "fixed", justify="right")
    for r in found.rollout:
        table.add_row(
            safe_text(r.catalogue),
            safe_text(r.setting),
            str(r.executed),
            str(r.shadowed),
            str(r.refused),
        )
    return [table]
