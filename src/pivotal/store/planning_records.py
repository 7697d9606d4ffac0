"""What planning leaves in the ledger: requests, attempts, runs and escalations.

These are the ledger's own vocabulary, so they sit at the store's layer: the store keeps
and reads them without importing ``pivotal.planning``, and the planning package (planners,
the re-plan loop, shadow mode) builds on them. ``pivotal.planning`` re-exports every name
here from the modules that defined them before (``planning.base``, ``planning.records``,
``planning.errors``).
"""

from __future__ import annotations

import re
import uuid
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pivotal.declarations.plan import ActorType, Plan
from pivotal.declarations.plan_errors import PlanError
from pivotal.errors import PivotalError

Scalar = str | int | float | bool | None

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_CONTEXT_FIELDS = 32
MAX_CONTEXT_VALUE = 1000


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex[:16]}"


def new_run_id() -> str:
    return f"run_{uuid.uuid4().hex[:16]}"


# -- what was asked, and who answered ------------------------------------------------------


class PlanRequest(BaseModel):
    """What someone asked for: free text, plus structured fields from a trusted form or
    system (order id, amount, customer tier...). The text is data, never authority."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str = Field(default="", max_length=8000)
    context: dict[str, Scalar] = Field(default_factory=dict)
    catalogue: str | None = Field(default=None, min_length=1, max_length=128)
    request_id: str = Field(default_factory=new_request_id, pattern=r"^[A-Za-z0-9_.:\-]{1,128}$")
    source_document_id: str | None = Field(default=None, max_length=256)

    @field_validator("context")
    @classmethod
    def _small_context(cls, value: dict[str, Scalar]) -> dict[str, Scalar]:
        if len(value) > MAX_CONTEXT_FIELDS:
            raise ValueError(f"at most {MAX_CONTEXT_FIELDS} context fields")
        for key, item in value.items():
            if not _KEY.match(key):
                raise ValueError(f"context key {key!r} must be an identifier of 1-64 chars")
            if isinstance(item, str) and len(item) > MAX_CONTEXT_VALUE:
                raise ValueError(f"context field {key!r} is longer than {MAX_CONTEXT_VALUE}")
        return value

    def get(self, name: str) -> Scalar:
        return self.context.get(name)


class PlannerInfo(BaseModel):
    """Who proposed: copied into the saga's provenance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    actor_type: ActorType
    actor_id: str = Field(min_length=1, max_length=200)
    model: str | None = None
    prompt_version: str | None = None

    def label(self) -> str:
        model = f" model={self.model}" if self.model else ""
        return f"{self.actor_type.value}:{self.actor_id}{model}"


class AttemptError(BaseModel):
    """One reason an attempt failed: a validator error or a planner failure."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    message: str
    index: int | None = None
    path: str | None = None
    step: str | None = None

    @classmethod
    def from_plan_error(cls, error: PlanError) -> AttemptError:
        return cls(
            code=error.code.value,
            message=error.message,
            index=error.index,
            path=error.path,
            step=error.step,
        )

    def where(self) -> str:
        return self.path or (f"step {self.index}" if self.index is not None else "plan")


class Attempt(BaseModel):
    """One proposal and its verdict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(ge=1)
    by: PlannerInfo
    plan: dict[str, Any] | None = None  # as proposed; None when the planner gave nothing usable
    rationale: str = ""
    errors: tuple[AttemptError, ...] = ()
    accepted: bool = False
    repeat_of: int | None = None  # the earlier rejected attempt this one repeated
    raw_reply: str | None = None
    at: float = 0.0


# -- runs and escalations ------------------------------------------------------------------


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


# -- what closing an escalation can meet ----------------------------------------------------


class EscalationNotFound(PivotalError):
    """No escalation with this id."""

    code = "escalation_not_found"


class EscalationClosed(PivotalError):
    """The escalation was already resolved."""

    code = "escalation_closed"
