"""What planning leaves in the ledger: runs with every attempt, and escalations."""

from __future__ import annotations

import uuid
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from pivotal.plan import Plan
from pivotal.planning.base import Attempt, PlannerInfo, PlanRequest


def new_run_id() -> str:
    return f"run_{uuid.uuid4().hex[:16]}"


class PlanningMode(StrEnum):
    LIVE = "live"  # accepted plans become sagas; the others are escalated
    SHADOW = "shadow"  # every attempt is recorded; nothing is submitted or escalated
    DRY_RUN = "dry_run"  # nothing is recorded


class PlanningOutcome(StrEnum):
    ACCEPTED = "accepted"  # a proposal passed the validator
    REJECTED = "rejected"  # no proposal passed (shadow and dry runs)
    ESCALATED = "escalated"  # no proposal passed; a person must act (live runs)


class PlanningRun(BaseModel):
    """One request planned: the attempts, and what came of them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    mode: PlanningMode
    request: PlanRequest
    catalogue: str
    planner: PlannerInfo
    attempts: tuple[Attempt, ...]
    outcome: PlanningOutcome
    plan: Plan | None = None  # the accepted plan, provenance filled in
    saga_id: str | None = None
    escalation_id: int | None = None
    batch_id: str | None = None
    created_at: float = 0.0

    @property
    def accepted(self) -> bool:
        return self.outcome is PlanningOutcome.ACCEPTED

    def summary(self) -> str:
        """One line on why no plan was accepted, from the last attempt's errors."""
        if self.accepted or not self.attempts:
            return self.outcome.value
        last = self.attempts[-1]
        reasons = "; ".join(f"[{e.code}] {e.where()}: {e.message}" for e in last.errors[:3])
        more = f" (+{len(last.errors) - 3} more)" if len(last.errors) > 3 else ""
        return f"no valid plan after {len(self.attempts)} attempt(s); last: {reasons}{more}"


class EscalationStatus(StrEnum):
    OPEN = "open"
    RESOLVED = "resolved"


class Escalation(BaseModel):
    """A request no planner could turn into a valid plan, waiting for a person."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    run: PlanningRun
    status: EscalationStatus
    reason: str
    created_at: float
    resolved_at: float | None = None
    resolved_by: str | None = None
    resolution: str | None = None
    saga_id: str | None = None  # the saga a person started to settle it, if any
