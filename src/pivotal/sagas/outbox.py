"""The transactional outbox: messages committed with the state change they announce.

The engine announces every saga outcome; a step announces what it wants the rest of the
company to know by declaring ``announce=fn`` (``fn(args, result)`` returns its messages,
derived from the recorded result, so they are committed however the success was
established: by the action's reply, or by ``lookup`` after a lost reply or a crash), or
through ``ctx.publish(type, data)`` during the call (kept only when that call returned).
Either way the message is inserted in the transaction that records the change, so it exists
exactly when the change does: no dual write. A relay (``pivotal.operations.relay``) delivers them
later, at least once, in order per saga.

Ids are stable, so a commit retried after a lost reply cannot create a second message (the
ledger inserts an id once), and a receiver dedupes on the id: ``{saga}:{event}`` for the
engine's, ``{saga}:{step}#{n}`` for the n-th message of a step's success (the action's
idempotency key and the message's position: one per step, whichever attempt or settlement
recorded it) and ``{saga}:{step}:undo#{n}`` for its undo's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pivotal.errors import MessageError
from pivotal.records import quick_init
from pivotal.sagas.agent_reasons import WAITING, Reason, announced
from pivotal.sagas.state import Event, EventType, SagaState

MAX_MESSAGE_BYTES = 20_000  # a message is a notification, not a document
MAX_TYPE_LENGTH = 100

# What the engine announces, by the event that records it.
ANNOUNCED: Mapping[EventType, str] = {
    EventType.SAGA_COMPLETED: "saga.completed",
    EventType.SAGA_COMPENSATED: "saga.compensated",
    EventType.SAGA_COMPENSATION_FAILED: "saga.compensation_failed",
    EventType.SAGA_NEEDS_HUMAN: "saga.needs_human",
    EventType.SAGA_RESOLVED: "saga.resolved",
    EventType.APPROVAL_REQUESTED: "approval.requested",
}

# Events that may carry messages a step published through its context or announced.
_STEP_MESSAGES = frozenset(
    {EventType.STEP_SUCCEEDED, EventType.UNDO_SUCCEEDED, EventType.UNDO_PARTIAL}
)
_UNDOS = frozenset({EventType.UNDO_SUCCEEDED, EventType.UNDO_PARTIAL})

# What announces an undo that could restore only part of what was there (with its note).
UNDO_PARTIAL = "step.undo_partial"

# What replaces a step's announcement that could not be made (its function raised, or
# returned what cannot be kept): the success stands, and the failure is announced instead.
ANNOUNCE_FAILED = "step.announce_failed"

OUTCOMES = ("delivered", "failed", "dead", "lost", "unsettled", "deferred")
"""What a relay's round does with a message (``pivotal.operations.relay``), as counted."""


@quick_init
@dataclass(frozen=True, slots=True)
class Message:
    """One outbox message as it is kept until delivered."""

    id: str  # stable across retries and relays: receivers dedupe on it
    saga_id: str
    type: str  # e.g. "saga.compensated", or a step's own type
    payload: Mapping[str, Any]
    created_at: float
    traceparent: str | None = None
    seq: int = 0  # position in the outbox (assigned by the ledger)
    status: str = "pending"  # pending, delivered, or dead (retries ran out)
    attempts: int = 0
    next_attempt_at: float | None = None
    delivered_at: float | None = None
    last_error: str | None = None

    def envelope(self) -> dict[str, Any]:
        """What a receiver gets: the id to dedupe on, the type, when, and the data."""
        return {
            "id": self.id,
            "type": self.type,
            "timestamp": self.created_at,
            "saga_id": self.saga_id,
            "data": dict(self.payload),
        }


