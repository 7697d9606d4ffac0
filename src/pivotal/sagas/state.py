"""Saga state and its events. State is a fold of events: ``replay(events) == stored state``."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from pivotal.records import quick_init, settable


class SagaStatus(StrEnum):
    SUBMITTED = "submitted"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    COMPENSATING = "compensating"
    COMPLETED = "completed"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    NEEDS_HUMAN = "needs_human"
    RESOLVED = "resolved"  # a person settled a needs_human saga outside Pivotal

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset(
    {
        SagaStatus.COMPLETED,
        SagaStatus.COMPENSATED,
        SagaStatus.COMPENSATION_FAILED,
        SagaStatus.NEEDS_HUMAN,
        SagaStatus.RESOLVED,
    }
)


class StepStatus(StrEnum):
    PENDING = "pending"
    STARTED = "started"  # intent committed, no outcome recorded
    RETRY_WAIT = "retry_wait"  # an attempt failed transiently; next at next_attempt_at
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # permanent or aborted: took no effect
    UNKNOWN = "unknown"  # retries exhausted and the effect may have happened


class UndoStatus(StrEnum):
    NONE = "none"
    STARTED = "started"
    RETRY_WAIT = "retry_wait"
    DONE = "done"
    PARTIAL = "partial"  # settled, but it could not restore all that was there
    LAPSED = "lapsed"  # settled without a call: the effect (a hold) had lapsed on its own
    DEAD_LETTERED = "dead_lettered"
    RESOLVED = "resolved"  # an operator settled the dead letter


# the undos that need nothing more of compensation (a dead letter waits for a person)
UNDO_SETTLED = frozenset(
    {
        UndoStatus.DONE,
        UndoStatus.PARTIAL,
        UndoStatus.LAPSED,
        UndoStatus.DEAD_LETTERED,
        UndoStatus.RESOLVED,
    }
)
# the steps that may have taken effect
_MAY_HAVE_EFFECT = frozenset(
    {StepStatus.STARTED, StepStatus.RETRY_WAIT, StepStatus.SUCCEEDED, StepStatus.UNKNOWN}
)
_COMPENSABLE = "compensable"  # a step's kind, as its record keeps it (``kinds.StepKind``)


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"


class EventType(StrEnum):
    # the plan, validated, recorded as a saga (with the provenance of the plan)
    SAGA_SUBMITTED = "saga_submitted"
    # the intent of an attempt, recorded before its action is called: its idempotency key
    # and its deadline (until when the call may still take effect)
    STEP_STARTED = "step_started"
    # the attempt's action returned: its result is recorded
    STEP_SUCCEEDED = "step_succeeded"
    # the attempt failed with an error the catalogue calls transient: the next is due then
    STEP_RETRY_SCHEDULED = "step_retry_scheduled"
    # the step failed for good: an error that is not transient, or no attempt left
    STEP_FAILED = "step_failed"
    # the attempt's outcome is unknown (a timeout, a lost answer): it may have taken effect
    STEP_UNKNOWN = "step_unknown"
    # the step needs a person's approval before it runs: the saga waits for it
    APPROVAL_REQUESTED = "approval_requested"
    # a person approved: the step may run
    APPROVAL_GRANTED = "approval_granted"
    # a person rejected: the saga compensates what it did
    APPROVAL_REJECTED = "approval_rejected"
    # no one decided before the approval expired: the saga compensates what it did
    APPROVAL_EXPIRED = "approval_expired"
    # the saga turns back (its reason says why: a step failed before the point of no
    # return, an approval refused or expired, the facts changed, an abort): the steps that
    # took effect are undone, the newest first
    COMPENSATION_STARTED = "compensation_started"
    # the intent of an undo attempt, recorded before the undo is called
    UNDO_STARTED = "undo_started"
    # the undo returned: the step's effect is reversed
    UNDO_SUCCEEDED = "undo_succeeded"
    UNDO_PARTIAL = "undo_partial"  # settled, reversing only part of the effect (its note)
    UNDO_LAPSED = "undo_lapsed"  # settled without a call: the hold had lapsed on its own
    # the undo attempt failed with a transient error: the next is due then
    UNDO_RETRY_SCHEDULED = "undo_retry_scheduled"
    # the undo cannot go on by itself (an error that is not transient, or no attempt left):
    # parked as a dead letter, for a person to retry or resolve
    UNDO_DEAD_LETTERED = "undo_dead_lettered"
    # a person settled a dead-lettered undo by hand (who, and why)
    DEAD_LETTER_RESOLVED = "dead_letter_resolved"
    # every step succeeded
    SAGA_COMPLETED = "saga_completed"
    # compensation is over: the undo of each step that took effect is settled
    SAGA_COMPENSATED = "saga_compensated"
    # compensation cannot end by itself: an undo is dead-lettered, waiting for a person
    SAGA_COMPENSATION_FAILED = "saga_compensation_failed"
    # the saga stopped for a person (its reason says why): a step failed past the point of
    # no return, the outcome of the point of no return is unknown, the plan could not be
    # re-checked against the facts, or the saga's passes keep failing (a poison saga)
    SAGA_NEEDS_HUMAN = "saga_needs_human"
    SAGA_RESUMED = "saga_resumed"  # a person fixed the cause; the saga goes on
    SAGA_RESOLVED = "saga_resolved"  # a person settled it outside; it ends here
    SAGA_FORKED = "saga_forked"  # its plan, edited, was submitted as a new saga (a note)
    # a person made the saga's parked undos due now, for a worker's sweep (a note)
    DEAD_LETTERS_DUE = "dead_letters_due"


@quick_init
@dataclass(frozen=True, slots=True)
class Event:
    """One state change. ``seq`` is its position in the saga's log (1-based)."""

    type: EventType
    at: float
    step: int | None = None
    attempt: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    seq: int = 0
    # the provenance record of the plan the saga runs (``Provenance.ref``), which the ledger
    # keeps with every event: set on every event read back from it
    provenance_ref: str | None = None


