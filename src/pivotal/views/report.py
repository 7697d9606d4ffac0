"""The review report: what went wrong over a period, grouped by cause, and who proposed it.

It reads the ledger only through the ``Store`` protocol: the sagas that ended
``compensated``, ``compensation_failed`` or ``needs_human`` in the period (by the time they
reached that status, their ``updated_at``), each with a stable cause derived from its event
log and the provenance of its plan; and the planner's rejections of the period (the
validator's error codes of rejected attempts, and the escalations opened). When a store limit
cut a list short the report says so (``truncated``), never silently.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from pivotal import moments
from pivotal.admission import ROLLOUT_BATCH
from pivotal.declarations.plan import Provenance
from pivotal.declarations.plan_errors import ErrorCode
from pivotal.engine import point_of_no_return
from pivotal.errors import InvalidInput
from pivotal.sagas.state import Event, EventType, SagaState, SagaStatus
from pivotal.store.base import SagaSummary, Store
from pivotal.store.planning_records import Escalation, PlanningMode, PlanningRun

REVIEWED = (SagaStatus.COMPENSATED, SagaStatus.COMPENSATION_FAILED, SagaStatus.NEEDS_HUMAN)
DEFAULT_LIMIT = 10_000  # rows read per list (sagas of each status, runs of each mode, ...)
_FAILED_STEP = re.compile(r"\(step (\d+)\) (?:failed|unknown):")
_VALIDATOR_CODES = frozenset(c.value for c in ErrorCode)


class InvalidPeriod(InvalidInput):
    """The period is not understood: give 7d, 24h, 30m or an ISO date."""

    code = "invalid_period"


def parse_moment(text: str, now: float) -> float:
    """A point in time (see ``pivotal.moments``); ``InvalidPeriod`` when it is none."""
    try:
        return moments.parse_moment(text, now)
    except moments.BadMoment as exc:
        raise InvalidPeriod(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Period:
    """``since <= t <= until``, in seconds since the epoch."""

    since: float
    until: float

    @classmethod
    def parse(cls, since: str, until: str | None, now: float) -> Period:
        """The period from ``since`` to ``until`` (None: ``now``), each as ``parse_moment``
        reads it; ``InvalidPeriod`` when it is not understood or does not start first."""
        start = parse_moment(since, now)
        end = now if until is None else parse_moment(until, now)
        if start >= end:
            raise InvalidPeriod(f"the period starts ({since!r}) at or after it ends")
        return cls(start, end)

    def holds(self, at: float) -> bool:
        return self.since <= at <= self.until


# -- the report's shape --------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CauseKind(StrEnum):
    STEP_FAILED = "step_failed"  # before the point of no return: compensated
    FAILED_AFTER_POINT_OF_NO_RETURN = "failed_after_point_of_no_return"
    POINT_OF_NO_RETURN_UNKNOWN = "point_of_no_return_unknown"
    APPROVAL_REJECTED = "approval_rejected"
    APPROVAL_EXPIRED = "approval_expired"
    POISON = "poison"
    UNDO_DEAD_LETTERED = "undo_dead_lettered"
    OTHER = "other"


class Cause(_Model):
    """Why a saga ended as it did, stable across sagas: sagas are grouped by ``label``."""

    kind: CauseKind
    step: str | None = Field(default=None, description="The step concerned (names, for undos).")
    outcome: str | None = Field(
        default=None,
        description="The step's outcome: permanent, abort, precondition, arguments, "
        "exhausted or unknown.",
    )
    label: str = Field(description="The grouping key, e.g. `charge_payment: permanent`.")


def cause(kind: CauseKind, step: str | None = None, outcome: str | None = None) -> Cause:
    """A cause with its label."""
    what = {
        CauseKind.STEP_FAILED: f"{outcome}",
        CauseKind.FAILED_AFTER_POINT_OF_NO_RETURN: f"{outcome} after the point of no return",
        CauseKind.POINT_OF_NO_RETURN_UNKNOWN: "outcome unknown at the point of no return",
        CauseKind.APPROVAL_REJECTED: "approval rejected",
        CauseKind.APPROVAL_EXPIRED: "approval expired",
        CauseKind.POISON: "poison",
        CauseKind.UNDO_DEAD_LETTERED: "undo dead-lettered",
        CauseKind.OTHER: "other",
    }[kind]
    if kind is CauseKind.UNDO_DEAD_LETTERED and step:
        label = f"{what}: {step}"
    else:
        label = f"{step}: {what}" if step else what
    return Cause(kind=kind, step=step, outcome=outcome, label=label)


class PartialUndo(_Model):
    """An undo that could restore only part of what was there (compensation is semantic):
    settled, with its note on what was and was not reversed."""

    step: str
    index: int
    note: str | None


class SagaEntry(_Model):
    """One saga of the period that did not complete, with why and who proposed it."""

    saga_id: str
    catalogue: str
    status: SagaStatus
    reason: str | None
    cause: Cause
    trigger: Cause | None = Field(
        default=None, description="What started the compensation of a compensation_failed saga."
    )
    created_at: float
    updated_at: float
    provenance_ref: str
    provenance: Provenance | None = Field(description="Who proposed the plan (None: not kept).")
    partial_undos: list[PartialUndo] = Field(
        default_factory=list, description="Its undos that restored only part of the effect."
    )


class CauseGroup(_Model):
    cause: Cause
    count: int
    statuses: dict[str, int] = Field(description="How many of the group ended in each status.")
    sagas: list[SagaEntry] = Field(description="Newest first.")


class CodeCount(_Model):
    """One error code of the planner's rejected attempts."""

    code: str
    errors: int = Field(description="How often it was reported.")
    attempts: int = Field(description="Rejected attempts that reported it.")
    validator: bool = Field(description="A validator code (else a planner failure).")


