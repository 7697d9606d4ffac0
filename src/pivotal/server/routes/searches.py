"""A person's saved searches of the sagas (``store.saved``), by name: ``GET /v1/searches``
lists the caller's own, ``PUT /v1/searches/{name}`` saves one (``{"query":
"status=compensated&created_since=7d"}``, checked as ``GET /v1/sagas`` checks its query) or
replaces it, ``DELETE`` deletes it; ``GET /v1/sagas?saved=NAME`` runs it (``routes.agents``).

The person is always the calling principal (its canonical name), never a body field: one
person never sees, runs, replaces or deletes another's (theirs reads as missing). The roles
that read the sagas (and admin) have saved searches; an agent has none."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from pivotal.server import views
from pivotal.server.auth import READERS, Principal, allow
from pivotal.server.context import Context, context
from pivotal.server.errors import AUTHED, responses
from pivotal.server.limits import Page, page
from pivotal.store.saved import MAX_NAME, MAX_QUERY, not_found

router = APIRouter(prefix="/v1", tags=["searches"], responses=responses(*AUTHED))

Ctx = Annotated[Context, Depends(context)]
Reader = Annotated[Principal, Depends(allow(*READERS))]
Pages = Annotated[Page, Depends(page)]
Name = Annotated[
    str,
    Path(
        description=f"The saved search's name: 1 to {MAX_NAME} printable characters "
        "(trimmed), no '/'; one of the caller's own."
    ),
]


class SavedSearchRow(views.View):
    name: str
    query: str = Field(
        description="The search's filters as typed (GET /v1/sagas?QUERY runs them; a "
        "relative time such as created_since=7d stays relative)."
    )
    created_at: float = Field(description="When it was first saved (the ledger's clock).")
    updated_at: float = Field(description="When it was last saved (the ledger's clock).")


class SavedQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        max_length=MAX_QUERY,
        description="A search's query, as GET /v1/sagas takes it (its filters only: no "
        "cursor, limit or offset), e.g. status=compensated&created_since=7d.",
        examples=["status=compensated&created_since=7d"],
    )


@router.get("/searches", response_model=views.Page[SavedSearchRow])
async def saved_searches(ctx: Ctx, who: Reader, pages: Pages) -> dict[str, Any]:
    """The caller's saved searches, by name."""
    found = await ctx.store.saved_searches(who.name)
    return pages.of([s.shown() for s in found[: pages.wanted]])


@router.get("/searches/{name}", response_model=SavedSearchRow, responses=responses(404))
async def saved_search(ctx: Ctx, who: Reader, name: Name) -> dict[str, Any]:
    """One of the caller's saved searches; 404 ``saved_search_not_found`` when none of
    theirs has that name."""
    found = await ctx.store.saved_search(who.name, name)
    if found is None:
        raise not_found(name)
    return found.shown()


@router.put("/searches/{name}", response_model=SavedSearchRow)
async def save_search(ctx: Ctx, who: Reader, name: Name, body: SavedQuery) -> dict[str, Any]:
    """Save the query as the caller's search ``name``, replacing theirs of that name. 422
    ``invalid_filter`` (a query GET /v1/sagas refuses, or paging), ``invalid_saved_search``
    (the name) or ``saved_searches_full`` (as many as a person may keep); nothing is saved."""
    return (await ctx.store.save_search(who.name, name, body.query)).shown()


@router.delete("/searches/{name}", status_code=204, responses=responses(404))
async def delete_search(ctx: Ctx, who: Reader, name: Name) -> Response:
    """Delete the caller's saved search ``name``; 404 when none of theirs has that name."""
    if not await ctx.store.delete_search(who.name, name):
        raise not_found(name)
    return Response(status_code=204)
