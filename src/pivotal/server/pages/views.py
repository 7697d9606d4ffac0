"""What the pages show, computed from the ledger: plain dicts for the templates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from pivotal.admission.validation import FactSource
from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.plan import Plan
from pivotal.redaction import redact
from pivotal.sagas.overdue import overdue, step_overdue, undo_overdue
from pivotal.sagas.progress import Shown
from pivotal.sagas.state import ApprovalStatus, Event, SagaState, StepStatus
from pivotal.store.base import DeadLetter, PendingApproval, StoredSaga
from pivotal.store.planning_records import Escalation
from pivotal.tracebacks import last_frame, lines
from pivotal.views import approval_view, render

when = render.when
UNDONE = (StepStatus.SUCCEEDED, StepStatus.UNKNOWN, StepStatus.STARTED, StepStatus.RETRY_WAIT)


def waited(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def decided(state: SagaState, now: float) -> str:
    """Who decided the saga's approval and when, for the approver whose own decision came
    too late: ``approved by alice at … UTC (2m 05s ago)``; or what the saga is now when
    nobody decided it (it expired, it was aborted)."""
    a = state.approval
    if a is None or a.status is ApprovalStatus.PENDING:
        return f"the saga is now {state.status.value}"
    said = a.status.value
    if a.approver:
        said += f" by {a.approver}"
    if a.decided_at is not None:
        said += f" at {when(a.decided_at)} UTC ({waited(now - a.decided_at)} ago)"
    return said + (f": {a.note}" if a.note else "")


def as_text(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else render.as_json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _args(plan: Plan) -> list[dict[str, Any]]:
    return [dict(f.call.args) for f in plan.calls()]


def _field(plan: Plan, names: tuple[str, ...], first: int | None = None) -> str | None:
    args = _args(plan)
    order = ([args[first]] if first is not None and first < len(args) else []) + args
    for found in order:
        for name in names:
            if found.get(name) not in (None, ""):
                return str(found[name])
    return None


def tier(catalogue: Catalogue | None, plan: Plan, index: int) -> str | None:
    """The customer tier as the approval policy tells it from a trusted source (its
    ``tier_of``), else None: never from text the planner wrote."""
    tier_of = getattr(catalogue.approval, "tier_of", None) if catalogue else None
    calls = plan.calls()
    if tier_of is None or index >= len(calls) or catalogue is None:
        return None
    step = catalogue.get(calls[index].call.name)
    try:
        found = tier_of(step.parse_args(calls[index].call.args), plan) if step else None
    except Exception:  # an unknown tier is shown as unknown
        return None
    return str(found) if found else None


def queue_item(
    p: PendingApproval, stored: StoredSaga | None, catalogue: Catalogue | None, now: float
) -> dict[str, Any]:
    a = p.approval
    plan = stored.plan if stored else None
    return {
        "saga_id": p.saga_id,
        "catalogue": p.catalogue,
        "step": p.step_name,
        "amount": p.stake or (_field(plan, ("amount",), a.step) if plan else None),
        "tier": tier(catalogue, plan, a.step) if plan else None,
        "why": a.reason,
        "waited": waited(now - a.requested_at),
        "requested_at": render.when(a.requested_at),
        "expires_at": render.when(a.expires_at),
        "expires_in": waited(a.expires_at - now) if a.expires_at > now else "expired",
        "expired": a.expires_at <= now,
        "actor": plan.provenance.actor_id if plan else None,
    }


def steps(
    stored: StoredSaga,
    events: Sequence[Event] = (),
    progress: Mapping[int, Shown] | None = None,
    now: float | None = None,
) -> list[dict[str, Any]]:
    """The saga's steps; given its events, each partial undo with its note; given the
    reports of calls in progress (``pivotal.sagas.progress.live``), each with its own; given the
    ledger's time, a retry (of the step, or of its undo) that is overdue, and by how long."""
    args = _args(stored.plan)
    notes = render.undo_notes(events)
    progress = progress or {}
    rows = []
    for r in stored.state.steps:
        shown = progress.get(r.index)
        rows.append(
            {
                "index": r.index,
                "name": r.name,
                "kind": r.kind,
                "group": r.group,
                "args": as_text(args[r.index] if r.index < len(args) else {}),
                "status": r.status.value,
                "attempts": r.attempts,
                "undo": "" if r.undo_status.value == "none" else r.undo_status.value,
                "undo_note": as_text(notes[r.index], 200) if r.index in notes else "",
                "overdue": step_overdue(r, now),
                "undo_overdue": undo_overdue(r, now),
                "outcome": as_text(redact(as_text(r.undo_error or r.error or r.result, 4000)), 200),
                "progress": None if shown is None else shown.text,
                "call": None if shown is None else shown.state.value,
                "percent": None
                if shown is None or shown.fraction is None
                else round(shown.fraction * 100),
            }
        )
    return rows


def _precondition(catalogue: Catalogue, name: str, args: dict[str, Any]) -> str:
    step = catalogue.get(name)
    if step is None or step.precondition is None:
        return "this step has no precondition"
    try:
        reason = step.precondition(step.parse_args(args))
    except Exception as exc:  # a precondition that raises does not hold
        return f"does not hold now: it raised {type(exc).__name__}"
    return f"does not hold now: {reason}" if reason else "holds now"


def label(catalogue: Catalogue, name: str) -> str:
    """A step in a person's words: the first line of its description, else its name."""
    step = catalogue.get(name)
    text = step.description.strip() if step is not None else ""
    first = text.splitlines()[0].rstrip(".") if text else ""
    return first or name.replace("_", " ")