class EscalationEntry(_Model):
    id: int
    status: str
    reason: str
    created_at: float
    run_id: str
    request_id: str
    catalogue: str
    planner: str
    codes: list[str] = Field(description="Error codes of the run's last attempt.")


class PlannerReport(_Model):
    runs: int = Field(description="Live and shadow planning runs of the period.")
    outcomes: dict[str, dict[str, int]] = Field(description="Runs by mode, then outcome.")
    rejected_attempts: int
    codes: list[CodeCount] = Field(description="Most frequent first.")
    escalations: list[EscalationEntry] = Field(description="Opened in the period, newest first.")


class RolloutEntry(_Model):
    """One catalogue's rollout over the period: what it let agent plans do."""

    catalogue: str
    setting: str = Field(description="The rollout, e.g. `agent plans execute below 50; ...`.")
    executed: int = Field(description="Agent sagas submitted below the limit.")
    shadowed: int = Field(description="Agent plans above it kept in shadow, never run.")
    refused: int = Field(description="Agent plans above it refused.")


class Report(_Model):
    """Sagas of the period that ended compensated, compensation_failed or needs_human,
    grouped by cause, and the planner's rejections of the period."""

    since: float
    until: float
    generated_at: float
    sagas: int
    by_status: dict[str, int]
    causes: list[CauseGroup] = Field(description="Largest group first.")
    partial_undos: int = Field(
        default=0, description="Undos of these sagas that restored only part of the effect."
    )
    planner: PlannerReport
    rollout: list[RolloutEntry] = Field(
        default_factory=list, description="Catalogues whose rollout limited agent plans."
    )
    truncated: bool = Field(description="A list hit the limit: the report may be partial.")
    truncated_lists: list[str] = Field(description="Which lists hit the limit.")
    limit: int


# -- causes --------------------------------------------------------------------------------


def _failure_outcome(event: Event) -> str:
    if event.type is EventType.STEP_UNKNOWN:
        return "unknown"
    return str(event.data.get("outcome") or "failed")


def _last_failure(events: Sequence[Event], before: int, step: int | None = None) -> Event | None:
    kinds = (EventType.STEP_FAILED, EventType.STEP_UNKNOWN)
    for e in reversed(events[:before]):
        if e.type in kinds and (step is None or e.step == step):
            return e
    return None


def _last(events: Sequence[Event], kind: EventType) -> int | None:
    return next((n for n in range(len(events) - 1, -1, -1) if events[n].type is kind), None)


def compensation_cause(state: SagaState, events: Sequence[Event]) -> Cause:
    """Why compensation started: a decision on the approval, or a failing step."""
    start = next(
        (n for n, e in enumerate(events) if e.type is EventType.COMPENSATION_STARTED), None
    )
    if start is None:
        return cause(CauseKind.OTHER)
    previous = events[start - 1] if start > 0 else None
    if previous is not None and previous.step is not None:
        name = state.steps[previous.step].name
        if previous.type is EventType.APPROVAL_REJECTED:
            return cause(CauseKind.APPROVAL_REJECTED, name)
        if previous.type is EventType.APPROVAL_EXPIRED:
            return cause(CauseKind.APPROVAL_EXPIRED, name)
    named = _FAILED_STEP.search(str(events[start].data.get("reason") or ""))
    failure = _last_failure(events, start, int(named[1]) if named else None)
    if failure is None or failure.step is None or failure.step >= len(state.steps):
        return cause(CauseKind.OTHER)
    name = state.steps[failure.step].name
    return cause(CauseKind.STEP_FAILED, name, _failure_outcome(failure))