@quick_init
@dataclass(frozen=True, slots=True)
class StepRecord:
    index: int
    name: str
    kind: str
    group: int | None = None
    status: StepStatus = StepStatus.PENDING
    attempts: int = 0
    result: Any = None
    error: str | None = None
    next_attempt_at: float | None = None
    seq: int | None = None  # order in which outcomes were reached (compensation order)
    undo_status: UndoStatus = UndoStatus.NONE
    undo_attempts: int = 0
    undo_error: str | None = None
    undo_next_attempt_at: float | None = None
    # Until when an earlier attempt of the action (of the undo) may still take effect: set
    # by each intent to its deadline, cleared by an outcome that proves the call ended.
    # Not None: an attempt may have taken effect, so "not found" or a refusal is no proof
    # of "no effect" before this time has passed.
    doubt_until: float | None = None
    undo_doubt_until: float | None = None
    # the attempt that settled the step forward before its undo (one at most), if any
    settle_attempt: int | None = None
    # When the effect may first have been made (its first attempt's start) and by when it
    # was made, if at all (its latest forward event; ``doubt_until`` may add to it): what
    # tells whether a hold that lapses on its own still holds, or has lapsed.
    effect_from: float | None = None
    effect_by: float | None = None

    @property
    def made_by(self) -> float | None:
        """The latest moment the step's effect may have been made (None: never started)."""
        return _later(self.effect_by, self.doubt_until)


@quick_init
@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    step: int
    status: ApprovalStatus
    reason: str
    rationale: str
    requested_at: float
    expires_at: float
    decided_at: float | None = None
    approver: str | None = None
    note: str | None = None
    required: int = 1  # distinct approvers needed before it is approved
    approved_by: tuple[str, ...] = ()  # who has approved so far, in order


