"""The planner protocol: what a planner receives, and what it returns.

A planner turns a request into a proposed plan. It is given the request, the catalogue as
rendered for planners and the history of earlier attempts with their errors, and it returns
data. It holds no reference to the orchestrator, the ledger or the services.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from pivotal.planning.render import CatalogueView

# The records a planner reads and writes are the ledger's vocabulary: they live beside the
# store (which keeps them without importing planning) and are re-exported here.
from pivotal.store.planning_records import MAX_CONTEXT_FIELDS as MAX_CONTEXT_FIELDS
from pivotal.store.planning_records import MAX_CONTEXT_VALUE as MAX_CONTEXT_VALUE
from pivotal.store.planning_records import Attempt as Attempt
from pivotal.store.planning_records import AttemptError as AttemptError
from pivotal.store.planning_records import PlannerInfo as PlannerInfo
from pivotal.store.planning_records import PlanRequest as PlanRequest
from pivotal.store.planning_records import Scalar as Scalar
from pivotal.store.planning_records import new_request_id as new_request_id


class Proposal(BaseModel):
    """A planner's answer: the plan as data, the rationale, and who produced it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan: dict[str, Any]
    rationale: str = ""
    by: PlannerInfo
    raw: str | None = None  # the verbatim reply, kept for the record


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