def parked_cause(state: SagaState, events: Sequence[Event]) -> Cause:
    """Why a saga waits for a person: poison, or a step past the point of no return."""
    parked = _last(events, EventType.SAGA_NEEDS_HUMAN)
    if parked is None:
        return cause(CauseKind.OTHER)
    if events[parked].data.get("poison") is True:
        return cause(CauseKind.POISON)
    failure = _last_failure(events, parked)
    if failure is None or failure.step is None or failure.step >= len(state.steps):
        return cause(CauseKind.OTHER)
    name, outcome = state.steps[failure.step].name, _failure_outcome(failure)
    if failure.step == point_of_no_return(state):
        return cause(CauseKind.POINT_OF_NO_RETURN_UNKNOWN, name, outcome)
    return cause(CauseKind.FAILED_AFTER_POINT_OF_NO_RETURN, name, outcome)


def partial_undos_of(state: SagaState, events: Sequence[Event]) -> list[PartialUndo]:
    """The saga's undos that were partial, in the order they were recorded."""
    return [
        PartialUndo(step=state.steps[e.step].name, index=e.step, note=e.data.get("note"))
        for e in events
        if e.type is EventType.UNDO_PARTIAL and e.step is not None and e.step < len(state.steps)
    ]


def causes_of(state: SagaState, events: Sequence[Event]) -> tuple[Cause, Cause | None]:
    """(the cause a saga is grouped by, what started its compensation when that differs)."""
    if state.status is SagaStatus.NEEDS_HUMAN:
        return parked_cause(state, events), None
    started = compensation_cause(state, events)
    if state.status is SagaStatus.COMPENSATION_FAILED:
        names = ", ".join(r.name for r in state.dead_letters) or None
        return cause(CauseKind.UNDO_DEAD_LETTERED, names), started
    return started, None


# -- building it ---------------------------------------------------------------------------


async def _entry(
    store: Store, summary: SagaSummary, provenances: dict[str, Provenance | None]
) -> SagaEntry | None:
    stored = await store.load(summary.saga_id)
    if stored is None or stored.state.status not in REVIEWED:
        return None  # gone, or moved on since it was listed
    state = stored.state
    events = await store.events(state.saga_id)
    main, trigger = causes_of(state, events)
    ref = state.provenance_ref
    if ref not in provenances:
        provenances[ref] = await store.provenance(ref) or stored.plan.provenance
    return SagaEntry(
        saga_id=state.saga_id,
        catalogue=state.catalogue,
        status=state.status,
        reason=state.reason,
        cause=main,
        trigger=trigger,
        created_at=state.created_at,
        updated_at=state.updated_at,
        provenance_ref=ref,
        provenance=provenances[ref],
        partial_undos=partial_undos_of(state, events),
    )


def _groups(entries: list[SagaEntry]) -> list[CauseGroup]:
    grouped: dict[str, list[SagaEntry]] = defaultdict(list)
    for e in entries:
        grouped[e.cause.label].append(e)
    groups = [
        CauseGroup(
            cause=members[0].cause,
            count=len(members),
            statuses=dict(Counter(m.status.value for m in members)),
            sagas=sorted(members, key=lambda m: (-m.updated_at, m.saga_id)),
        )
        for members in grouped.values()
    ]
    return sorted(groups, key=lambda g: (-g.count, g.cause.label))


def _escalation(e: Escalation) -> EscalationEntry:
    last = e.run.attempts[-1] if e.run.attempts else None
    return EscalationEntry(
        id=e.id,
        status=e.status.value,
        reason=e.reason,
        created_at=e.created_at,
        run_id=e.run.run_id,
        request_id=e.run.request.request_id,
        catalogue=e.run.catalogue,
        planner=e.run.planner.label(),
        codes=sorted({x.code for x in last.errors}) if last else [],
    )


