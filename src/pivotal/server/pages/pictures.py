"""Pictures of a saga for its page, drawn on the server as inline SVG: a timeline of its
attempts, undos and waits (``timeline_svg``), and its plan as a line with the point of no
return and what a failure at each step undoes (``plan_svg``).

No script and no ``style`` attribute (the pages' Content-Security-Policy refuses inline
styles): colours are SVG presentation attributes, refined by classes of ``style.css``.
Every text is escaped and cut short: step names, errors and notes come from users and
agents. Durations come from the events alone; nothing here reads a clock. A call with no
outcome recorded is drawn as the page's steps table words it (``progress.describe``, by
``call_state.decide``): in flight, in doubt until a time, or ended, unrecorded.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

from pivotal.declarations.catalogue import Catalogue, StepKind
from pivotal.sagas.call_state import CallState
from pivotal.sagas.progress import Shown, summary
from pivotal.sagas.state import Event, EventType, SagaState, StepRecord, StepStatus, UndoStatus

log = logging.getLogger(__name__)

NS = "http://www.w3.org/2000/svg"
FONT = "system-ui, -apple-system, Segoe UI, sans-serif"
INK, MUTED, LINE, STRIPE = "#1d2330", "#667085", "#d0d5dd", "#f6f7f9"

# -- text --------------------------------------------------------------------------------

_BLANKS = re.compile(r"[\t\n\r]+")
# what XML 1.0 cannot carry, even escaped, and what no one should see (C1 controls)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
NAME, LABEL, NOTE = 26, 24, 300  # characters a lane label, a node label, a note keep


def clean(value: Any, limit: int) -> str:
    """``value`` as one line of at most ``limit`` characters XML can carry (not escaped)."""
    try:
        text = value if isinstance(value, str) else str(value)
    except Exception:  # a value whose __str__ raises
        text = type(value).__name__
    text = text[: limit + 1]
    text = _CONTROL.sub("\ufffd", _BLANKS.sub(" ", text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _t(value: Any, limit: int = NOTE) -> str:
    """Escaped text for an element's content or an attribute's value."""
    return str(escape(clean(value, limit)))


def _title(lines: Iterable[str]) -> str:
    """A tooltip: each line escaped, joined by newlines (browsers show them as such)."""
    return "<title>" + "\n".join(_t(line, 2 * NOTE) for line in lines if line) + "</title>"


def _n(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def stamp(at: float) -> str:
    try:
        return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return f"{at!r}"


def took(seconds: float) -> str:
    s = max(0.0, seconds)
    if s < 1:
        return f"{s * 1000:.1f} ms"
    if s < 120:
        return f"{s:.3f} s"
    whole = int(s)
    if whole < 7200:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < 172800:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600} h"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        found = float(value)
    except ValueError:
        return None
    return found if math.isfinite(found) else None


# -- the timeline ------------------------------------------------------------------------

WIDTH, LEFT, RIGHT, LANE, TOP = 1080, 200, 24, 26, 44
CAP, HEAD, TAIL = 40, 20, 19  # beyond CAP bars of a kind in a lane, the middle is grouped

FILL = {  # bar fills: forward attempts by outcome, then undos (another hue), then waits
    "ok": "#17803d",
    "retry": "#f79009",
    "failed": "#b42318",
    "unknown": "#6927b0",
    "open": "#84adff",
    "indoubt": "#fda29b",
    "unrecorded": "#bcc3ce",
    "u-ok": "#0e7490",
    "u-partial": "#22a5c4",
    "u-retry": "#7cd4e6",
    "u-dead": "#7a2e0e",
    "u-open": "#a5e4f0",
    "u-indoubt": "#fecdca",
    "u-unrecorded": "#d5d9e0",
    "backoff": "#fedf89",
    "worker": "#98a2b3",
    "approval": "#9e77ed",
    "doubt": "#f97066",
    "group": "#d0d5dd",
}
WAIT_NAMES = {
    "backoff": "retry backoff",
    "worker": "waiting for a worker",
    "approval": "waiting for a person's approval",
    "doubt": "waiting: an earlier attempt may still take effect",
}
_FORWARD_OUTCOME = {
    EventType.STEP_SUCCEEDED: "ok",
    EventType.STEP_RETRY_SCHEDULED: "retry",
    EventType.STEP_FAILED: "failed",
    EventType.STEP_UNKNOWN: "unknown",
}
_UNDO_OUTCOME = {
    EventType.UNDO_SUCCEEDED: "u-ok",
    EventType.UNDO_PARTIAL: "u-partial",
    EventType.UNDO_RETRY_SCHEDULED: "u-retry",
    EventType.UNDO_DEAD_LETTERED: "u-dead",
}
_SAGA_MARKS = {
    EventType.SAGA_SUBMITTED: ("submitted", INK),
    EventType.COMPENSATION_STARTED: ("undo begins", "#b54708"),
    EventType.SAGA_RESUMED: ("resumed", "#17803d"),
    EventType.SAGA_COMPLETED: ("completed", "#17803d"),
    EventType.SAGA_COMPENSATED: ("compensated", "#b54708"),
    EventType.SAGA_COMPENSATION_FAILED: ("compensation failed", "#b42318"),
    EventType.SAGA_NEEDS_HUMAN: ("needs a person", "#6927b0"),
    EventType.SAGA_RESOLVED: ("resolved", INK),
    EventType.SAGA_FORKED: ("forked", INK),
}


@dataclass
class Seg:
    """One thing drawn on a lane: a bar (an attempt), a wait, or a mark (one moment)."""

    css: str
    start: float
    end: float
    lines: list[str]
    attempt: int | None = None


@dataclass
class Lane:
    record: StepRecord
    bars: list[Seg] = field(default_factory=list)  # forward attempts
    undos: list[Seg] = field(default_factory=list)
    waits: list[Seg] = field(default_factory=list)
    marks: list[Seg] = field(default_factory=list)
    still: str = ""  # what it still waits for at the last event, if anything


@dataclass
class _Open:
    attempt: int | None
    at: float
    key: str = ""


def _ordered(events: Sequence[Event]) -> list[Event]:
    """The log in its order (by ``seq`` when every event has one); times may disagree with
    it (workers whose clocks differ): positions come from ``at``, pairs from the order."""
    found = [e for e in events if isinstance(e.at, int | float) and math.isfinite(e.at)]
    if found and all(e.seq > 0 for e in found):
        found.sort(key=lambda e: e.seq)
    return found


def _error(e: Event) -> str:
    d = e.data
    for name in ("error", "note", "reason"):
        if d.get(name):
            return f"{name}: {clean(d[name], NOTE)}"
    return ""


_NO_OUTCOME = ("open", "indoubt", "unrecorded")  # the bars of calls with no outcome recorded


class _Timeline:
    """Folds the events into segments per lane; ``calls``: see ``timeline_svg``."""

    def __init__(
        self,
        state: SagaState,
        events: list[Event],
        now: float | None = None,
        calls: Mapping[int, Shown] | None = None,
    ) -> None:
        self.state = state
        self.calls = calls
        self.lanes = [Lane(r) for r in state.steps]
        self.t0 = min(e.at for e in events)
        self.end = self.last = max(e.at for e in events)
        if now is not None and not state.status.terminal:  # what is open runs on until now
            self.end = max(self.end, now)
        self.saga: list[tuple[Event, str, str]] = []  # saga-level marks
        self.open: dict[tuple[int, bool], _Open] = {}  # (step, undo?) -> attempt in flight
        self.waiting: dict[tuple[int, bool], tuple[float, str, float | None, str]] = {}
        self.any_start: tuple[float, bool] | None = None  # (since, undo?) a worker is awaited
        self.approval: tuple[int, float, int, set[str], str] | None = None
        for e in events:
            self.fold(e)
        self.finish()

    def rel(self, at: float) -> str:
        return f"+{took(at - self.t0)}"

    def when(self, verb: str, at: float) -> str:
        return f"{verb} {stamp(at)} UTC ({self.rel(at)})"

    def fold(self, e: Event) -> None:
        t = e.type
        if t in _SAGA_MARKS:
            label, colour = _SAGA_MARKS[t]
            self.saga.append((e, label, colour))
            if t is EventType.SAGA_SUBMITTED:
                self.any_start = (e.at, False)
            elif t is EventType.COMPENSATION_STARTED:
                self.any_start = (e.at, True)
            elif t is EventType.SAGA_RESUMED:
                for i in e.data.get("steps", ()) or ():
                    if isinstance(i, int) and 0 <= i < len(self.lanes):
                        self.waiting[(i, False)] = (e.at, "worker", None, "resumed by a person")
                by = clean(str(e.data.get("by") or "?"), LABEL)
                for i in e.data.get("settled", ()) or ():
                    if isinstance(i, int) and 0 <= i < len(self.lanes):
                        self.close_wait(i, False, e.at)
                        self.mark(i, "settled", e, f"settled by hand by {by}")
            elif t in (EventType.SAGA_FORKED, EventType.DEAD_LETTERS_DUE):
                pass  # a note: no worker is awaited for it
            else:  # it ended: no worker is awaited
                self.any_start = None
            return
        s = e.step
        if s is None or not isinstance(s, int) or not 0 <= s < len(self.lanes):
            return
        if t in (EventType.STEP_STARTED, EventType.UNDO_STARTED):
            self.started(e, s, t is EventType.UNDO_STARTED)
        elif t in _FORWARD_OUTCOME:
            self.outcome(e, s, False, _FORWARD_OUTCOME[t])
        elif t in _UNDO_OUTCOME:
            self.outcome(e, s, True, _UNDO_OUTCOME[t])
        elif t is EventType.UNDO_LAPSED:
            self.mark(s, "lapsed", e, "the hold lapsed on its own: nothing was called")
            self.waiting.pop((s, True), None)
        elif t is EventType.DEAD_LETTER_RESOLVED:
            self.close_wait(s, True, e.at)
            self.mark(s, "resolved", e, "an operator settled the dead letter")
        elif t is EventType.APPROVAL_REQUESTED:
            self.any_start = None  # a person is awaited, not a worker
            required = e.data.get("required", 1)
            need = required if isinstance(required, int) and required > 0 else 1
            self.approval = (s, e.at, need, set(), clean(e.data.get("reason", ""), NOTE))
        elif t is EventType.APPROVAL_GRANTED:
            self.granted(e)
        elif t in (EventType.APPROVAL_REJECTED, EventType.APPROVAL_EXPIRED):
            verb = "rejected" if t is EventType.APPROVAL_REJECTED else "expired"
            self.decided(e, verb)

    def started(self, e: Event, s: int, undo: bool) -> None:
        self.close_wait(s, undo, e.at)
        if self.any_start is not None and self.any_start[1] == undo:
            since = self.any_start[0]
            what = "the undos" if undo else "the saga"
            self.add_wait(s, "worker", since, e.at, f"{what} waited for a worker")
            self.any_start = None
        prior = self.open.pop((s, undo), None)
        if prior is not None:  # its outcome was never recorded: the process stopped
            self.bar(s, undo, prior, e.at, _css(undo, "unrecorded"), None)
        attempt = e.attempt if isinstance(e.attempt, int) else None
        self.open[(s, undo)] = _Open(attempt, e.at, clean(e.data.get("key", ""), 80))

    def outcome(self, e: Event, s: int, undo: bool, css: str) -> None:
        prior = self.open.pop((s, undo), None)
        if prior is None:  # an outcome without a call of its own (a lookup, a settling)
            self.mark(s, css, e, _error(e) or "recorded without a call of its own")
        else:
            self.bar(s, undo, prior, e.at, css, e)
        due_name = "next_retry_at" if e.type is EventType.UNDO_DEAD_LETTERED else "next_attempt_at"
        if e.type in (EventType.STEP_RETRY_SCHEDULED, EventType.UNDO_RETRY_SCHEDULED) or (
            e.type is EventType.UNDO_DEAD_LETTERED
        ):
            due = _num(e.data.get(due_name))
            kind = "doubt" if prior is None and undo else "backoff"
            why = _error(e)
            if e.type is EventType.UNDO_DEAD_LETTERED:
                why = f"dead-lettered: a sweep or a person retries it ({why})"
            self.waiting[(s, undo)] = (e.at, kind, due, why)

    def close_wait(self, s: int, undo: bool, at: float | None) -> None:
        found = self.waiting.pop((s, undo), None)
        if found is None:
            return
        since, kind, due, why = found
        end = self.end if at is None else at
        if due is not None and since <= due < end:
            self.add_wait(s, kind, since, due, why, due=due)
            if at is not None or not self.state.status.terminal:
                self.add_wait(s, "worker", due, end, "due; waiting for a worker")
        else:
            self.add_wait(s, kind, since, min(end, due) if due is not None else end, why, due=due)

    def add_wait(
        self, s: int, kind: str, since: float, until: float, why: str, due: float | None = None
    ) -> None:
        lane = self.lanes[s]
        lines = [
            f"{lane.record.name}: {WAIT_NAMES[kind]}, {took(abs(until - since))}",
            self.when("from", min(since, until)),
            self.when("to", max(since, until)),
            self.when("due", due) if due is not None else "",
            why,
        ]
        lane.waits.append(Seg(f"w-{kind}", min(since, until), max(since, until), lines))

    def bar(
        self,
        s: int,
        undo: bool,
        prior: _Open,
        at: float,
        css: str,
        outcome: Event | None,
        notes: Sequence[str] = (),
        until: str = "until",
    ) -> None:
        lane = self.lanes[s]
        what = "undo" if undo else "attempt"
        ended = outcome.type.value if outcome is not None else "no outcome recorded"
        lines = [
            f"{lane.record.name}: {what} {prior.attempt if prior.attempt is not None else '?'}"
            f" — {ended}, {took(abs(at - prior.at))}",
            self.when("started", prior.at),
            self.when("ended", at) if outcome is not None else self.when(until, at),
            *notes,
            "the clock went backwards between its events" if at < prior.at else "",
            _error(outcome) if outcome is not None else "",
            f"key {prior.key}" if prior.key else "",
        ]
        seg = Seg(css, min(prior.at, at), max(prior.at, at), lines, prior.attempt)
        (lane.undos if undo else lane.bars).append(seg)

    def mark(self, s: int, css: str, e: Event, why: str) -> None:
        lane = self.lanes[s]
        lines = [f"{lane.record.name}: {e.type.value}", self.when("at", e.at), why]
        lane.marks.append(Seg(f"m-{css}", e.at, e.at, lines))

    def granted(self, e: Event) -> None:
        if self.approval is None:
            return
        s, _, need, by, _ = self.approval
        approver = clean(e.data.get("approver") or "?", LABEL)
        by.add(approver)
        if len(by) < need:
            self.mark(s, "approval", e, f"approved by {approver} ({len(by)} of {need})")
            return
        self.decided(e, f"approved by {approver}")

    def decided(self, e: Event, verb: str) -> None:
        if self.approval is None:
            return
        s, since, _, _, reason = self.approval
        self.approval = None
        note = e.data.get("note")
        self.add_wait(s, "approval", since, e.at, f"asked: {reason}")
        self.lanes[s].waits[-1].lines.append(f"{verb}" + (f": {clean(note, NOTE)}" if note else ""))
        if verb.startswith("approved"):
            self.waiting[(s, False)] = (e.at, "worker", None, "approved; waiting for a worker")

    def finish(self) -> None:
        """What is still open at the last event: calls with no outcome recorded, waits."""
        going = not self.state.status.terminal
        for (s, undo), prior in sorted(self.open.items()):
            self.unfinished(s, undo, prior, going)
        for s, undo in sorted(self.waiting):
            kind = self.waiting[(s, undo)][1]
            self.close_wait(s, undo, None)
            if going:
                self.lanes[s].still = f"{'undo ' if undo else ''}{WAIT_NAMES[kind]}"
        if self.approval is not None:
            s, since, need, by, reason = self.approval
            self.add_wait(s, "approval", since, self.end, f"asked: {reason}")
            self.lanes[s].waits[-1].lines.append(f"still waiting ({len(by)} of {need} approvals)")
            if going:
                self.lanes[s].still = f"waiting for a person's approval since {self.rel(since)}"

    def unfinished(self, s: int, undo: bool, prior: _Open, going: bool) -> None:
        """A call whose outcome is not recorded, drawn as the ledger has it (``calls``):
        in flight or in doubt until now; ended, unrecorded until the ledger proves it over
        (then the saga waits for a worker to settle it)."""
        what = "undo" if undo else "attempt"
        called = f"{what} {prior.attempt if prior.attempt is not None else '?'}"
        if self.calls is None and going:  # without the ledger's word: until now, untold
            self.bar(s, undo, prior, self.end, _css(undo, "open"), None)
            self.lanes[s].still = f"{called}: no outcome recorded"
            return
        shown = self.calls.get(s) if self.calls is not None and going else None
        if shown is None or shown.undo != undo or shown.attempt != prior.attempt:
            # at rest, or not the step's latest call (a later one was made): it is over
            self.bar(s, undo, prior, self.last, _css(undo, "unrecorded"), None)
            return
        if going:
            self.lanes[s].still = f"{called}: {summary(shown)}"
        if shown.state is not CallState.UNRECORDED:
            css = "open" if shown.state is CallState.IN_FLIGHT else "indoubt"
            self.bar(s, undo, prior, self.end, _css(undo, css), None, [shown.text])
            return
        if shown.ended is None:
            note = "when it ended is not on the ledger (no lease expiry, no deadline)"
            note += ": drawn to the last event"
            self.bar(s, undo, prior, self.last, _css(undo, "unrecorded"), None, [shown.text, note])
            return
        ended = min(max(shown.ended, prior.at), self.end)
        proof = "over by then, the ledger proves: its holder's lease expired, its deadline passed"
        css = _css(undo, "unrecorded")
        self.bar(s, undo, prior, ended, css, None, [proof, shown.text], until="ended by")
        if ended < self.end:
            why = f"the {what} ended, unrecorded: a worker settles it"
            self.add_wait(s, "worker", ended, self.end, why)


def _css(undo: bool, css: str) -> str:
    return f"u-{css}" if undo else css


def _capped(segs: list[Seg], what: str, name: str) -> list[Seg]:
    """At most ``CAP`` segments: the first ``HEAD``, one for the middle, the last ``TAIL``."""
    if len(segs) <= CAP:
        return segs
    middle = segs[HEAD : len(segs) - TAIL]
    counts: dict[str, int] = {}
    for seg in middle:
        counts[seg.css] = counts.get(seg.css, 0) + 1
    start, end = min(s.start for s in middle), max(s.end for s in middle)
    tally = ", ".join(f"{n} {css}" for css, n in sorted(counts.items()))
    lines = [
        f"{name}: {len(middle)} {what} grouped (numbers {HEAD + 1} to {len(segs) - TAIL})",
        f"{tally}",
        f"from {stamp(start)} UTC to {stamp(end)} UTC, {took(end - start)}",
    ]
    group = Seg("group", start, end, lines)
    group.attempt = len(middle)
    return [*segs[:HEAD], group, *segs[len(segs) - TAIL :]]


@dataclass(frozen=True)
class Scale:
    t0: float
    span: float
    unit: str
    per: float  # seconds per unit
    step: float  # units between ticks

    @classmethod
    def of(cls, t0: float, span: float) -> Scale:
        span = max(span, 0.001)
        unit, per = (
            ("ms", 0.001)
            if span < 1
            else ("s", 1.0)
            if span < 120
            else ("min", 60.0)
            if span < 7200
            else ("h", 3600.0)
            if span < 172800
            else ("d", 86400.0)
        )
        raw = span / per / 6
        mag = 10 ** math.floor(math.log10(raw))
        step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
        return cls(t0, span, unit, per, step)

    def x(self, at: float) -> float:
        return LEFT + (at - self.t0) / self.span * (WIDTH - LEFT - RIGHT)

    def ticks(self) -> list[tuple[float, str]]:
        found, n = [], 0
        while n * self.step * self.per <= self.span * 1.0001 and n < 50:
            v = n * self.step
            found.append((self.t0 + v * self.per, f"+{float(f'{v:.6g}'):g} {self.unit}"))
            n += 1
        return found


def _rect(css: str, x: float, y: float, w: float, h: float, fill: str, extra: str = "") -> str:
    return (
        f'<rect class="{css}" x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" '
        f'fill="{fill}"{extra}>'
    )


def timeline_svg(
    state: SagaState,
    events: Sequence[Event],
    now: float | None = None,
    calls: Mapping[int, Shown] | None = None,
) -> Markup:
    """The saga's steps as lanes, a bar per attempt (undos in another hue), its waits and
    its saga-level moments, against time since its first event; given ``now`` (the ledger's
    time), what a saga not at rest still has open (a call in progress, a wait) is drawn
    until then. ``calls``: where its calls stand at ``now``, by step (``progress.live``):
    a call with no outcome recorded is drawn and said as in flight, in doubt until a time,
    or ended, unrecorded (its bar stops where the ledger proves it over); without them it
    runs on until ``now``, its state untold."""
    found = _ordered(events)
    n = len(state.steps)
    bottom = TOP + (n + 1) * LANE
    legend, rows = _legend(LEGEND, bottom + 14, WIDTH)
    height = bottom + 14 + rows * LEGEND_ROW + 4
    head = (
        f'<svg xmlns="{NS}" class="pic timeline" role="img" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="{FONT}" font-size="12" fill="{INK}">'
        f"<title>Attempts over time of saga {_t(state.saga_id, 200)}</title>"
    )
    if not found:
        body = f'<text x="8" y="24" fill="{MUTED}">No events to draw.</text>'
        return Markup(head + body + "</svg>")
    tl = _Timeline(state, found, now, calls)
    scale = Scale.of(tl.t0, tl.end - tl.t0)
    parts = [head]
    parts.append(
        f'<text class="axis-note" x="8" y="14" font-size="11" fill="{MUTED}">'
        f"time since {_t(stamp(tl.t0))} UTC (span {_t(took(tl.end - tl.t0))})</text>"
    )
    for i in range(n + 1):  # stripes: a lane per step, then the saga's own row
        if i % 2 == 0:
            parts.append(_rect("stripe", 0, TOP + i * LANE, WIDTH, LANE, STRIPE) + "</rect>")
    parts.append('<g class="axis">')
    for at, label in scale.ticks():
        x = scale.x(at)
        parts.append(
            f'<line x1="{_n(x)}" y1="{TOP - 6}" x2="{_n(x)}" y2="{bottom}" stroke="{LINE}" '
            'stroke-width="1"/>'
            f'<text x="{_n(x)}" y="{TOP - 10}" font-size="11" fill="{MUTED}" '
            f'text-anchor="middle">{_t(label)}</text>'
        )
    parts.append("</g>")
    for i, lane in enumerate(tl.lanes):
        parts.append(_lane(i, lane, scale))
    parts.append(_saga_row(n, tl, scale))
    parts.append(legend)
    parts.append("</svg>")
    return Markup("".join(parts))


def _lane(i: int, lane: Lane, scale: Scale) -> str:
    r, y = lane.record, TOP + i * LANE
    name = r.name
    out = [f'<g class="lane" data-step="{i}">']
    out.append(
        f'<text class="lane-label" x="8" y="{y + 17}">'
        + _title(
            [
                f"step {i}: {name} ({r.kind})",
                f"status {r.status.value}, {r.attempts} attempts"
                + (f"; undo {r.undo_status.value}" if r.undo_status is not UndoStatus.NONE else ""),
            ]
        )
        + f'<tspan fill="{MUTED}">{i}</tspan> {_t(name, NAME)}</text>'
    )
    mid = y + LANE / 2
    for seg in _capped(sorted(lane.waits, key=lambda s: s.start), "waits", name):
        x0, x1 = scale.x(seg.start), scale.x(seg.end)
        kind = seg.css.removeprefix("w-")
        fill = FILL.get(kind, FILL["group"])
        dash = ' stroke-dasharray="3 2"' if kind == "worker" else ""
        out.append(
            _rect(f"wait {seg.css}", x0, mid - 3, max(x1 - x0, 1.5), 6, fill, dash)
            + _title(seg.lines)
            + "</rect>"
        )
    for segs, what, top in ((lane.bars, "attempts", 5.0), (lane.undos, "undos", 7.0)):
        for seg in _capped(segs, what, name):
            x0, x1 = scale.x(seg.start), scale.x(seg.end)
            w = max(x1 - x0, 3.0)
            css = "bar undo" if what == "undos" else "bar attempt"
            if seg.css == "group":
                out.append(
                    _rect(
                        f"{css} group",
                        x0,
                        y + top,
                        w,
                        LANE - 2 * top,
                        FILL["group"],
                        f' stroke="{MUTED}" stroke-dasharray="2 2"',
                    )
                    + _title(seg.lines)
                    + "</rect>"
                )
                if w > 30:
                    out.append(
                        f'<text x="{_n(x0 + w / 2)}" y="{y + 17}" font-size="10" '
                        f'text-anchor="middle" fill="{INK}">&#215;{seg.attempt}</text>'
                    )
                continue
            no_outcome = seg.css.removeprefix("u-") in _NO_OUTCOME
            extra = ' stroke="#1d2330" stroke-dasharray="2 1"' if no_outcome else ""
            out.append(
                _rect(f"{css} a-{seg.css}", x0, y + top, w, LANE - 2 * top, FILL[seg.css], extra)
                + _title(seg.lines)
                + "</rect>"
            )
    for seg in _capped(lane.marks, "marks", name):
        x = scale.x(seg.start)
        out.append(
            f'<path class="mark {seg.css}" d="M{_n(x)} {_n(y + 4)}l4 9h-8z" fill="{INK}">'
            + _title(seg.lines)
            + "</path>"
        )
    if lane.still:  # the last event left it waiting: said at the end of its lane
        x = scale.x(scale.t0 + scale.span)
        out.append(
            f'<text class="still" x="{_n(x - 6)}" y="{y + 17}" font-size="11" '
            f'text-anchor="end" fill="{INK}" stroke="#ffffff" stroke-width="3" '
            f'paint-order="stroke">{_t(lane.still, 80)} &#9656;</text>'
        )
    out.append("</g>")
    return "".join(out)


def _saga_row(n: int, tl: _Timeline, scale: Scale) -> str:
    y = TOP + n * LANE
    out = [
        f'<g class="lane saga-row"><text x="8" y="{y + 17}" fill="{MUTED}">the saga</text>',
    ]
    free = 0.0  # where the next label may start without overlapping the last
    for e, label, colour in _capped_marks(tl.saga):
        x = scale.x(e.at)
        detail = _error(e)
        lines = [label, tl.when("at", e.at), detail]
        if e.type is not EventType.SAGA_SUBMITTED:
            out.append(
                f'<line x1="{_n(x)}" y1="{TOP}" x2="{_n(x)}" y2="{y}" stroke="{colour}" '
                'stroke-width="1" stroke-dasharray="4 3"/>'
            )
        out.append(
            f'<path class="saga-mark" d="M{_n(x)} {y + 5}l5 7l-5 7l-5-7z" fill="{colour}">'
            + _title(lines)
            + "</path>"
        )
        if x + 8 >= free and e.type is not EventType.SAGA_SUBMITTED:  # t=0 says it
            anchor = "end" if x > WIDTH - 140 else "start"
            lx = x - 8 if anchor == "end" else x + 8
            out.append(
                f'<text x="{_n(lx)}" y="{y + 17}" font-size="11" fill="{colour}" '
                f'text-anchor="{anchor}">{_t(label)}</text>'
            )
            free = x + 8 + 7 * len(label) if anchor == "start" else WIDTH
    out.append("</g>")
    return "".join(out)


def _capped_marks(marks: list[tuple[Event, str, str]]) -> list[tuple[Event, str, str]]:
    return marks if len(marks) <= CAP else [*marks[:HEAD], *marks[-TAIL:]]


LEGEND = (
    ("bar", FILL["ok"], "attempt succeeded"),
    ("bar", FILL["retry"], "failed, retry scheduled"),
    ("bar", FILL["failed"], "failed"),
    ("bar", FILL["unknown"], "outcome unknown"),
    ("bar", FILL["open"], "in flight"),
    ("bar", FILL["indoubt"], "in doubt"),
    ("bar", FILL["unrecorded"], "ended, unrecorded"),
    ("bar", FILL["u-ok"], "undo"),
    ("bar", FILL["u-retry"], "undo, retry scheduled"),
    ("bar", FILL["u-dead"], "undo dead-lettered"),
    ("wait", FILL["backoff"], "retry backoff"),
    ("wait", FILL["worker"], "waiting for a worker"),
    ("wait", FILL["approval"], "waiting for approval"),
    ("mark", INK, "recorded without a call"),
)
LEGEND_ROW = 18


def _swatch(shape: str, x: float, y: float, fill: str) -> str:
    if shape == "wait":
        return _rect("swatch", x, y + 3, 14, 6, fill) + "</rect>"
    if shape == "mark":
        return f'<path d="M{_n(x + 7)} {_n(y)}l4 9h-8z" fill="{fill}"/>'
    if shape == "circle":
        return f'<circle cx="{_n(x + 7)}" cy="{_n(y + 6)}" r="6" fill="{fill}" stroke="{INK}"/>'
    if shape == "ring":
        return (
            f'<circle cx="{_n(x + 7)}" cy="{_n(y + 6)}" r="5.5" fill="#ffffff" '
            f'stroke="{fill}" stroke-width="2.5"/>'
        )
    if shape == "diamond":
        return f'<path d="M{_n(x + 7)} {_n(y - 1)}l7 7l-7 7l-7-7z" fill="{fill}" stroke="{INK}"/>'
    if shape == "square":
        return (
            f'<rect x="{_n(x + 1)}" y="{_n(y)}" width="12" height="12" rx="3" fill="{fill}" '
            f'stroke="{INK}"/>'
        )
    return _rect("swatch", x, y, 14, 12, fill) + "</rect>"


def _legend(entries: Sequence[tuple[str, str, str]], y: float, width: float) -> tuple[str, int]:
    """A key to the colours and shapes, wrapped to ``width``; and how many rows it took."""
    out, x, rows = ['<g class="legend" font-size="11">'], 8.0, 1
    for shape, fill, label in entries:
        needed = 24 + 6.4 * len(label)
        if x > 8 and x + needed > width - 8:
            x, rows = 8.0, rows + 1
        top = y + (rows - 1) * LEGEND_ROW
        out.append(_swatch(shape, x, top, fill))
        out.append(f'<text x="{_n(x + 19)}" y="{_n(top + 10)}" fill="{MUTED}">{_t(label)}</text>')
        x += needed + 8
    out.append("</g>")
    return "".join(out), rows


# -- the plan ----------------------------------------------------------------------------

COL, ROW, PTOP, PLEFT = 180, 118, 40, 16
STATUS_FILL = {
    StepStatus.PENDING: "#ffffff",
    StepStatus.STARTED: "#2f5bd3",
    StepStatus.RETRY_WAIT: "#f79009",
    StepStatus.SUCCEEDED: "#17803d",
    StepStatus.FAILED: "#b42318",
    StepStatus.UNKNOWN: "#6927b0",
}
UNDO_WORDS = {
    UndoStatus.NONE: "",
    UndoStatus.STARTED: "undoing",
    UndoStatus.RETRY_WAIT: "undo retrying",
    UndoStatus.DONE: "undone",
    UndoStatus.PARTIAL: "partly undone",
    UndoStatus.LAPSED: "hold lapsed",
    UndoStatus.DEAD_LETTERED: "undo dead-lettered",
    UndoStatus.RESOLVED: "undo settled by hand",
}
ASKED = "nothing is undone: a person is asked"
PLAN_LEGEND = (
    ("circle", "#ffffff", "compensable"),
    ("diamond", "#ffffff", "pivot"),
    ("square", "#ffffff", "retriable"),
    ("bar", STATUS_FILL[StepStatus.SUCCEEDED], "succeeded"),
    ("bar", STATUS_FILL[StepStatus.STARTED], "started"),
    ("bar", STATUS_FILL[StepStatus.RETRY_WAIT], "waiting to retry"),
    ("bar", STATUS_FILL[StepStatus.FAILED], "failed"),
    ("bar", STATUS_FILL[StepStatus.UNKNOWN], "outcome unknown"),
    ("ring", "#b54708", "undone"),
)


def _pnr(state: SagaState) -> int | None:
    """The point of no return (as the engine finds it): the pivot, else the first
    retriable step."""
    for kind in (StepKind.PIVOT.value, StepKind.RETRIABLE.value):
        for r in state.steps:
            if r.kind == kind:
                return r.index
    return None


def _columns(state: SagaState) -> list[list[StepRecord]]:
    """The plan in order, a parallel group (consecutive steps of one group) per column."""
    cols: list[list[StepRecord]] = []
    for r in state.steps:
        if cols and r.group is not None and cols[-1][0].group == r.group:
            cols[-1].append(r)
        else:
            cols.append([r])
    return cols


def undoes(state: SagaState, index: int) -> list[StepRecord] | None:
    """What a failure of step ``index`` undoes: the compensable steps before it (and beside
    it, in its parallel group) that may have taken effect, newest first. None past the
    point of no return: nothing is undone there, a person is asked."""
    steps, me = state.steps, state.steps[index]
    pnr = _pnr(state)
    beside = {r.index for r in steps if me.group is not None and r.group == me.group}
    first = min(beside | {index})
    if pnr is not None and first > pnr and pnr not in beside:
        return None
    found = [
        r
        for r in steps
        if r.kind == StepKind.COMPENSABLE.value
        and r.index != index
        and (r.index < first or r.index in beside)
    ]
    return sorted(found, key=lambda r: r.index, reverse=True)


def caption(state: SagaState, index: int) -> str:
    found = undoes(state, index)
    if found is None:
        return ASKED
    if not found:
        return "a failure here undoes nothing"
    return "a failure here undoes: " + ", ".join(r.name for r in found)


def _wrap(text: str, width: int, lines: int) -> list[str]:
    words, out, line = text.split(" "), [], ""
    for word in words:
        word = word if len(word) <= width else word[: width - 1] + "…"
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        out.append(line)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1] + "…"
    return out


def _undo_name(catalogue: Catalogue | None, name: str) -> str:
    step = catalogue.get(name) if catalogue is not None else None
    undo = getattr(step, "undo", None) if step is not None else None
    return getattr(undo, "__name__", "") if undo is not None else ""


def plan_svg(state: SagaState, catalogue: Catalogue | None) -> Markup:
    """The plan as a line of its steps in order (a parallel group stacked in one column),
    each coloured by its status, the pivot marked, and under each what a failure there
    undoes."""
    cols = _columns(state)
    pnr = _pnr(state)
    tallest = max((len(c) for c in cols), default=1)
    width = PLEFT * 2 + max(len(cols), 1) * COL
    lines_bottom = PTOP + tallest * ROW + 8
    width = max(width, 1000)  # room for the key on one line
    legend, rows = _legend(PLAN_LEGEND, lines_bottom + 6, width)
    height = lines_bottom + 6 + rows * LEGEND_ROW + 4
    out = [
        f'<svg xmlns="{NS}" class="pic plan" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="{FONT}" font-size="12" fill="{INK}">'
        f"<title>The plan of saga {_t(state.saga_id, 200)}</title>"
    ]
    if not cols:
        out.append(f'<text x="8" y="24" fill="{MUTED}">The plan has no steps.</text></svg>')
        return Markup("".join(out))
    line_y = PTOP + 16
    x_first = PLEFT + COL / 2
    x_last = PLEFT + (len(cols) - 1) * COL + COL / 2
    out.append(
        f'<line class="plan-line" x1="{_n(x_first)}" y1="{line_y}" x2="{_n(x_last)}" '
        f'y2="{line_y}" stroke="{MUTED}" stroke-width="2"/>'
    )
    for c, members in enumerate(cols):
        cx = PLEFT + c * COL + COL / 2
        if len(members) > 1:  # a fork to the members stacked below, and a join
            bottom = line_y + (len(members) - 1) * ROW
            for dx in (-COL / 2 + 14, COL / 2 - 14):
                out.append(
                    f'<line x1="{_n(cx + dx)}" y1="{line_y}" x2="{_n(cx + dx)}" '
                    f'y2="{bottom}" stroke="{MUTED}" stroke-width="2"/>'
                )
            for k in range(1, len(members)):
                y = line_y + k * ROW
                out.append(
                    f'<line x1="{_n(cx - COL / 2 + 14)}" y1="{y}" x2="{_n(cx + COL / 2 - 14)}" '
                    f'y2="{y}" stroke="{MUTED}" stroke-width="2"/>'
                )
            out.append(
                f'<text x="{_n(cx)}" y="{PTOP - 14}" font-size="11" fill="{MUTED}" '
                f'text-anchor="middle">in parallel (group {_t(members[0].group, 12)})</text>'
            )
        for k, r in enumerate(members):
            out.append(_node(state, catalogue, r, cx, line_y + k * ROW, pnr))
        if pnr is not None and any(r.index == pnr for r in members):
            x = cx + COL / 2
            out.append(
                f'<g class="no-return"><line x1="{_n(x)}" y1="{PTOP - 22}" x2="{_n(x)}" '
                f'y2="{lines_bottom}" stroke="#b42318" stroke-width="2" stroke-dasharray="6 4"/>'
                f'<text x="{_n(x - 4)}" y="{PTOP - 26}" font-size="11" fill="#b42318" '
                'text-anchor="end">point of no return ▸</text></g>'
            )
    out.append(legend)
    out.append("</svg>")
    return Markup("".join(out))


def _node(
    state: SagaState,
    catalogue: Catalogue | None,
    r: StepRecord,
    cx: float,
    cy: float,
    pnr: int | None,
) -> str:
    fill = STATUS_FILL.get(r.status, "#ffffff")
    undone = UNDO_WORDS.get(r.undo_status, "")
    ring = "#b42318" if r.undo_status is UndoStatus.DEAD_LETTERED else "#b54708" if undone else INK
    found = undoes(state, r.index)
    step = catalogue.get(r.name) if catalogue is not None else None
    lines = [
        f"step {r.index}: {r.name} ({r.kind})",
        clean(step.description, NOTE) if step is not None and step.description else "",
        f"status {r.status.value} after {r.attempts} attempts" + (f"; {undone}" if undone else ""),
        clean(f"error: {r.error}", NOTE) if r.error else "",
    ]
    if found is None:
        lines.append(f"a failure here: {ASKED} (past the point of no return)")
    else:
        names = [f"{u.name} ({_undo_name(catalogue, u.name) or 'its undo'})" for u in found]
        lines.append("a failure here undoes: " + (", ".join(names) if names else "nothing"))
        if r.kind == StepKind.COMPENSABLE.value:
            lines.append("and this step too, if it may have taken effect")
        elif r.index == pnr:
            lines.append("if its outcome is unknown: a person is asked")
    kind_css = f"k-{clean(r.kind, 20)}"
    out = [f'<g class="node {_t(kind_css)} n-{r.status.value}" data-step="{r.index}">']
    out.append(_title(lines))
    width = 2.5 if undone else 1.5
    paint = f'fill="{fill}" stroke="{ring}" stroke-width="{width}"'
    if r.kind == StepKind.PIVOT.value:
        out.append(
            f'<path class="pivot" d="M{_n(cx)} {_n(cy - 15)}l15 15l-15 15l-15-15z" {paint}/>'
            f'<text x="{_n(cx)}" y="{_n(cy - 20)}" font-size="10" font-weight="bold" '
            'fill="#b42318" text-anchor="middle">PIVOT</text>'
        )
    elif r.kind == StepKind.RETRIABLE.value:
        out.append(
            f'<rect class="retriable" x="{_n(cx - 10)}" y="{_n(cy - 10)}" width="20" '
            f'height="20" rx="4" {paint}/>'
        )
    else:
        out.append(f'<circle class="compensable" cx="{_n(cx)}" cy="{_n(cy)}" r="11" {paint}/>')
    y = cy + 32
    out.append(
        f'<text x="{_n(cx)}" y="{_n(y)}" text-anchor="middle" font-weight="600">'
        f"{_t(r.name, LABEL)}</text>"
    )
    state_line = r.status.value + (f" · {undone}" if undone else "")
    out.append(
        f'<text x="{_n(cx)}" y="{_n(y + 15)}" text-anchor="middle" font-size="11" '
        f'fill="{MUTED}">{_t(state_line, 40)}</text>'
    )
    for n, line in enumerate(_wrap(caption(state, r.index), 30, 3)):
        out.append(
            f'<text class="caption" x="{_n(cx)}" y="{_n(y + 31 + 13 * n)}" text-anchor="middle" '
            f'font-size="10.5" fill="{MUTED}">{_t(line, 40)}</text>'
        )
    out.append("</g>")
    return "".join(out)


# -- for the page ------------------------------------------------------------------------


def for_page(
    state: SagaState,
    events: Sequence[Event],
    app: Any,
    now: float | None = None,
    calls: Mapping[int, Shown] | None = None,
) -> dict[str, Markup]:
    """Both pictures for the saga page (``now``, ``calls``: see ``timeline_svg``); one
    that cannot be drawn says so instead of failing the page (and is logged)."""
    try:
        catalogue: Catalogue | None = app.catalogue(state.catalogue)
    except Exception:  # a catalogue this server does not load: drawn without it
        catalogue = None
    drawn: dict[str, Markup] = {}
    for name in ("plan", "timeline"):
        try:
            drawn[name] = (
                plan_svg(state, catalogue)
                if name == "plan"
                else timeline_svg(state, events, now, calls)
            )
        except Exception:
            log.exception("the %s picture of saga %s could not be drawn", name, state.saga_id)
            drawn[name] = Markup('<p class="muted">This picture could not be drawn.</p>')
    return drawn
