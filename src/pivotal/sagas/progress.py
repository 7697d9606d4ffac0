"""Progress of long work: what a running call reports with ``ctx.progress(...)``.

A call that takes minutes (a file copied, a batch sent) says how far it got. Each report is
checked here, then kept on the step's row in the ledger by the holder of the saga's lease,
fenced by its epoch, and the lease is renewed with it: a report is also proof that the
work is alive. A call whose lease was taken over learns it from its next report
(``LeaseLost``), and stops. Reports are kept at most once per ``EVERY`` seconds (a call may
report in a tight loop); the latest one within that time waits for the next.

Operators see the report of the attempt in progress, with how long it has run, its attempt
and the worker holding the lease (``describe``), on the CLI, the API and the page alike.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pivotal.clock import Clock
from pivotal.errors import ProgressError
from pivotal.moments import age, moment
from pivotal.redaction import redact
from pivotal.sagas.call_state import CallState, Lease, call_of, decide, ended_by, lease_of
from pivotal.sagas.state import SagaState, StepRecord, StepStatus, UndoStatus

if TYPE_CHECKING:
    from pivotal.store.base import Store

EVERY = 1.0  # seconds between two reports kept of one call
MAX_MESSAGE = 500  # characters of a report's message


def check(message: str, done: float | None, total: float | None) -> dict[str, Any]:
    """A report as it is kept; ``ProgressError`` says why it cannot be."""
    if not isinstance(message, str) or len(message) > MAX_MESSAGE:
        raise ProgressError(f"a progress message is text of at most {MAX_MESSAGE} characters")
    # kept as a person may read it: on one line, without a password or token it quotes
    record: dict[str, Any] = {"message": redact(" ".join(message.split()))}
    for name, value in (("done", done), ("total", total)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ProgressError(f"progress {name} is a number, not {value!r:.40}")
        if not (math.isfinite(value) and value >= 0):
            raise ProgressError(f"progress {name} is a finite number of 0 or more")
        record[name] = value
    if total is not None and done is not None and done > total:
        raise ProgressError(f"progress done ({done}) is more than its total ({total})")
    if total is not None and done is None:
        raise ProgressError("progress with a total says how much is done")
    return record


Sink = Callable[[dict[str, Any]], Awaitable[None]]


class Reporter:
    """The reports of one call (one attempt of an action or of an undo): each stamped with
    the call's start, its attempt and when it was made, and passed to ``sink`` at most once
    per ``EVERY`` seconds."""

    __slots__ = ("_clock", "_last", "_sink", "attempt", "since", "undo")

    def __init__(self, sink: Sink, clock: Clock, attempt: int, *, undo: bool = False) -> None:
        self._sink = sink
        self._clock = clock
        self._last = -math.inf
        self.attempt = attempt
        self.undo = undo
        self.since = clock.now()

    async def __call__(self, message: str, done: float | None, total: float | None) -> None:
        record = check(message, done, total)
        now = self._clock.now()
        if now - self._last < EVERY:
            return
        self._last = now
        record |= {"attempt": self.attempt, "since": self.since, "at": now}
        if self.undo:
            record["undo"] = True
        await self._sink(record)


@dataclass(frozen=True, slots=True)
class Shown:
    """A step's call as an operator reads it: ``text`` in one line, ``state`` where it
    stands (``call_state``), ``until`` when it is in doubt, ``fraction`` (0-1) when the
    call is in flight and its report has a total; ``record``: its report, if any;
    ``ended``: when the ledger proves a call ended unrecorded over (``call_state.ended_by``),
    if it tells; ``undo``, ``attempt``: which call it is."""

    text: str
    fraction: float | None
    record: Mapping[str, Any]
    state: CallState = CallState.IN_FLIGHT
    until: float | None = None
    ended: float | None = None
    undo: bool = False
    attempt: int = 0


def current(step: StepRecord, record: Mapping[str, Any] | None) -> bool:
    """Whether ``record`` reports the call of ``step`` that is in progress (not an earlier
    attempt's, nor the action's once its undo runs)."""
    if not record:
        return False
    if record.get("undo"):
        return step.undo_status is UndoStatus.STARTED and record.get("attempt") == (
            step.undo_attempts
        )
    return step.status is StepStatus.STARTED and record.get("attempt") == step.attempts


def describe(
    step: StepRecord,
    record: Mapping[str, Any] | None,
    now: float,
    holder: str | None,
    lease: Lease = Lease.LIVE,
    expired_at: float | None = None,
) -> Shown | None:
    """Where the latest call of ``step`` stands (``call_state.decide``) and what it last
    reported, at ``now`` on the ledger's clock; None when there is no call to speak of.
    ``holder``: the lease's owner; ``expired_at``: when its lease expired, if it did."""
    call = call_of(step)
    report = record if record is not None and current(step, record) else None
    doubt = call.doubt_until
    verdict = decide(call.status, lease, doubt is not None and doubt > now, report is not None)
    if verdict is None:
        return None
    what = "undo attempt" if call.undo else "attempt"
    said, fraction = _report(report)
    if verdict.state is CallState.IN_FLIGHT:
        parts = ["in flight", *said]
        if verdict.running and report is not None:
            parts.append(f"{what} {call.attempt}, running {age(now - report['since'])}")
            parts.append(f"reported {age(now - report['at'])} ago")
        else:
            parts.append(f"{what} {call.attempt}")
        if holder:
            parts.append(f"held by {holder}")
        text = " · ".join(parts)
        return Shown(
            text, fraction, report or {}, verdict.state, undo=call.undo, attempt=call.attempt
        )
    gone = _no_holder(holder, lease, expired_at, now)
    ended = None
    if verdict.state is CallState.IN_DOUBT and doubt is not None:
        head = f"in doubt until {moment(doubt)} ({age(doubt - now)} from now)"
        parts = [head, f"{what} {call.attempt}", f"{gone}: it may still take effect"]
    else:
        parts = ["ended, unrecorded", f"{what} {call.attempt}"]
        parts.append(f"{gone}: it may have ended without its result recorded")
        ended = ended_by(expired_at if lease is Lease.EXPIRED else None, doubt)
    if report is not None:
        parts.append(f"last reported {age(now - report['at'])} ago: " + " · ".join(said))
    text = " · ".join(parts)
    return Shown(
        text, None, report or {}, verdict.state, doubt, ended, undo=call.undo, attempt=call.attempt
    )


