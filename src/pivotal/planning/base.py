"""The planner protocol: what a planner receives, and what it returns.

A planner turns a request into a proposed plan. It is given the request, the catalogue as
rendered for planners and the history of earlier attempts with their errors, and it returns
data. It holds no reference to the orchestrator, the ledger or the services.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pivotal.plan import ActorType
from pivotal.planning.render import CatalogueView
from pivotal.validation import PlanError

Scalar = str | int | float | bool | None

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_CONTEXT_FIELDS = 32
MAX_CONTEXT_VALUE = 1000


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex[:16]}"


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


class Proposal(BaseModel):
    """A planner's answer: the plan as data, the rationale, and who produced it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan: dict[str, Any]
    rationale: str = ""
    by: PlannerInfo
    raw: str | None = None  # the verbatim reply, kept for the record


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


@dataclass(frozen=True, slots=True)
class PlannerTurn:
    """Everything a planner is given for one attempt."""

    request: PlanRequest
    view: CatalogueView
    attempt: int  # 1-based
    max_attempts: int
    history: tuple[Attempt, ...] = ()

    @property
    def previous(self) -> Attempt | None:
        return self.history[-1] if self.history else None

    @property
    def errors(self) -> tuple[AttemptError, ...]:
        """The errors of the previous attempt (empty on the first)."""
        return self.previous.errors if self.previous else ()


class Planner(Protocol):
    """Anything that turns a request into a proposed plan."""

    @property
    def info(self) -> PlannerInfo:
        """Who this planner is; a proposal may name a more precise author in ``by``."""
        ...

    async def propose(self, turn: PlannerTurn) -> Proposal:
        """Return a proposal, or raise ``PlannerError`` when there is none to give."""
        ...