def planner_report(runs: Sequence[PlanningRun], escalations: Sequence[Escalation]) -> PlannerReport:
    """The planner's rejections over these runs and escalations (already of the period)."""
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    errors: Counter[str] = Counter()
    attempts: Counter[str] = Counter()
    rejected = 0
    for run in runs:
        outcomes[run.mode.value][run.outcome.value] += 1
        for attempt in run.attempts:
            if attempt.accepted:
                continue
            rejected += 1
            errors.update(x.code for x in attempt.errors)
            attempts.update({x.code for x in attempt.errors})
    codes = [
        CodeCount(code=c, errors=n, attempts=attempts[c], validator=c in _VALIDATOR_CODES)
        for c, n in sorted(errors.items(), key=lambda item: (-item[1], item[0]))
    ]
    return PlannerReport(
        runs=len(runs),
        outcomes={mode: dict(counts) for mode, counts in sorted(outcomes.items())},
        rejected_attempts=rejected,
        codes=codes,
        escalations=[_escalation(e) for e in escalations],
    )


async def _planning(
    store: Store, period: Period, limit: int, cut: list[str]
) -> tuple[list[PlanningRun], list[Escalation]]:
    runs: list[PlanningRun] = []
    for mode in (PlanningMode.LIVE, PlanningMode.SHADOW):
        found = await store.runs(mode, limit=limit)  # oldest first
        if len(found) >= limit and found[-1].created_at <= period.until:
            cut.append(f"planning runs ({mode.value})")  # later runs were not read
        runs += [r for r in found if period.holds(r.created_at)]
    escalations = await store.escalations(None, limit)  # newest first
    if len(escalations) >= limit and escalations[-1].created_at >= period.since:
        cut.append("escalations")  # earlier ones of the period were not read
    return runs, [e for e in escalations if period.holds(e.created_at)]


async def rollout_report(
    store: Store, period: Period, runs: Sequence[PlanningRun], limit: int, cut: list[str]
) -> list[RolloutEntry]:
    """Per catalogue: agent sagas its rollout let through (their submission says so), and
    the plans it kept in shadow or refused (its shadow planning runs of the period)."""
    settings: dict[str, str] = {}
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for run in runs:
        if run.batch_id != ROLLOUT_BATCH or run.mode is not PlanningMode.SHADOW:
            continue
        settings[run.catalogue] = str(run.request.context.get("rollout") or "")
        counts[run.catalogue]["shadowed" if run.accepted else "refused"] += 1
    found = await store.list_sagas(None, limit)  # newest first
    if len(found) >= limit and found[-1].created_at >= period.since:
        cut.append("sagas (rollout)")
    for summary in found:
        if not period.holds(summary.created_at):
            continue
        events = await store.events(summary.saga_id)
        marked = events[0].data.get("rollout") if events else None
        if isinstance(marked, dict):
            settings.setdefault(summary.catalogue, str(marked.get("setting") or ""))
            counts[summary.catalogue]["executed"] += 1
    return [
        RolloutEntry(
            catalogue=name,
            setting=settings[name],
            executed=counts[name]["executed"],
            shadowed=counts[name]["shadowed"],
            refused=counts[name]["refused"],
        )
        for name in sorted(settings)
    ]


async def build_report(
    store: Store, period: Period, *, now: float, limit: int = DEFAULT_LIMIT
) -> Report:
    """The review report of ``period`` from ``store``; each list is read up to ``limit``."""
    if limit < 1:
        raise InvalidInput("the report's limit must be at least 1")
    cut: list[str] = []
    entries: list[SagaEntry] = []
    seen: set[str] = set()
    provenances: dict[str, Provenance | None] = {}
    for status in REVIEWED:
        found = await store.sagas_updated(status, period.since, period.until, limit)
        if len(found) >= limit:  # the most recently changed first: older ones were left out
            cut.append(f"sagas ({status.value})")
        for summary in found:
            if summary.saga_id in seen:
                continue
            entry = await _entry(store, summary, provenances)
            if entry is not None and period.holds(entry.updated_at):
                seen.add(entry.saga_id)
                entries.append(entry)
    runs, escalations = await _planning(store, period, limit, cut)
    rollout = await rollout_report(store, period, runs, limit, cut)
    by_status = Counter(e.status.value for e in entries)
    return Report(
        since=period.since,
        until=period.until,
        generated_at=now,
        sagas=len(entries),
        by_status={s.value: by_status[s.value] for s in REVIEWED},
        causes=_groups(entries),
        partial_undos=sum(len(e.partial_undos) for e in entries),
        planner=planner_report(runs, escalations),
        rollout=rollout,
        truncated=bool(cut),
        truncated_lists=cut,
        limit=limit,
    )
