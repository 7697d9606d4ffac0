"""Why a saga stands where it does, as an agent is told it: a ``Reason`` code and a short
message in Pivotal's own words (``told``), naming at most a step; and the rollout's answers.

Part of the one agent view (``pivotal.views.agent_view``), kept apart because the outbox and the
orchestrator, which the rest of that view's imports lead back to, tell agents the same: it
reads a saga's state and nothing else. Never a step's error text, an approval record, a
threshold or limit, nor a person's name or words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pivotal.kinds import StepKind
from pivotal.redaction import redact
from pivotal.sagas.state import ApprovalStatus, SagaState, SagaStatus, StepStatus

WAITING = "waiting for a person's decision before the point of no return"


class Reason(StrEnum):
    """Why a saga stands where it does, as an agent is told it."""

    APPROVAL_PENDING = "approval_pending"
    APPROVAL_REJECTED = "approval_rejected"
    APPROVAL_EXPIRED = "approval_expired"
    STEP_FAILED = "step_failed"
    STEP_OUTCOME_UNKNOWN = "step_outcome_unknown"
    STEP_FAILED_AFTER_POINT_OF_NO_RETURN = "step_failed_after_point_of_no_return"
    STOPPED_BY_A_PERSON = "stopped_by_a_person"
    STOPPED_BY_THE_AGENT = "stopped_by_the_agent"
    FACTS_CHANGED = "facts_changed"
    FACTS_UNREADABLE = "facts_unreadable"
    TOO_LATE = "too_late"
    NEEDS_HUMAN = "needs_human"
    RESOLVED_BY_A_PERSON = "resolved_by_a_person"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Told:
    """A reason as an agent is told it: its code and a short message."""

    code: Reason
    message: str


# How the engine begins the reasons it writes that no step record or approval tells apart.
_ABORTED = "aborted by "
_CAUSES: tuple[tuple[str, Reason, str], ...] = (
    (
        "the trusted facts changed",
        Reason.FACTS_CHANGED,
        "the facts the plan was validated against changed before its point of no return; "
        "it no longer holds",
    ),
    (
        "could not be re-checked",
        Reason.FACTS_UNREADABLE,
        "the facts the plan depends on could not be read before its point of no return; an "
        "operator takes it from here",
    ),
    (
        " was not begun: ",
        Reason.TOO_LATE,
        "its point of no return could not begin in time; nothing of it was called",
    ),
)
_SETTLED = "an operator settled it outside Pivotal"
_STOPPED = "a person stopped it before its point of no return"


def told(state: SagaState, *, own: Callable[[str], bool] | None = None) -> Told | None:
    """Why ``state`` stands where it does, as its proposer may be told it (None: nothing to
    tell: it is new, running or completed). ``own(by)``: whether a stop by ``by`` was the
    agent's own (an ADK model stage's verdict), whose words it may read back."""
    status = state.status
    if status is SagaStatus.AWAITING_APPROVAL:
        return Told(Reason.APPROVAL_PENDING, WAITING)
    if status is SagaStatus.RESOLVED:
        return Told(Reason.RESOLVED_BY_A_PERSON, _SETTLED)
    reason = state.reason
    if reason is None:
        return None
    approval = state.approval
    if approval is not None and approval.status in (
        ApprovalStatus.REJECTED,
        ApprovalStatus.EXPIRED,
    ):
        step = state.steps[approval.step].name
        if approval.status is ApprovalStatus.REJECTED:
            return Told(Reason.APPROVAL_REJECTED, f"a person rejected {step}; it did not run")
        return Told(Reason.APPROVAL_EXPIRED, f"nobody decided on {step} in time; it did not run")
    bad = next((r for r in state.steps if r.status in _ENDED_BADLY), None)
    pnr = _point_of_no_return(state)
    if bad is not None and status is SagaStatus.NEEDS_HUMAN and (pnr is None or bad.index < pnr):
        bad = None  # parked for another cause (it made no progress, say)
    if bad is not None:
        where = f"{bad.name} (step {bad.index})"
        if status is SagaStatus.NEEDS_HUMAN:
            if bad.index == pnr:
                return Told(
                    Reason.STEP_OUTCOME_UNKNOWN,
                    f"{where}, the point of no return, failed with an unknown outcome; an "
                    "operator takes it from here",
                )
            return Told(
                Reason.STEP_FAILED_AFTER_POINT_OF_NO_RETURN,
                f"{where} failed after the point of no return; an operator takes it from here",
            )
        if bad.status is StepStatus.UNKNOWN:
            return Told(Reason.STEP_OUTCOME_UNKNOWN, f"{where} failed with an unknown outcome")
        return Told(Reason.STEP_FAILED, f"{where} failed")
    if reason.startswith(_ABORTED):
        by, _, _ = reason[len(_ABORTED) :].partition(": ")
        if own is not None and own(by):
            return Told(Reason.STOPPED_BY_THE_AGENT, redact(reason))
        return Told(Reason.STOPPED_BY_A_PERSON, _STOPPED)
    for mark, code, message in _CAUSES:
        if mark in reason:
            return Told(code, message)
    if status is SagaStatus.NEEDS_HUMAN:
        return Told(Reason.NEEDS_HUMAN, "it waits for an operator")
    return Told(Reason.STOPPED, "it did not complete")


_ENDED_BADLY = (StepStatus.FAILED, StepStatus.UNKNOWN)


def _point_of_no_return(state: SagaState) -> int | None:
    """The pivot's index, else the first retriable step's: as ``engine.point_of_no_return``
    decides it (the engine is not imported here: it imports the outbox, which imports this)."""
    for kind in (StepKind.PIVOT.value, StepKind.RETRIABLE.value):
        found = next((r.index for r in state.steps if r.kind == kind), None)
        if found is not None:
            return found
    return None


# -- announcements (the outbox) -------------------------------------------------------------


def announced(state: SagaState) -> dict[str, Any]:
    """What the engine's announcement of ``state`` says about why: ``reason`` (the short
    message) and ``reason_code``."""
    why = told(state)
    return {
        "reason": None if why is None else why.message,
        "reason_code": None if why is None else why.code.value,
    }


# -- the rollout ------------------------------------------------------------------------------


def kept_in_shadow(run_id: str) -> str:
    """What the rollout tells an agent whose plan it kept in shadow (not its limit, nor what
    the plan exposes: a size to split a plan under)."""
    return (
        f"kept in shadow, not run: the plan validated and was recorded as shadow run {run_id}; "
        "a person decides whether to carry it out"
    )


def refused_by_rollout(catalogue: str) -> str:
    """What the rollout tells an agent whose plan it refused."""
    return (
        f"refused: catalogue {catalogue!r} does not run this plan for an agent. No saga was "
        "recorded"
    )
