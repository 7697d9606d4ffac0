"""The review report over HTTP: ``GET /v1/report?since=7d`` (operators, viewers, admins)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from pivotal.people.principals import Role
from pivotal.server.auth import Principal, allow
from pivotal.server.context import Context, context
from pivotal.server.errors import AUTHED, responses
from pivotal.views.report import DEFAULT_LIMIT, Period, Report, build_report

router = APIRouter(prefix="/v1", tags=["reports"], responses=responses(*AUTHED))

Ctx = Annotated[Context, Depends(context)]
Reviewer = Annotated[Principal, Depends(allow(Role.OPERATOR, Role.VIEWER))]
MAX_LIMIT = 100_000


@router.get("/report", response_model=Report)
async def report(
    ctx: Ctx,
    who: Reviewer,
    since: Annotated[
        str,
        Query(
            min_length=1,
            max_length=64,
            description="Start of the period: 7d, 24h, 30m (back from now) or an ISO date.",
        ),
    ] = "7d",
    until: Annotated[
        str | None,
        Query(min_length=1, max_length=64, description="End of the period (default: now)."),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description="Rows read per list; past it: truncated.")
    ] = DEFAULT_LIMIT,
) -> Report:
    """Sagas of the period that ended compensated, compensation_failed or needs_human,
    grouped by cause with who proposed them, and the planner's rejections of the period.
    ``truncated`` says when a list hit ``limit`` and the report may be partial."""
    now = ctx.clock.now()
    period = Period.parse(since, until, now)
    return await build_report(ctx.store, period, now=now, limit=limit)
