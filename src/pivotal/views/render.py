"""Rich views of sagas, timelines and queues, shared by the CLI and the demo."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pivotal.declarations.plan import Provenance
from pivotal.sagas.overdue import step_overdue, undo_overdue
from pivotal.sagas.progress import Shown
from pivotal.sagas.state import Event, EventType, SagaState, SagaStatus
from pivotal.store.base import DeadLetter, PendingApproval, SagaSummary
from pivotal.terminal import safe_text
from pivotal.tracebacks import lines as trace_lines

STATUS_STYLE = {
    SagaStatus.COMPLETED: "bold green",
    SagaStatus.COMPENSATED: "bold yellow",
    SagaStatus.COMPENSATION_FAILED: "bold red",
    SagaStatus.NEEDS_HUMAN: "bold magenta",
    SagaStatus.RESOLVED: "bold blue",
    SagaStatus.AWAITING_APPROVAL: "bold cyan",
}

EVENT_STYLE = {
    EventType.STEP_SUCCEEDED: "green",
    EventType.STEP_RETRY_SCHEDULED: "yellow",
    EventType.STEP_FAILED: "red",
    EventType.STEP_UNKNOWN: "red",
    EventType.COMPENSATION_STARTED: "bold yellow",
    EventType.UNDO_SUCCEEDED: "yellow",
    EventType.UNDO_PARTIAL: "bold yellow",
    EventType.UNDO_LAPSED: "yellow",
    EventType.SAGA_NEEDS_HUMAN: "bold magenta",
    EventType.SAGA_RESUMED: "cyan",
    EventType.SAGA_RESOLVED: "bold blue",
    EventType.SAGA_FORKED: "cyan",
    EventType.DEAD_LETTERS_DUE: "cyan",
    EventType.UNDO_DEAD_LETTERED: "bold red",
    EventType.APPROVAL_REQUESTED: "cyan",
    EventType.APPROVAL_GRANTED: "cyan",
    EventType.APPROVAL_REJECTED: "red",
    EventType.APPROVAL_EXPIRED: "red",
}


Role = Literal["id", "fixed", "date", "text"]
TEXT_MIN = 8  # the narrowest a column of text gets: it folds onto more lines instead
TEXT_FLOOR = 5  # ... unless an id would fold: then text narrows down to this first
WORD_MAX = 20  # a longer word folds; a shorter one, and a header, is never broken
DATE = 10  # a timestamp's width: the date on one line, the time below it
ID_MIN = 8  # the narrowest an id column is measured at when the ids cannot all be whole


class FittedTable(Table):
    """A table that stays readable in a narrow terminal (80 columns) and never breaks what
    a person copies: an id (a saga id, a step name, a key) is whole on one line. Long text
    folds onto more lines, never narrower than ``TEXT_MIN`` (or its header), or than
    ``TEXT_FLOOR`` when that is what keeps the ids whole; short fields (a status, a count)
    keep their width; a timestamp takes two lines of ``DATE``. When the ids cannot all be
    whole in columns even so, each row is shown as a record instead: its ids on one line,
    then its other fields as ``header: value``. Widths are settled when the table is
    rendered, for the width it is given: what is left after the short fields goes to the
    ids first, then evenly to the text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.roles: list[Role] = []

    def column(self, header: str, role: Role = "text", **options: Any) -> None:
        """Add a column of ``role``: ``id`` (always whole: in its column, or on a record's
        first line), ``fixed`` (its natural width, unwrapped), ``date`` (a timestamp) or
        ``text`` (folds)."""
        if role == "fixed":
            options.setdefault("no_wrap", True)
        else:
            options.setdefault("overflow", "fold")
        self.add_column(header, **options)
        self.roles.append(role)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        chosen = self._fit(options.max_width)
        ids = [i for i, role in enumerate(self.roles) if role == "id"]
        if any(chosen[i] < self._widest(i) for i in ids):
            yield self._stacked(ids, options.max_width, console)  # records instead
            return
        yield from super().__rich_console__(console, options)

    def _stacked(self, ids: list[int], width: int, console: Console) -> Group:
        """The rows as records, for a terminal too narrow to show the ids whole in columns:
        a row's ids on its first line, each whole, then its other cells as ``header: value``,
        indented, as many to a line as fit in ``width``; a cell too long for a line of its
        own goes on as many as it needs, broken between words, under its first."""

        def cell(column: int, row: int) -> Text:
            value = self.columns[column]._cells[row]
            return value if isinstance(value, Text) else Text(str(value))

        parts: list[Text] = []
        if self.title:
            parts.append(Text(str(self.title), style="italic"))
        for row in range(self.row_count):
            parts.append(Text("  ", style="bold").join(cell(i, row) for i in ids))
            line = Text("  ")
            for i, column in enumerate(self.columns):
                shown = cell(i, row)
                if i in ids or not shown.plain:
                    continue
                field = Text.assemble((f"{column.header}: ", "dim"), shown)
                if line.plain.strip() and cell_len(line.plain) + 2 + field.cell_len > width:
                    parts.append(line)
                    line = Text("  ")
                if field.cell_len + 2 > width:  # on lines of its own, between words
                    if line.plain.strip():
                        parts.append(line)
                    wrapped = field.wrap(console, max(width - 4, 1))
                    for n, piece in enumerate(wrapped):
                        piece.rstrip()
                        parts.append(Text("    " if n else "  ") + piece)
                    line = Text("  ")
                    continue
                line.append_text(field if not line.plain.strip() else Text("  ") + field)
            if line.plain.strip():
                parts.append(line)
        if self.caption:
            parts.append(Text(str(self.caption), style="dim"))
        return Group(*parts)

    def _widest(self, index: int) -> int:
        column = self.columns[index]
        cells = [column.header, *column._cells]
        texts = (c.plain if isinstance(c, Text) else str(c) for c in cells)
        return max(1, *(cell_len(line) for text in texts for line in text.split("\n")))

    def _fit(self, width: int) -> list[int]:
        count = len(self.columns)
        roles = self.roles + ["text"] * (count - len(self.roles))
        widest = [self._widest(i) for i in range(count)]
        chosen = list(widest)
        spare = width - self._extra_width - sum(self._get_padding_width(i) for i in range(count))
        spare -= sum(widest[i] for i, role in enumerate(roles) if role == "fixed")
        texts = [i for i, role in enumerate(roles) if role in ("text", "date")]
        ids = [i for i, role in enumerate(roles) if role == "id"]
        for i in texts:  # the least each shows: a date on two lines, text folded
            least = DATE if roles[i] == "date" else max(TEXT_MIN, self._floor(i))
            chosen[i] = min(widest[i], least)
            spare -= chosen[i]
        # an id whole on one line (a person copies it) comes before text at its ease, when
        # narrowing the text that far makes every id whole
        short = sum(widest[i] for i in ids) - spare
        narrowing = [i for i in texts if roles[i] == "text"]
        floor = {i: min(chosen[i], max(TEXT_FLOOR, self._floor(i))) for i in narrowing}
        if 0 < short <= sum(chosen[i] - floor[i] for i in narrowing):
            while short > 0:
                widest_text = max(narrowing, key=lambda i: chosen[i] - floor[i])
                chosen[widest_text] -= 1
                spare += 1
                short -= 1
        # the ids, shortest first: each is whole while the others can still get their share
        for n, i in enumerate(sorted(ids, key=widest.__getitem__)):
            chosen[i] = min(widest[i], max(ID_MIN, spare // (len(ids) - n)))
            spare -= chosen[i]
        # the text: what is left, shared evenly, none wider than it needs; a date is whole
        # on one line only when everything is
        if spare >= sum(widest[i] - chosen[i] for i in texts):
            growing = texts
        else:
            growing = [i for i in texts if roles[i] == "text"]
        wanting = [i for i in growing if chosen[i] < widest[i]]
        while spare > 0 and wanting:
            share = max(1, spare // len(wanting))
            for i in list(wanting):
                more = min(share, widest[i] - chosen[i], spare)
                chosen[i] += more
                spare -= more
                if chosen[i] >= widest[i]:
                    wanting.remove(i)
        for column, fitted in zip(self.columns, chosen, strict=True):
            column.width = fitted
        return chosen

    def _header(self, index: int) -> int:
        return cell_len(str(self.columns[index].header))

    def _floor(self, index: int) -> int:
        """The narrowest a text column gets: its header, and its longest word (up to
        ``WORD_MAX``), each on one line, so that no word is broken where it is read."""
        words = (
            cell_len(word) for cell in self.columns[index]._cells for word in str(cell).split()
        )
        return max(self._header(index), min(max(words, default=0), WORD_MAX))


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def status_text(status: SagaStatus) -> Text:
    return Text(status.value, style=STATUS_STYLE.get(status, "bold"))


def clock_time(ts: float) -> str:
    """The time of day of ``ts``, in UTC: ``12:00:05 UTC``."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%H:%M:%S UTC")


_RETRIES = (EventType.STEP_RETRY_SCHEDULED, EventType.UNDO_RETRY_SCHEDULED)


def _next_attempt(event: Event) -> str:
    """When a scheduled retry is due: ``; next attempt at 12:00:05 UTC (in 2.0s)``."""
    due = event.data.get("next_attempt_at")
    if event.type not in _RETRIES or not isinstance(due, int | float):
        return ""
    return f"; next attempt at {clock_time(due)} (in {max(due - event.at, 0.0):.1f}s)"


def _detail(event: Event) -> str:
    d = event.data
    for field in ("error", "reason"):
        if d.get(field):
            return str(d[field]) + _next_attempt(event)
    if event.type is EventType.STEP_SUCCEEDED:
        via = " (found by lookup)" if d.get("via") == "lookup" else ""
        return f"{_short(d.get('result'))}{via}"
    if event.type in (EventType.STEP_STARTED, EventType.UNDO_STARTED):
        return f"key {d.get('key')}"
    if event.type in (EventType.APPROVAL_GRANTED, EventType.APPROVAL_REJECTED):
        note = f": {d['note']}" if d.get("note") else ""
        return f"by {d.get('approver')}{note}"
    if event.type is EventType.SAGA_RESUMED and d.get("from") is not None:
        settled = ", ".join(str(i) for i in d.get("settled", ())) or "none"
        return (
            f"by {d.get('by')} from step {d['from']} (settled by hand: {settled}): {d.get('why')}"
        )
    if event.type in (EventType.SAGA_RESUMED, EventType.SAGA_RESOLVED):
        return f"by {d.get('by')}: {d.get('why')}"
    if event.type is EventType.SAGA_FORKED:
        return f"into {d.get('fork')} by {d.get('by')}: {d.get('why')}"
    if event.type is EventType.DEAD_LETTERS_DUE:
        letters = ", ".join(str(i) for i in d.get("letters") or ())
        why = f": {d['why']}" if d.get("why") else ""
        return f"dead letters {letters} due now, asked by {d.get('by')}{why}"
    if event.type is EventType.UNDO_SUCCEEDED and d.get("note"):
        return f"note: {d['note']}"
    if event.type is EventType.UNDO_PARTIAL:
        return f"partial: {d.get('note') or 'no note'}"
    if event.type is EventType.UNDO_LAPSED:
        return str(d.get("note") or "the hold lapsed on its own")
    return ""


def as_json(value: Any) -> str:
    """A value as one line of JSON (``{"a": 1}``), never a Python repr; text as it is."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, default=str)  # \u202e stays escaped
    except (TypeError, ValueError):  # keys that do not sort, a cycle: still shown
        return str(value)


def _short(value: Any, limit: int = 60) -> str:
    text = as_json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_STARTS = {
    EventType.STEP_STARTED: EventType.STEP_RETRY_SCHEDULED,
    EventType.UNDO_STARTED: EventType.UNDO_RETRY_SCHEDULED,
}


@dataclass(frozen=True)
class Row:
    """One row of a timeline: an event, or a run of failed attempts of one step (each
    attempt's ``*_started`` and ``*_retry_scheduled``, in ``attempts``) shown as its last."""

    event: Event  # what the row shows: the event, or the run's last retry
    attempts: tuple[Event, ...] = ()  # the run's events, oldest first; () for one event

    @property
    def first(self) -> Event:
        return self.attempts[0] if self.attempts else self.event

    @property
    def tries(self) -> str:
        if self.attempts:
            return f"{self.attempts[0].attempt}-{self.event.attempt}"
        return "" if self.event.attempt is None else str(self.event.attempt)

    @property
    def detail(self) -> str:
        if self.attempts:
            return f"{len(self.attempts) // 2} attempts, last: {_detail(self.event)}"
        return _detail(self.event)


def _retried(events: Sequence[Event], i: int, head: Event) -> bool:
    """Whether events ``i`` and ``i + 1`` are an attempt of ``head``'s step that failed and
    was scheduled again."""
    if i + 1 >= len(events):
        return False
    started, retry = events[i], events[i + 1]
    return (
        started.type is head.type
        and retry.type is _STARTS.get(started.type)
        and started.step == retry.step == head.step
        and started.attempt == retry.attempt
    )


def timeline_rows(events: Sequence[Event]) -> list[Row]:
    """The events as timeline rows: two or more attempts of one step in a row, each started
    and scheduled again, become one row (the events themselves are untouched)."""
    rows: list[Row] = []
    i = 0
    while i < len(events):
        head, end = events[i], i
        while _retried(events, end, head):
            end += 2
        if end - i >= 4:
            rows.append(Row(events[end - 1], tuple(events[i:end])))
            i = end
        else:
            rows.append(Row(head))
            i += 1
    return rows


def timeline(state: SagaState, events: Sequence[Event], *, verbose: bool = False) -> Table:
    """One row per event, time relative to the first; repeated failed attempts of a step
    are one row. ``verbose``: every event its own row, a failed call's trace below it."""
    table = FittedTable(box=None, pad_edge=False, show_header=True, header_style="dim")
    for col, role, justify in (
        ("+ms", "fixed", "right"),
        ("event", "fixed", "left"),
        ("step", "id", "left"),
        ("try", "fixed", "right"),
        ("detail", "text", "left"),
    ):
        table.column(col, role, justify=justify)  # type: ignore[arg-type]
    start = events[0].at if events else 0.0
    rows = [Row(e) for e in events] if verbose else timeline_rows(events)
    for row in rows:
        e = row.event
        name = state.steps[e.step].name if e.step is not None else ""
        table.add_row(
            f"{(row.first.at - start) * 1000:.0f}",
            Text(e.type.value, style=EVENT_STYLE.get(e.type, "")),
            safe_text(name),
            row.tries,
            safe_text(row.detail),
        )
        shown = trace_lines(e.data.get("trace")) if verbose else []
        if shown:
            table.add_row("", "", "", "", safe_text("\n".join(shown), "dim", newlines=True))
    return table


_NOTED_UNDOS = frozenset({EventType.UNDO_PARTIAL, EventType.UNDO_LAPSED})


def undo_notes(events: Sequence[Event]) -> dict[int, str]:
    """By step index, the note of an undo that was partial, or that lapsed without a call
    (the last one recorded)."""
    return {
        e.step: str(e.data.get("note") or "")
        for e in events
        if e.type in _NOTED_UNDOS and e.step is not None
    }


def steps_table(
    state: SagaState,
    events: Sequence[Event] = (),
    progress: Mapping[int, Shown] | None = None,
    now: float | None = None,
) -> Table:
    """The steps; given the events, a partial or lapsed undo's note follows its status;
    given the reports of calls in progress (``pivotal.sagas.progress.live``), each shows its
    own in place of a result; given the ledger's time ``now``, a retry whose time has
    passed and that nothing picked up is marked overdue. Under the table, what ``try``
    counts (its caption)."""
    table = FittedTable(
        title="steps", title_justify="left", header_style="dim", box=None, pad_edge=False
    )
    columns = ("#", "step", "kind", "status", "try", "undo", "result / error")
    roles: tuple[Role, ...] = ("fixed", "fixed", "fixed", "fixed", "fixed", "text", "text")
    for col, role in zip(columns, roles, strict=True):
        table.column(col, role, justify="right" if col == "try" else "left")
    table.caption = "try: attempts of the step's action; undo (n): attempts of its undo"
    table.caption_justify = "left"
    notes = undo_notes(events)
    progress = progress or {}
    for r in state.steps:
        undo = "" if r.undo_status.value == "none" else f"{r.undo_status.value} ({r.undo_attempts})"
        if r.index in notes:
            undo = f"{undo}: {_short(notes[r.index], 60)}"
        undo_late = undo_overdue(r, now)
        shown = progress.get(r.index)
        table.add_row(
            str(r.index) + ("" if r.group is None else f" ∥{r.group}"),
            safe_text(r.name),
            r.kind,
            _late(r.status.value, step_overdue(r, now)),
            str(r.attempts),
            _late(undo, undo_late),
            safe_text(shown.text, "cyan")
            if shown is not None
            else safe_text(_short(r.undo_error or r.error or r.result, 70)),
        )
    return table


def _late(status: str, overdue: str | None) -> Text:
    """A status, and below it, when its retry is overdue, how long (in bold red)."""
    if overdue is None:
        return Text(status)
    return Text.assemble(status, "\n", (overdue, "bold red"))


def _notice(text: str, fold: bool) -> Text | Table:
    """A notice on one line (the terminal folds it, a pipe keeps its command whole), or
    ``fold``ed onto as many lines as the view is wide (a live view crops a longer line)."""
    shown = safe_text(text, "bold yellow")
    if not fold:
        return shown
    grid = Table.grid()
    grid.add_row(shown)
    return grid


def saga_view(
    state: SagaState,
    events: Sequence[Event],
    provenance: Provenance | None,
    rationale: str,
    *,
    last_error: str | None = None,
    verbose: bool = False,
    progress: Mapping[int, Shown] | None = None,
    now: float | None = None,
    waiting: str | None = None,
    fold: bool = False,
) -> Group:
    """A saga as an operator reads it; ``last_error``: why its last pass ended without
    progress, or why a worker gave it back unrun (it cannot serve it), as the ledger keeps
    it until the saga moves on. ``verbose``: every event, and each failed call's trace.
    ``waiting``: that it waits for a worker while none is alive (``worker_wait``), folded
    to the view's width when ``fold`` (a live view)."""
    head = Table.grid(padding=(0, 2))
    head.add_row("saga", safe_text(state.saga_id, "bold"))
    digest = catalogue_digest_of(events)
    planned = f" (planned against digest {digest})" if digest else ""
    head.add_row("catalogue", safe_text(state.catalogue + planned))
    head.add_row("status", status_text(state.status))
    if state.reason:
        head.add_row("reason", safe_text(state.reason))
    if last_error:
        head.add_row("last error", safe_text(last_error))
    head.add_row("created", when(state.created_at))
    if provenance is not None:
        fields = provenance.model_dump(exclude_none=True, mode="json")
        head.add_row("provenance", safe_text(", ".join(f"{k}={v}" for k, v in fields.items())))
    if rationale:
        head.add_row("rationale", safe_text(rationale))
    if state.approval is not None:
        a = state.approval
        by = f" by {a.approver}" if a.approver else ""
        head.add_row("approval", safe_text(f"{a.status.value}{by} — {a.reason}"))
    return Group(
        Panel(head, expand=False),
        *([_notice(waiting, fold)] if waiting else []),
        steps_table(state, events, progress, now),
        Panel(
            timeline(state, events, verbose=verbose),
            title="events",
            title_align="left",
            expand=False,
        ),
    )


def catalogue_digest_of(events: Sequence[Event]) -> str | None:
    """The digest of the catalogue the saga was planned against, as its submission
    recorded it (None for a saga submitted before digests were recorded)."""
    if not events or events[0].type is not EventType.SAGA_SUBMITTED:
        return None
    digest = events[0].data.get("catalogue_digest")
    return str(digest) if digest else None


def sagas_table(sagas: Iterable[SagaSummary]) -> Table:
    table = FittedTable(header_style="dim")
    roles: tuple[Role, ...] = ("id", "text", "fixed", "date", "text")
    for col, role in zip(("saga", "catalogue", "status", "updated", "reason"), roles, strict=True):
        table.column(col, role)
    for s in sagas:
        table.add_row(
            safe_text(s.saga_id),
            safe_text(s.catalogue),
            status_text(s.status),
            when(s.updated_at),
            safe_text(_short(s.reason, 80)),
        )
    return table


def approvals_table(items: Iterable[PendingApproval]) -> Table:
    table = FittedTable(header_style="dim")
    columns = ("saga", "catalogue", "step", "amount", "reason", "rationale", "expires")
    roles: tuple[Role, ...] = ("id", "text", "id", "fixed", "text", "text", "date")
    for col, role in zip(columns, roles, strict=True):
        table.column(col, role)
    for p in items:
        a = p.approval
        table.add_row(
            safe_text(p.saga_id),
            safe_text(p.catalogue),
            safe_text(p.step_name),
            safe_text(p.stake or "-"),
            safe_text(a.reason),
            safe_text(_short(a.rationale, 60)),
            when(a.expires_at),
        )
    return table


def dead_letters_table(items: Iterable[DeadLetter]) -> Table:
    table = FittedTable(header_style="dim")
    table.caption = "tries: attempts before it was parked + retries since"
    table.caption_justify = "left"
    columns = ("id", "saga", "step", "undo key", "tries", "status", "error")
    roles: tuple[Role, ...] = ("fixed", "id", "id", "id", "fixed", "fixed", "text")
    for col, role in zip(columns, roles, strict=True):
        table.column(col, role)
    for d in items:
        table.add_row(
            str(d.id),
            safe_text(d.saga_id),
            safe_text(d.step_name),
            safe_text(d.undo_key),
            f"{d.attempts} + {d.retries}",
            d.status,
            safe_text(_short(d.error, 70)),
        )
    return table
