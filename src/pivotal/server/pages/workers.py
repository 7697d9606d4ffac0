"""The workers page, ``/ui/workers``: every worker the ledger knows, whether it is alive,
the sagas whose leases it holds, its Pivotal version and the catalogues it serves (what
``pivotal workers`` and ``GET /v1/workers`` show)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from pivotal.moments import age
from pivotal.server.pages.routes import READERS, SHOWN, _ctx, _who, page
from pivotal.store.base import WorkerInfo
from pivotal.views.render import when
from pivotal.views.worker_view import LEASES_SHOWN, describe

router = APIRouter(prefix="/ui", include_in_schema=False)


def row(worker: WorkerInfo, now: float) -> dict[str, Any]:
    shown = describe(worker, now)
    held = shown["leases"]
    return shown | {
        "heartbeat": f"{age(shown['heartbeat_age'])} ago",
        "heartbeat_at": when(worker.heartbeat_at),
        "started_at": when(worker.started_at),
        "stopped_at": when(worker.stopped_at) if worker.stopped_at is not None else "",
        "leases": held[:LEASES_SHOWN],
        "more_leases": max(len(held) - LEASES_SHOWN, 0),
        "lease_count": len(held),
    }


@router.get("/workers")
async def workers(request: Request) -> Response:
    who = await _who(request, READERS)
    if isinstance(who, Response):
        return who
    ctx = _ctx(request)
    now = ctx.clock.now()
    found = await ctx.store.list_workers(now, SHOWN + 1)
    rows = [row(w, now) for w in found[:SHOWN]]
    return page(request, "workers.html", 200, who, rows=rows, cut=len(found) > SHOWN)
