"""The catalogues this server serves, for any authenticated role (agents included).

Each is described once, by ``pivotal.views.catalogue_view`` (as MCP's ``list_catalogues`` is):
its steps with their kinds and argument schemas, its approval policy, its rollout and its
rules, in words; to an agent, as ``pivotal.views.agent_view`` describes it (its approval policy
and rollout said to exist, never their numbers). By name it also carries what a planner is
given (``planning.render``): the JSON Schema of a valid plan and the text. Never an undo, a
lookup or a check's code."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from pivotal.declarations.catalogue import Catalogue
from pivotal.people.principals import Role
from pivotal.planning.render import render_catalogue
from pivotal.server.api_errors import CatalogueNotFound
from pivotal.server.auth import READERS, Principal, allow
from pivotal.server.context import Context, context
from pivotal.server.errors import AUTHED, responses
from pivotal.views.agent_view import agent_catalogue
from pivotal.views.catalogue_view import CatalogueDescription, describe_catalogue

router = APIRouter(prefix="/v1/catalogues", tags=["catalogues"], responses=responses(*AUTHED))

Ctx = Annotated[Context, Depends(context)]
Anyone = Annotated[Principal, Depends(allow(Role.AGENT, *READERS))]


class StepEntry(BaseModel):
    name: str
    kind: str = Field(description="compensable, pivot or retriable.")
    description: str
    args_schema: dict[str, Any] = Field(description="The JSON Schema of its arguments.")


class CatalogueEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    description: str
    steps: list[StepEntry]
    approval: str = Field(description="The approval policy, in words.")
    rollout: str = Field(description="How far agent plans execute, in words.")
    rules: list[str] = Field(description="Each rule over the whole plan, in words.")


class CatalogueList(BaseModel):
    items: list[CatalogueEntry]


class CatalogueDetail(CatalogueEntry):
    """The description, plus what a planner is given."""

    catalogue: str
    schema_: dict[str, Any] = Field(alias="schema", description="The plan's JSON Schema.")
    text: str = Field(description="The catalogue as a planner reads it.")


def _described(catalogue: Catalogue, who: Principal) -> CatalogueDescription:
    """An agent reads a catalogue as ``agent_view`` describes it (the approval policy and
    the rollout only said to exist); people read their thresholds and limits."""
    return agent_catalogue(catalogue) if who.role is Role.AGENT else describe_catalogue(catalogue)


@router.get("", response_model=CatalogueList)
async def catalogues(ctx: Ctx, who: Anyone) -> dict[str, Any]:
    """Every catalogue this server serves, described (for an agent, without its policy's
    numbers)."""
    return {"items": [_described(c, who).as_dict() for c in ctx.orchestrator.app]}


@router.get("/{name}", response_model=CatalogueDetail, responses=responses(404))
async def catalogue(ctx: Ctx, who: Anyone, name: str) -> dict[str, Any]:
    """One catalogue, described, with the plan's JSON Schema and the text a planner is
    given (never an undo). 404 ``catalogue_not_found`` for a name this server lacks."""
    found = ctx.orchestrator.app.catalogues.get(name)
    if found is None:
        known = ", ".join(sorted(ctx.orchestrator.app.catalogues)) or "none"
        raise CatalogueNotFound(f"no catalogue named {name[:200]!r}; known: {known}")
    view = render_catalogue(found)
    return _described(found, who).as_dict() | {
        "catalogue": view.catalogue,
        "schema": view.schema,
        "text": view.text,
    }