def decision(
    stored: StoredSaga,
    catalogue: Catalogue,
    now: float,
    facts: FactSource | None,
    shown: approval_view.ApprovalFacts,
) -> dict[str, Any] | None:
    """What approving and rejecting will do, and the re-checks before the pivot (the plan
    against ``facts``, the app's trusted facts, as they are now); ``shown``: the approval's
    facts (``approval_view``: the request, the amount, the checks)."""
    state, a = stored.state, stored.state.approval
    if a is None:
        return None
    args = _args(stored.plan)
    after = [
        {
            "index": r.index,
            "name": r.name,
            "label": label(catalogue, r.name),
            "kind": r.kind,
            "args": as_text(args[r.index]),
        }
        for r in state.steps[a.step :]
    ]
    ran = [
        r
        for r in state.steps
        if r.status in UNDONE
        and r.index < a.step
        and (s := catalogue.get(r.name)) is not None
        and s.undo is not None
    ]
    ran.sort(key=lambda r: (r.seq or 0, r.index), reverse=True)
    undos = [
        {
            "index": r.index,
            "name": r.name,
            "label": label(catalogue, r.name),
            "args": as_text(args[r.index]),
        }
        for r in ran
    ]
    pivot = state.steps[a.step]
    return {
        "tier": tier(catalogue, stored.plan, a.step),
        "status": a.status.value,
        "pivot": pivot.name,
        "pivot_label": label(catalogue, pivot.name),
        "request_text": shown.request_text,
        "headline": shown.headline,
        "amount_argument": shown.argument,
        "checks": [asdict(c) for c in shown.checks],
        "approve": after,
        "reject": undos,
        "expires_at": render.when(a.expires_at),
        "expires_in": waited(a.expires_at - now) if a.expires_at > now else None,
        "precondition": _precondition(catalogue, pivot.name, args[a.step]),
        "facts": shown.holds_now if a.status is ApprovalStatus.PENDING else None,
        "why": a.reason,
        "requested_at": render.when(a.requested_at),
        "waited": waited(now - a.requested_at),
        "approver": a.approver,
        "note": a.note,
        "decided_at": render.when(a.decided_at),
    }


def timeline(state: SagaState, events: list[Event]) -> list[dict[str, Any]]:
    """The timeline's rows as ``render.timeline_rows`` groups them, every text redacted: a
    failed call's row has its ``trace`` (text) and ``where`` (its last frame of user code);
    a run of retried attempts is one row with each of its events in ``attempts``."""
    start = events[0].at if events else 0.0

    def row(e: Event, first: Event, seq: str, attempt: str, detail: str) -> dict[str, Any]:
        trace = e.data.get("trace")
        return {
            "seq": seq,
            "at": render.when(first.at),
            "plus": f"+{(first.at - start):.1f}s",
            "type": e.type.value,
            "step": state.steps[e.step].name if e.step is not None else "",
            "attempt": attempt,
            "detail": as_text(redact(detail), 300),
            "trace": redact("\n".join(lines(trace))),
            "where": redact(last_frame(trace) or ""),
            "attempts": [],
        }

    rows = []
    for r in render.timeline_rows(events):
        seq = f"{r.first.seq}-{r.event.seq}" if r.attempts else str(r.event.seq)
        shown = row(r.event, r.first, seq, r.tries, r.detail)
        for a in r.attempts:
            tried = "" if a.attempt is None else str(a.attempt)
            shown["attempts"].append(row(a, a, str(a.seq), tried, render._detail(a)))
        rows.append(shown)
    return rows


def head(stored: StoredSaga) -> dict[str, Any]:
    state = stored.state
    return {
        "saga_id": state.saga_id,
        "catalogue": state.catalogue,
        "status": state.status.value,
        "version": state.version,
        "reason": redact(state.reason) if state.reason else state.reason,
        "created_at": render.when(state.created_at),
        "updated_at": render.when(state.updated_at),
        "rationale": stored.plan.rationale,
        "provenance": stored.plan.provenance.model_dump(mode="json"),
    }


def dead_letter(d: DeadLetter, now: float | None = None) -> dict[str, Any]:
    """A dead letter as its page shows it; given the ledger's time, whether the sweep's
    retry of it is overdue, and by how long."""
    return {
        "id": d.id,
        "saga_id": d.saga_id,
        "step": d.step_name,
        "undo_key": d.undo_key,
        "error": as_text(d.error or "", 200),
        "attempts": d.attempts,
        "retries": d.retries,
        "status": d.status,
        "created_at": render.when(d.created_at),
        "next_retry_at": render.when(d.next_retry_at) if d.next_retry_at else "only by hand",
        "overdue": overdue(d.next_retry_at, d.status == "open", now),
    }


def escalation(e: Escalation) -> dict[str, Any]:
    """An open escalation: what was asked (shown as text), and why each attempt failed."""
    run = e.run
    return {
        "id": e.id,
        "catalogue": run.catalogue,
        "request": as_text(run.request.text, 2000),
        "context": as_text(dict(run.request.context), 500) if run.request.context else "",
        "reason": as_text(e.reason, 300),
        "run_id": run.run_id,
        "created_at": render.when(e.created_at),
        "attempts": [
            {
                "n": a.n,
                "by": a.by.label(),
                "codes": sorted({err.code for err in a.errors}),
                "errors": [
                    as_text(f"[{err.code}] {err.where()}: {err.message}", 200)
                    for err in a.errors[:5]
                ],
                "more": max(0, len(a.errors) - 5),
            }
            for a in run.attempts
        ],
    }