def check_message(type: str, data: Any) -> dict[str, Any]:
    """A step's message as it will be kept; ``MessageError`` says why it cannot be."""
    if (
        not isinstance(type, str)
        or not type.strip()
        or len(type) > MAX_TYPE_LENGTH
        or not type.isprintable()
    ):
        raise MessageError(f"a message type is 1-{MAX_TYPE_LENGTH} printable characters")
    if not isinstance(data, Mapping):
        raise MessageError("a message's data is a mapping of JSON values")
    try:
        text = json.dumps(data, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise MessageError(f"a message's data must be JSON: {exc}") from exc
    if len(text.encode()) > MAX_MESSAGE_BYTES:
        raise MessageError(f"a message's data is larger than {MAX_MESSAGE_BYTES} bytes")
    loaded: dict[str, Any] = json.loads(text)
    return {"type": type, "data": loaded}


def checked_announcements(items: Iterable[Any]) -> list[dict[str, Any]]:
    """What a step's ``announce`` returned, as kept: each a ``(type, data)`` pair;
    ``MessageError`` says why one cannot be (a string, not a list of pairs, is refused)."""
    if isinstance(items, (str, bytes, Mapping)):
        raise MessageError("announce returns a list of (type, data) pairs")
    out = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise MessageError(f"announce returned {item!r:.80}, not a (type, data) pair")
        out.append(check_message(item[0], item[1]))
    return out


def messages_for(state: SagaState, events: Sequence[Event]) -> list[Message]:
    """The messages a commit of ``events`` (leading to ``state``) announces."""
    out: list[Message] = []
    for e in events:
        kind = ANNOUNCED.get(e.type)
        if kind is not None:
            out.append(_announcement(state, e, kind))
        if e.type is EventType.UNDO_PARTIAL:
            out.append(_partial_undo(state, e))
        if e.type in _STEP_MESSAGES:
            undo = e.type in _UNDOS
            key = f"{state.saga_id}:{e.step}" + (":undo" if undo else "")
            for n, m in enumerate(e.data.get("messages") or ()):
                out.append(
                    Message(
                        id=f"{key}#{n}",
                        saga_id=state.saga_id,
                        type=m["type"],
                        payload={
                            "saga_id": state.saga_id,
                            "catalogue": state.catalogue,
                            "step": e.step,
                            "step_name": None if e.step is None else state.steps[e.step].name,
                            "undo": undo,
                            "provenance_ref": state.provenance_ref,
                            "data": m["data"],
                        },
                        created_at=e.at,
                        traceparent=state.traceparent,
                        next_attempt_at=e.at,
                    )
                )
    return out


def _partial_undo(state: SagaState, e: Event) -> Message:
    step = e.step
    return Message(
        id=f"{state.saga_id}:{e.seq}",
        saga_id=state.saga_id,
        type=UNDO_PARTIAL,
        payload={
            "saga_id": state.saga_id,
            "catalogue": state.catalogue,
            "step": step,
            "step_name": None if step is None else state.steps[step].name,
            "note": e.data.get("note"),
            "provenance_ref": state.provenance_ref,
        },
        created_at=e.at,
        traceparent=state.traceparent,
        next_attempt_at=e.at,
    )


def _announcement(state: SagaState, e: Event, kind: str) -> Message:
    """The engine's announcement of ``e``: addressed to the agent that asked, it says why
    as ``agent_view`` tells an agent (a reason code and Pivotal's words), never the policy
    that asked a person, who decided or why, nor a step's error; people read those in the
    ledger."""
    payload: dict[str, Any] = {
        "saga_id": state.saga_id,
        "catalogue": state.catalogue,
        "provenance_ref": state.provenance_ref,
    }
    if e.type is EventType.APPROVAL_REQUESTED and e.step is not None:
        payload |= {
            "reason": WAITING,
            "reason_code": Reason.APPROVAL_PENDING.value,
            "step": e.step,
            "step_name": state.steps[e.step].name,
            "expires_at": e.data.get("expires_at"),
        }
    else:
        payload |= announced(state)
        payload["status"] = kind.removeprefix("saga.")
        if e.type in (EventType.SAGA_COMPENSATED, EventType.SAGA_COMPENSATION_FAILED):
            payload["compensating_since"] = state.compensating_since
    return Message(
        id=f"{state.saga_id}:{e.seq}",
        saga_id=state.saga_id,
        type=kind,
        payload=payload,
        created_at=e.at,
        traceparent=state.traceparent,
        next_attempt_at=e.at,
    )