@quick_init
@dataclass(frozen=True, slots=True)
class SagaState:
    saga_id: str
    catalogue: str
    plan_digest: str
    provenance_ref: str
    status: SagaStatus
    steps: tuple[StepRecord, ...]
    created_at: float
    updated_at: float
    version: int = 0  # number of events applied
    reason: str | None = None
    approval: ApprovalRecord | None = None
    outcomes: int = 0  # counter behind StepRecord.seq
    compensating_since: float | None = None  # when compensation first started
    traceparent: str | None = None  # W3C trace context of the submission (joins passes)

    @property
    def wake_at(self) -> float | None:
        """When the saga next needs a worker while it waits: a due retry, or the expiry of
        a pending approval. ``None`` when it is runnable now or waits for nothing."""
        if self.status is SagaStatus.AWAITING_APPROVAL:
            a = self.approval
            return a.expires_at if a is not None and a.status is ApprovalStatus.PENDING else None
        if self.status is SagaStatus.COMPENSATING:
            # undone one after another, newest first: the next undo's wait holds back the
            # rest (a step's forward retry is never made: its lookup settles it first)
            todo = self.to_undo
            if not todo or todo[0].undo_status is not UndoStatus.RETRY_WAIT:
                return None
            return todo[0].undo_next_attempt_at
        due = [
            t
            for r in self.steps
            if r.status is StepStatus.RETRY_WAIT or r.undo_status is UndoStatus.RETRY_WAIT
            for t in (
                r.next_attempt_at if r.status is StepStatus.RETRY_WAIT else None,
                r.undo_next_attempt_at if r.undo_status is UndoStatus.RETRY_WAIT else None,
            )
            if t is not None
        ]
        return min(due) if due else None

    @property
    def to_undo(self) -> list[StepRecord]:
        """The compensable steps that may have taken effect and whose undo is not settled,
        in the order compensation undoes them: newest outcome first (a step without one,
        in flight or waiting, before any that has)."""
        todo = [
            r
            for r in self.steps
            if r.kind == _COMPENSABLE
            and r.status in _MAY_HAVE_EFFECT
            and r.undo_status not in UNDO_SETTLED
        ]
        todo.sort(key=lambda r: (math.inf if r.seq is None else r.seq, r.index), reverse=True)
        return todo

    @property
    def dead_letters(self) -> tuple[StepRecord, ...]:
        return tuple(r for r in self.steps if r.undo_status is UndoStatus.DEAD_LETTERED)

    @property
    def partial_undos(self) -> tuple[StepRecord, ...]:
        """The steps whose undo could restore only part of what was there."""
        return tuple(r for r in self.steps if r.undo_status is UndoStatus.PARTIAL)


