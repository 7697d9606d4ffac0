"""Converting records to and from SQL rows; shared by the SQL stores. The rows' columns,
and every statement, are named in ``pivotal.store.queries``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pivotal.declarations.catalogue import undo_key
from pivotal.jsontext import canonical
from pivotal.sagas.outbox import Message
from pivotal.sagas.state import (
    ApprovalRecord,
    ApprovalStatus,
    Event,
    EventType,
    SagaState,
    SagaStatus,
    StepRecord,
    StepStatus,
    UndoStatus,
)
from pivotal.store import queries as q

# The text of every member of the ledger's enums, read once: an enum member's ``.value`` is a
# property, two Python calls on every read (a row reads two or three).
VALUE: Mapping[str, str] = {
    m: m.value
    for kind in (SagaStatus, StepStatus, UndoStatus, ApprovalStatus, EventType)
    for m in kind
}


def dumps(value: Any) -> str:
    """Compact JSON with sorted keys: ``json.dumps(value, sort_keys=True, separators=(",",
    ":"))`` (``pivotal.jsontext``)."""
    return canonical(value)


def step_row(saga_id: str, r: StepRecord) -> tuple[Any, ...]:
    return (
        saga_id,
        r.index,
        r.name,
        r.kind,
        r.group,
        VALUE[r.status],
        r.attempts,
        None if r.result is None else dumps(r.result),
        r.error,
        r.next_attempt_at,
        r.seq,
        VALUE[r.undo_status],
        r.undo_attempts,
        r.undo_error,
        r.undo_next_attempt_at,
        r.doubt_until,
        r.undo_doubt_until,
        r.settle_attempt,
        r.effect_from,
        r.effect_by,
    )


def step_from_row(row: Any) -> StepRecord:
    return StepRecord(
        index=row[1],
        name=row[2],
        kind=row[3],
        group=row[4],
        status=StepStatus(row[5]),
        attempts=row[6],
        result=None if row[7] is None else json.loads(row[7]),
        error=row[8],
        next_attempt_at=row[9],
        seq=row[10],
        undo_status=UndoStatus(row[11]),
        undo_attempts=row[12],
        undo_error=row[13],
        undo_next_attempt_at=row[14],
        doubt_until=row[15],
        undo_doubt_until=row[16],
        settle_attempt=row[17],
        effect_from=row[18],
        effect_by=row[19],
    )


def subject_rows(saga_id: str, events: Sequence[Event]) -> list[tuple[str, str, str]]:
    """(name, value, saga id) of each entity the saga's submission says its plan names
    (``subjects``: argument name -> canonical ids)."""
    if not events or events[0].type is not EventType.SAGA_SUBMITTED:
        return []
    named: Mapping[str, Sequence[str]] = events[0].data.get("subjects") or {}
    return [(name, value, saga_id) for name, values in named.items() for value in values]


def reservation_rows(saga_id: str, events: Sequence[Event]) -> list[tuple[Any, ...]]:
    """(subject, id, saga id, step, amount, currency) of each value the saga's submission
    says its plan moves (``reserves``: ``exposure.Moved.to_json``), once per subject."""
    if not events or events[0].type is not EventType.SAGA_SUBMITTED:
        return []
    rows: list[tuple[Any, ...]] = []
    for moved in events[0].data.get("reserves") or ():
        for subject, value in moved["per"]:
            rows.append(
                (subject, value, saga_id, moved["step"], moved["amount"], moved["currency"])
            )
    return rows


def approval_row(saga_id: str, a: ApprovalRecord) -> tuple[Any, ...]:
    return (
        saga_id,
        a.step,
        VALUE[a.status],
        a.reason,
        a.rationale,
        a.requested_at,
        a.expires_at,
        a.decided_at,
        a.approver,
        a.note,
        a.required,
        json.dumps(list(a.approved_by)),
    )


def approval_from_row(row: Any) -> ApprovalRecord:
    return ApprovalRecord(
        step=row[1],
        status=ApprovalStatus(row[2]),
        reason=row[3],
        rationale=row[4],
        requested_at=row[5],
        expires_at=row[6],
        decided_at=row[7],
        approver=row[8],
        note=row[9],
        required=row[10],
        approved_by=tuple(json.loads(row[11])),
    )


def event_row(saga_id: str, provenance_ref: str, e: Event) -> tuple[Any, ...]:
    return (
        saga_id,
        e.seq,
        VALUE[e.type],
        e.step,
        e.attempt,
        e.at,
        dumps(dict(e.data)),
        provenance_ref,
    )


def event_from_row(row: Any) -> Event:
    data: Mapping[str, Any] = json.loads(row[6])
    return Event(
        type=EventType(row[2]),
        at=row[5],
        step=row[3],
        attempt=row[4],
        data=data,
        seq=row[1],
        provenance_ref=row[7],
    )


def saga_from_row(row: Any, steps: list[StepRecord], approval: ApprovalRecord | None) -> SagaState:
    return SagaState(
        saga_id=row[0],
        catalogue=row[1],
        plan_digest=row[2],
        provenance_ref=row[3],
        status=SagaStatus(row[4]),
        reason=row[5],
        version=row[6],
        outcomes=row[7],
        created_at=row[8],
        updated_at=row[9],
        steps=tuple(steps),
        approval=approval,
    )


def changed_steps(before: SagaState, after: SagaState) -> list[StepRecord]:
    # folding an event copies only the step it touches: the others are the same objects
    return [b for a, b in zip(before.steps, after.steps, strict=True) if a is not b and a != b]


# the events that park an undo as a dead letter, or settle one
_DEAD_LETTER_EVENTS = frozenset(
    {
        EventType.UNDO_DEAD_LETTERED,
        EventType.UNDO_SUCCEEDED,
        EventType.UNDO_PARTIAL,
        EventType.UNDO_LAPSED,
        EventType.DEAD_LETTER_RESOLVED,
    }
)


def dead_letter_changes(
    after: SagaState, events: Sequence[Event]
) -> list[tuple[str, tuple[Any, ...]]]:
    """The dead-letter statements a commit's events imply: park, park again, or settle."""
    out: list[tuple[str, tuple[Any, ...]]] = []
    for e in events:
        if e.step is None or e.type not in _DEAD_LETTER_EVENTS:  # most events: none
            continue
        r, key = after.steps[e.step], undo_key(after.saga_id, e.step)
        if e.type is EventType.UNDO_DEAD_LETTERED:
            params = (
                after.saga_id,
                r.index,
                r.name,
                key,
                e.data.get("error"),
                e.attempt or 0,
                e.at,
                e.data.get("next_retry_at"),
            )
            out.append((q.UPSERT_DEAD_LETTER, params))
        elif e.type is EventType.UNDO_SUCCEEDED:
            out.append((q.SETTLE_DEAD_LETTER, (e.at, "the undo succeeded", key)))
        elif e.type is EventType.UNDO_PARTIAL:
            out.append((q.SETTLE_DEAD_LETTER, (e.at, "the undo succeeded in part", key)))
        elif e.type is EventType.UNDO_LAPSED:
            out.append((q.SETTLE_DEAD_LETTER, (e.at, "the hold lapsed on its own", key)))
        elif e.type is EventType.DEAD_LETTER_RESOLVED:
            out.append((q.SETTLE_DEAD_LETTER, (e.at, str(e.data.get("reason")), key)))
    return out


def outbox_row(m: Message) -> tuple[Any, ...]:
    return (
        m.id,
        m.saga_id,
        m.type,
        dumps(m.payload),
        m.traceparent,
        m.created_at,
        m.created_at if m.next_attempt_at is None else m.next_attempt_at,
    )


def message_from_row(row: Any) -> Message:
    """A message from the columns of ``q.OUTBOX_COLUMNS``, in that order."""
    return Message(
        seq=int(row[0]),
        id=row[1],
        saga_id=row[2],
        type=row[3],
        payload=json.loads(row[4]),
        traceparent=row[5],
        created_at=row[6],
        status=row[7],
        attempts=int(row[8]),
        next_attempt_at=row[9],
        delivered_at=row[10],
        last_error=row[11],
    )
