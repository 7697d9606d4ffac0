"""The workers the ledger knows: ``GET /v1/workers`` (the roles that read every list).

Each is alive (it beats), stale (it went silent: crashed, frozen or cut off) or stopped, with
its heartbeat's age, the sagas whose leases it holds, its Pivotal version and the catalogues
it serves: what ``pivotal workers`` and the workers page show."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import Field

from pivotal.server import views
from pivotal.server.auth import READERS, Principal, allow
from pivotal.server.context import Context, context
from pivotal.server.errors import AUTHED, responses
from pivotal.server.limits import Page, page
from pivotal.views.worker_view import describe

router = APIRouter(prefix="/v1", tags=["operators"], responses=responses(*AUTHED))

Ctx = Annotated[Context, Depends(context)]
Reader = Annotated[Principal, Depends(allow(*READERS))]
Pages = Annotated[Page, Depends(page)]


class WorkerRow(views.View):
    name: str
    state: Literal["alive", "stale", "stopped"] = Field(
        description="alive: it beats; stale: it missed its heartbeats (another worker may "
        "take its name); stopped: it said it stopped."
    )
    heartbeat_at: float
    heartbeat_age: float = Field(description="Seconds since its last heartbeat.")
    started_at: float
    stopped_at: float | None
    version: str | None = Field(description="The Pivotal it runs; null: not recorded.")
    catalogues: list[str]
    beat_every: float | None = Field(description="Seconds between its heartbeats.")
    leases: list[str] = Field(description="The sagas whose lease it holds now, by id.")


@router.get("/workers", response_model=views.Page[WorkerRow])
async def workers(ctx: Ctx, who: Reader, pages: Pages) -> dict[str, Any]:
    """The workers, the latest heartbeat first."""
    now = ctx.clock.now()
    found = await ctx.store.list_workers(now, pages.wanted)
    return pages.of([describe(w, now) for w in found])
