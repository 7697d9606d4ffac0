"""What the MCP tools answer with: typed results (their output schemas) and the error
results an agent reads to correct itself.

A saga is shown to an agent without secrets: step names, kinds, statuses and attempts, the
saga's reason and its sign-off state; never a step's results or error texts, and
never anything about how a step is reversed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from pivotal.plan_errors import PlanError
from pivotal.state import SagaState, SagaStatus, UndoStatus
from pivotal.store.base import StoredSaga


class CatalogueEntry(BaseModel):
    """One catalogue a plan may name."""

    catalogue: str
    description: str
    steps: list[str]


class Catalogues(BaseModel):
    """Every catalogue of this deployment."""

    catalogues: list[CatalogueEntry]
    next: str


class CatalogueDescription(BaseModel):
    """A catalogue as a planner sees it."""

    catalogue: str
    plan_schema: dict[str, Any] = Field(description="JSON Schema of a valid plan.")
    text: str = Field(description="The steps, their kinds and the rules, in prose.")
    steps: list[str]
    next: str


class ErrorView(BaseModel):
    """One reason a plan is refused, as the validator reports it."""

    code: str
    message: str
    index: int | None = Field(default=None, description="Flat call index in the plan.")
    path: str | None = Field(default=None, description="Where in the plan JSON.")
    step: str | None = None


class Validation(BaseModel):
    """What the validator says about a plan (nothing was recorded)."""

    valid: bool
    errors: list[ErrorView]
    next: str


class Submitted(BaseModel):
    """A recorded saga (nothing has run yet)."""

    saga_id: str
    status: SagaStatus
    created: bool = Field(description="False when this saga id was recorded already.")
    submitted_by: str
    next: str


class StepView(BaseModel):
    index: int
    name: str
    kind: str
    status: str
    attempts: int
    reversed: bool = Field(description="Pivotal took this step's effect back.")


class SignOff(BaseModel):
    """The decision a person makes before the point of no return."""

    step: int
    step_name: str
    status: str
    reason: str
    expires_at: float
    decided_at: float | None
    needed: int
    given: int


class SagaView(BaseModel):
    """Where a saga stands."""

    saga_id: str
    catalogue: str
    status: SagaStatus
    finished: bool
    reason: str | None
    submitted_by: str
    steps: list[StepView]
    sign_off: SignOff | None
    created_at: float
    updated_at: float
    next: str


# -- converting ledger records -------------------------------------------------------------


def error_views(errors: Sequence[PlanError]) -> list[ErrorView]:
    return [
        ErrorView(code=e.code.value, message=e.message, index=e.index, path=e.path, step=e.step)
        for e in errors
    ]


_NEXT = {
    SagaStatus.SUBMITTED: "A Pivotal worker will run it; call get_saga again later.",
    SagaStatus.RUNNING: "It is running; call get_saga again later.",
    SagaStatus.AWAITING_APPROVAL: (
        "It waits for a person's decision before its point of no return; nothing for you to "
        "do but call get_saga later."
    ),
    SagaStatus.COMPENSATING: "A step failed; Pivotal is taking the earlier steps back.",
    SagaStatus.COMPLETED: "It is done.",
    SagaStatus.COMPENSATED: "It did not complete; its effects were taken back. See reason.",
    SagaStatus.COMPENSATION_FAILED: "It did not complete and an operator was alerted.",
    SagaStatus.NEEDS_HUMAN: "It waits for an operator; nothing for you to do.",
    SagaStatus.RESOLVED: "An operator settled it.",
}


def next_step(status: SagaStatus) -> str:
    return _NEXT[status]


def saga_view(stored: StoredSaga) -> SagaView:
    state: SagaState = stored.state
    approval = state.approval
    sign_off = None
    if approval is not None:
        sign_off = SignOff(
            step=approval.step,
            step_name=state.steps[approval.step].name,
            status=approval.status.value,
            reason=approval.reason,
            expires_at=approval.expires_at,
            decided_at=approval.decided_at,
            needed=approval.required,
            given=len(approval.approved_by),
        )
    return SagaView(
        saga_id=state.saga_id,
        catalogue=state.catalogue,
        status=state.status,
        finished=state.status.terminal,
        reason=state.reason,
        submitted_by=stored.plan.provenance.actor_id,
        steps=[
            StepView(
                index=r.index,
                name=r.name,
                kind=r.kind,
                status=r.status.value,
                attempts=r.attempts,
                reversed=r.undo_status is UndoStatus.DONE,
            )
            for r in state.steps
        ],
        sign_off=sign_off,
        created_at=state.created_at,
        updated_at=state.updated_at,
        next=next_step(state.status),
    )


# -- tool results ----------------------------------------------------------------------------


def ok(model: BaseModel) -> CallToolResult:
    """A successful result: the model as structured content and as JSON text."""
    data = model.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(data, indent=2))],
        structured_content=data,
    )


def failed(code: str, message: str, *, errors: Sequence[ErrorView] = ()) -> CallToolResult:
    """An error result (``isError``): the code, what to do about it, and any plan errors."""
    lines = [f"error [{code}]: {message}"]
    lines += [f"- [{e.code}] at {_where(e)}: {e.message}" for e in errors]
    data: dict[str, Any] = {
        "error": code,
        "message": message,
        "errors": [e.model_dump(mode="json") for e in errors],
    }
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines))],
        structured_content=data,
        is_error=True,
    )


def _where(error: ErrorView) -> str:
    if error.path:
        return error.path
    return f"step {error.index}" if error.index is not None else "plan"
