"""``/healthz`` (the process is up), ``/readyz`` (the ledger answers, its schema is
current), and ``/``, which leads a browser to the pages (``/ui``: the approver's queue, or
the login page without a session). None needs a token."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, RedirectResponse

from pivotal.errors import SchemaMismatch, StoreError
from pivotal.redaction import redact
from pivotal.server.context import Context, context
from pivotal.server.errors import error_body, responses

router = APIRouter(tags=["health"])
log = logging.getLogger("pivotal.server.health")


PAGES = "/ui"  # the pages' home: the queue, or the login page without a session


@router.get("/", include_in_schema=False)
async def root() -> RedirectResponse:
    """A person who opens the server's address lands on the pages."""
    return RedirectResponse(PAGES, status_code=303, headers={"Cache-Control": "no-store"})


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None, responses=responses(503))
async def readyz(ctx: Annotated[Context, Depends(context)]) -> dict[str, Any] | JSONResponse:
    """The ledger is reachable and its schema is the one this Pivotal writes."""
    try:
        current, known = await ctx.store.schema_versions()
    except Exception as exc:  # any failure to reach the ledger means not ready
        # the caller needs no token: it learns only that the ledger is unreachable; the
        # detail (which may name hosts, users, a conninfo) goes to the log, redacted
        code = exc.code if isinstance(exc, StoreError) else StoreError.code
        log.warning(
            "readyz: the ledger is not reachable: %s: %s",
            type(exc).__name__,
            redact(str(exc))[:2000],
            extra={"fields": {"event": "ledger_unreachable", "error": type(exc).__name__}},
        )
        return JSONResponse(error_body(code, "ledger unreachable"), status_code=503)
    if current != known:
        message = f"the ledger's schema is version {current}; this Pivotal writes {known}"
        return JSONResponse(error_body(SchemaMismatch.code, message), status_code=503)
    return {"status": "ready", "schema_version": current}
