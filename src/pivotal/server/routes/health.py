"""``/healthz`` (the process is up) and ``/readyz`` (the ledger answers, its schema is
current). Neither needs a token."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from pivotal.errors import SchemaMismatch, StoreError
from pivotal.redaction import redact
from pivotal.server.context import Context, context
from pivotal.server.errors import error_body, responses

router = APIRouter(tags=["health"])
log = logging.getLogger("pivotal.server.health")


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