def summary(shown: Shown) -> str:
    """Where a call stands and what it last said, without the ages that change each time
    it is read: a line that changes only when the call does."""
    said, _ = _report(shown.record or None)
    if shown.state is CallState.IN_DOUBT and shown.until is not None:
        head = f"in doubt until {moment(shown.until)}"
    else:
        head = "in flight" if shown.state is CallState.IN_FLIGHT else "ended, unrecorded"
    return " · ".join([head, *said])


def _report(report: Mapping[str, Any] | None) -> tuple[list[str], float | None]:
    """A report's words (how far, its message) and its fraction done, if it has a total."""
    if report is None:
        return [], None
    parts = []
    done, total = report.get("done"), report.get("total")
    fraction = None
    if total is not None and done is not None:
        fraction = 1.0 if total == 0 else min(1.0, done / total)
        parts.append(f"{_figure(done)} of {_figure(total)} ({fraction:.0%})")
    elif done is not None:
        parts.append(f"{_figure(done)} done")
    if report.get("message"):
        parts.append(str(report["message"]))
    return parts, fraction


def _no_holder(holder: str | None, lease: Lease, expired_at: float | None, now: float) -> str:
    if lease is Lease.EXPIRED and holder:
        since = f" {age(now - expired_at)} ago" if expired_at is not None else ""
        return f"no live holder ({holder}'s lease expired{since})"
    return "no live holder"


def _figure(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def in_progress(state: SagaState, now: float) -> bool:
    """Whether a call of the saga may be in progress or in doubt at ``now`` (a report, a
    lease, may be worth reading)."""
    if state.status.terminal:
        return False
    for s in state.steps:
        call = call_of(s)
        if call.status is StepStatus.STARTED or (call.doubt_until or 0.0) > now:
            return True
    return False


async def live(store: Store, state: SagaState, now: float) -> dict[int, Shown]:
    """Where the saga's calls stand at ``now`` (the ledger's time), by step index, as
    ``describe`` shows them (read from the ledger only when a call may be in progress)."""
    if not in_progress(state, now):
        return {}
    records = await store.progress_of(state.saga_id)
    found = await store.lease_of(state.saga_id)
    holder, expires_at = (found[0], found[2]) if found is not None else (None, None)
    lease = lease_of(holder, expires_at, now)
    expired_at = expires_at if lease is Lease.EXPIRED else None
    shown = {
        step.index: describe(step, records.get(step.index), now, holder, lease, expired_at)
        for step in state.steps
    }
    return {index: s for index, s in shown.items() if s is not None}


def as_json(shown: Mapping[int, Shown]) -> dict[str, dict[str, Any]]:
    """``live``'s reports as the API and ``--json`` give them, by step index."""
    return {
        str(index): {
            **s.record,
            "text": s.text,
            "fraction": s.fraction,
            "state": s.state.value,
            "until": s.until,
        }
        for index, s in shown.items()
    }
