"""``/healthz`` (the process is up) and ``/readyz`` (the ledger answers, its schema is
current). Neither needs a token."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from pivotal.errors import SchemaMismatch, StoreError
from pivotal.server.context import Context, context
from pivotal.server.errors import error_body, responses

router = APIRouter(tags=["health"])


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
        code = exc.code if isinstance(exc, StoreError) else StoreError.code
        message = f"the ledger is not reachable: {type(exc).__name__}: {exc}"[:500]
        return JSONResponse(error_body(code, message), status_code=503)
    if current != known:
        message = f"the ledger's schema is version {current}; this Pivotal writes {known}"
        return JSONResponse(error_body(SchemaMismatch.code, message), status_code=503)
    return {"status": "ready", "schema_version": current}
