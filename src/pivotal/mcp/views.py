"""What the MCP tools answer with: typed results (their output schemas) and the error
results an agent reads to correct itself.

A saga is shown to an agent as ``pivotal.views.agent_view`` shows it on every surface."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from pivotal.declarations.plan_errors import PlanError
from pivotal.sagas.state import SagaStatus
from pivotal.views.agent_view import SagaView as SagaView


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


# -- converting ledger records -------------------------------------------------------------


def error_views(errors: Sequence[PlanError]) -> list[ErrorView]:
    return [
        ErrorView(code=e.code.value, message=e.message, index=e.index, path=e.path, step=e.step)
        for e in errors
    ]


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