def _later(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


_FORWARD_EVENTS = frozenset(
    {
        EventType.STEP_STARTED,
        EventType.STEP_SUCCEEDED,
        EventType.STEP_RETRY_SCHEDULED,
        EventType.STEP_FAILED,
        EventType.STEP_UNKNOWN,
    }
)


def _step_changes(event: Event, rec: StepRecord | None) -> dict[str, Any] | None:
    """How a step-level event changes its step's record (None: not a step-level event)."""
    if event.type not in _FORWARD_EVENTS:
        return _undo_changes(event, event.data, rec.undo_doubt_until if rec else None)
    doubt = rec.doubt_until if rec else None
    changes = _forward_changes(event, event.data, doubt)
    # when the effect may first, and by when it was last, made: an event at ``at`` sees
    # every call so far ended or in doubt, and none in doubt lands after ``doubt``; so an
    # event written long after (a recovery) does not make the effect younger than it is
    first = rec.effect_from if rec is not None else None
    changes["effect_from"] = event.at if first is None else first
    seen = event.at if doubt is None else min(event.at, doubt)
    changes["effect_by"] = _later(rec.effect_by if rec is not None else None, seen)
    if event.type is EventType.STEP_FAILED and rec is not None and rec.undo_attempts == 0:
        # compensation waited to look it up, and found no effect: no undo is owed
        changes.update(undo_status=UndoStatus.NONE, undo_next_attempt_at=None, undo_error=None)
    return changes


def _forward_changes(event: Event, d: Mapping[str, Any], doubt: float | None) -> dict[str, Any]:
    match event.type:
        case EventType.STEP_STARTED:
            started = {
                "status": StepStatus.STARTED,
                "attempts": event.attempt,
                "next_attempt_at": None,
                "doubt_until": _later(doubt, d.get("deadline")),
            }
            if d.get("settle"):
                started["settle_attempt"] = event.attempt
            return started
        case EventType.STEP_SUCCEEDED:
            return {
                "status": StepStatus.SUCCEEDED,
                "result": d.get("result"),
                "error": None,
                "next_attempt_at": None,
                "doubt_until": None,
            }
        case EventType.STEP_RETRY_SCHEDULED:
            return {
                "status": StepStatus.RETRY_WAIT,
                "error": d["error"],
                "next_attempt_at": d["next_attempt_at"],
                "doubt_until": d.get("doubt_until", doubt),
            }
        case EventType.STEP_FAILED:
            return {
                "status": StepStatus.FAILED,
                "error": d["error"],
                "next_attempt_at": None,
                "doubt_until": None,
            }
    return {  # step_unknown
        "status": StepStatus.UNKNOWN,
        "error": d["error"],
        "next_attempt_at": None,
        "doubt_until": d.get("doubt_until", doubt),
    }


def _undo_changes(
    event: Event, d: Mapping[str, Any], undo_doubt: float | None
) -> dict[str, Any] | None:
    match event.type:
        case EventType.UNDO_STARTED:
            return {
                "undo_status": UndoStatus.STARTED,
                "undo_attempts": event.attempt,
                "undo_next_attempt_at": None,
                "undo_doubt_until": _later(undo_doubt, d.get("deadline")),
            }
        case EventType.UNDO_SUCCEEDED:
            return {"undo_status": UndoStatus.DONE, "undo_error": None, "undo_doubt_until": None}
        case EventType.UNDO_PARTIAL:
            return {
                "undo_status": UndoStatus.PARTIAL,
                "undo_error": None,
                "undo_doubt_until": None,
            }
        case EventType.UNDO_LAPSED:
            return {
                "undo_status": UndoStatus.LAPSED,
                "undo_error": None,
                "undo_next_attempt_at": None,
            }
        case EventType.UNDO_RETRY_SCHEDULED:
            return {
                "undo_status": UndoStatus.RETRY_WAIT,
                "undo_error": d["error"],
                "undo_next_attempt_at": d["next_attempt_at"],
                "undo_doubt_until": d.get("doubt_until", undo_doubt),
            }
        case EventType.UNDO_DEAD_LETTERED:
            return {
                "undo_status": UndoStatus.DEAD_LETTERED,
                "undo_error": d["error"],
                "undo_next_attempt_at": d.get("next_retry_at"),
                "undo_doubt_until": d.get("doubt_until", undo_doubt),
            }
        case EventType.DEAD_LETTER_RESOLVED:
            return {
                "undo_status": UndoStatus.RESOLVED,
                "undo_next_attempt_at": None,
                "undo_doubt_until": None,
            }
    return None


# Events that give a step its outcome; outcomes are numbered in the order they happen.
_OUTCOMES = frozenset({EventType.STEP_SUCCEEDED, EventType.STEP_UNKNOWN})


def _submitted(event: Event) -> SagaState:
    d = event.data
    return SagaState(
        saga_id=d["saga_id"],
        catalogue=d["catalogue"],
        plan_digest=d["plan_digest"],
        provenance_ref=d["provenance_ref"],
        status=SagaStatus.SUBMITTED,
        steps=tuple(
            StepRecord(index=n, name=s["name"], kind=s["kind"], group=s.get("group"))
            for n, s in enumerate(d["steps"])
        ),
        created_at=event.at,
        updated_at=event.at,
        version=1,
        traceparent=d.get("traceparent"),
    )


def _copier(cls: type[Any]) -> Callable[[Any, dict[str, Any]], Any]:
    """``dataclasses.replace`` for one frozen, slotted class, made once:
    ``copy(obj, changes)``.

    ``replace`` looks up every field of the class on each call, and a frozen class's
    ``__init__`` sets each field through ``object.__setattr__``; folding events copies a
    state and a step record per event, so this is the engine's most frequent allocation.
    The copy is made as the class's ``records.settable`` twin, each field set by a plain
    store, then becomes an instance of the class itself (``__class__`` assignment: the
    layouts are the same). What is returned is an ordinary, frozen instance of ``cls``.
    A copy is made once per shape of changes (which fields ``changes`` names, in its
    order), so that it reads each field from where it comes without asking.
    The classes have no ``__post_init__``: nothing is skipped.
    """
    if "__post_init__" in vars(cls) or "__slots__" not in vars(cls):
        raise TypeError(f"{cls.__name__} must be slotted, without __post_init__")
    names = [f.name for f in fields(cls)]
    known = frozenset(names)
    twin = settable(cls)
    namespace: dict[str, Any] = {"cls": cls, "twin": twin, "new_object": object.__new__}

    def made(keys: tuple[str, ...]) -> Callable[[Any, dict[str, Any]], Any]:
        """The copy for changes of exactly ``keys``: each field from ``c`` or ``o``."""
        sets = "".join(
            f"    new.{n} = c[{n!r}]\n" if n in keys else f"    new.{n} = o.{n}\n" for n in names
        )
        source = (
            "def copy(o, c):\n"
            "    new = new_object(twin)\n"
            f"{sets}"
            "    new.__class__ = cls\n"
            "    return new\n"
        )
        exec(source, namespace)  # the source is built from the class's own fields
        shaped: Callable[[Any, dict[str, Any]], Any] = namespace["copy"]
        return shaped

    # one copy per shape of changes (the fold's few kinds of event make a few shapes);
    # at most _SHAPES of them, then any further shape is made each time
    by_shape: dict[tuple[str, ...], Callable[[Any, dict[str, Any]], Any]] = {}

    def copy(o: Any, c: dict[str, Any]) -> Any:
        keys = tuple(c)
        shaped = by_shape.get(keys)
        if shaped is None:
            if not known.issuperset(keys):
                raise TypeError(f"{cls.__name__} has no field {sorted(set(keys) - known)}")
            shaped = made(keys)
            if len(by_shape) < _SHAPES:
                by_shape[keys] = shaped
        return shaped(o, c)

    return copy


_SHAPES = 64


_copy_state = _copier(SagaState)
_copy_step = _copier(StepRecord)
_copy_event = _copier(Event)


def numbered(event: Event, seq: int) -> Event:
    """``event`` as the ``seq``-th of its saga's log."""
    numbered_event: Event = _copy_event(event, {"seq": seq})
    return numbered_event


def apply(state: SagaState | None, event: Event) -> SagaState:
    """Fold one event into the state. Pure: the engine and ``replay`` share it.

    Each event makes one copy of the state (and of the step it touches): a saga's pass
    folds a few events per step, so the copies are most of its cost in Python.
    """
    t = event.type
    if t is EventType.SAGA_SUBMITTED:
        return _submitted(event)
    if state is None:
        raise ValueError(f"{t.value} before saga_submitted")
    changed = _changes(state, event)
    changed["version"], changed["updated_at"] = state.version + 1, event.at
    result: SagaState = _copy_state(state, changed)
    return result


def _changes(s: SagaState, event: Event) -> dict[str, Any]:
    """The fields of ``s`` that ``event`` changes, besides its version and update time."""
    t, d = event.type, event.data
    rec = s.steps[event.step] if event.step is not None and event.step < len(s.steps) else None
    changes = _step_changes(event, rec)
    if changes is not None:
        if event.step is None:
            raise ValueError(f"{t.value} without a step index")
        out: dict[str, Any] = {}
        if t in _OUTCOMES:
            out["outcomes"] = changes["seq"] = s.outcomes + 1
        steps = list(s.steps)
        steps[event.step] = _copy_step(steps[event.step], changes)
        out["steps"] = tuple(steps)
        if s.status is SagaStatus.SUBMITTED:
            out["status"] = SagaStatus.RUNNING
        return out
    if t is EventType.APPROVAL_REQUESTED:
        assert event.step is not None
        approval = ApprovalRecord(
            step=event.step,
            status=ApprovalStatus.PENDING,
            reason=d["reason"],
            rationale=d.get("rationale", ""),
            requested_at=event.at,
            expires_at=d["expires_at"],
            required=d.get("required", 1),
        )
        return {"status": SagaStatus.AWAITING_APPROVAL, "approval": approval}
    if t is EventType.APPROVAL_GRANTED:
        assert s.approval is not None
        approver = d.get("approver")
        by = s.approval.approved_by
        if approver is not None and approver not in by:
            by = (*by, approver)
        if len(by) < s.approval.required:  # one more distinct approver is needed
            approval = replace(s.approval, approved_by=by, approver=approver, note=d.get("note"))
            return {"approval": approval}
        approval = replace(
            s.approval,
            status=ApprovalStatus.APPROVED,
            decided_at=event.at,
            approver=approver,
            note=d.get("note"),
            approved_by=by,
        )
        return {"approval": approval, "status": SagaStatus.RUNNING}
    if t in _DECISIONS:
        assert s.approval is not None
        approval = replace(
            s.approval,
            status=_DECISIONS[t],
            decided_at=event.at,
            approver=d.get("approver"),
            note=d.get("note"),
        )
        return {"approval": approval}  # rejected or expired: compensation follows
    if t is EventType.SAGA_RESUMED:
        # Steps named in the event may have taken effect: they are tried again with their
        # own keys and a fresh retry budget, due now. Those in doubt stay in doubt: a fresh
        # budget is no proof that the earlier attempts took no effect.
        # A call that may still be running is not called again before its window ends.
        steps = list(s.steps)
        doubted = set(d.get("doubted", ()))
        running = set(d.get("running", ()))
        for i in d.get("steps", ()):
            doubt = steps[i].doubt_until
            if i in doubted and doubt is None:
                doubt = event.at
            due = event.at
            if i in running and doubt is not None:
                due = max(due, doubt)
            steps[i] = replace(
                steps[i],
                status=StepStatus.RETRY_WAIT,
                attempts=0,
                next_attempt_at=due,
                doubt_until=doubt,
            )
        # Resumed from a step: the steps before it that had not succeeded were settled by
        # the person who resumed it, outside (``engine.resuming``): they count as done.
        outcomes = s.outcomes
        for i in d.get("settled", ()):
            outcomes += 1
            steps[i] = replace(
                steps[i],
                status=StepStatus.SUCCEEDED,
                result={"settled_by": d.get("by"), "why": d.get("why")},
                error=None,
                next_attempt_at=None,
                doubt_until=None,
                seq=outcomes,
            )
        resumed = SagaStatus(d["status"])
        return {
            "steps": tuple(steps),
            "status": resumed,
            "reason": d.get("saga_reason"),
            "outcomes": outcomes,
        }
    if t is EventType.COMPENSATION_STARTED:
        since = event.at if s.compensating_since is None else s.compensating_since
        return {
            "status": SagaStatus.COMPENSATING,
            "reason": d.get("reason"),
            "compensating_since": since,
        }
    if t in _ENDINGS:
        return {"status": _ENDINGS[t], "reason": d.get("reason", s.reason)}
    if t in (EventType.SAGA_FORKED, EventType.DEAD_LETTERS_DUE):
        return {}  # a note: nothing of the saga changes
    raise ValueError(f"unknown event type {t!r}")


_DECISIONS = {  # APPROVAL_GRANTED is folded on its own: it may need another approver
    EventType.APPROVAL_REJECTED: ApprovalStatus.REJECTED,
    EventType.APPROVAL_EXPIRED: ApprovalStatus.EXPIRED,
}

_ENDINGS = {
    EventType.SAGA_COMPLETED: SagaStatus.COMPLETED,
    EventType.SAGA_COMPENSATED: SagaStatus.COMPENSATED,
    EventType.SAGA_COMPENSATION_FAILED: SagaStatus.COMPENSATION_FAILED,
    EventType.SAGA_NEEDS_HUMAN: SagaStatus.NEEDS_HUMAN,
    EventType.SAGA_RESOLVED: SagaStatus.RESOLVED,
}


def replay(events: Iterable[Event]) -> SagaState:
    """Rebuild a saga's state from its event log."""
    state: SagaState | None = None
    for event in events:
        state = apply(state, event)
    if state is None:
        raise ValueError("no events to replay")
    return state
