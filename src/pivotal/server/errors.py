"""Errors of the HTTP API: each a JSON body ``{"error": {"code", "message"}}`` (a rejected
plan adds ``errors``, each in the shape of ``PlanError.to_dict``) with its status."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from pivotal.errors import (
    ApprovalError,
    FourEyesError,
    InvalidInput,
    LeaseLost,
    PivotalError,
    PlanParseError,
    PlanRejected,
    PlanTooLarge,
    RolloutRefused,
    SagaConflict,
    SagaNotFound,
    SagaNotParked,
    SchemaMismatch,
    StoreError,
    VersionConflict,
)

# the API's own errors live in ``api_errors`` (no FastAPI there); importable here as ever
from pivotal.server.api_errors import BodyTooLarge as BodyTooLarge
from pivotal.server.api_errors import DeadLetterNotFound as DeadLetterNotFound
from pivotal.server.api_errors import Forbidden as Forbidden
from pivotal.server.api_errors import NotFound as NotFound
from pivotal.server.api_errors import Unauthorized as Unauthorized
from pivotal.store.planning_records import EscalationClosed, EscalationNotFound
from pivotal.store.saved import SavedSearchNotFound

# The first class in this list that an error is an instance of gives its status.
STATUS: tuple[tuple[type[PivotalError], int], ...] = (
    (Unauthorized, 401),
    (Forbidden, 403),
    (FourEyesError, 403),  # code four_eyes: this person may not approve (before ApprovalError)
    (NotFound, 404),
    (SagaNotFound, 404),
    (EscalationNotFound, 404),
    (SavedSearchNotFound, 404),
    (BodyTooLarge, 413),
    (PlanTooLarge, 413),
    (PlanParseError, 422),
    (PlanRejected, 422),
    (RolloutRefused, 422),  # the catalogue's rollout refuses agent plans exposing this much
    (InvalidInput, 422),
    (SagaConflict, 409),
    (VersionConflict, 409),
    (ApprovalError, 409),
    (SagaNotParked, 409),
    (EscalationClosed, 409),
    (LeaseLost, 409),  # a worker holds the saga right now: try again
    (SchemaMismatch, 503),
    (StoreError, 503),
)


class ErrorDetail(BaseModel):
    """What went wrong: a stable ``code`` and a message for people."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(description="Stable machine-readable code, e.g. `version_conflict`.")
    message: str
    errors: list[dict[str, Any]] | None = Field(
        default=None, description="A rejected plan's errors (``PlanError.to_dict``)."
    )
    problems: list[dict[str, str]] | None = Field(
        default=None, description="An invalid request's problems: path and message."
    )


class ErrorBody(BaseModel):
    """Every error answer: ``{"error": {"code", "message", ...}}``."""

    error: ErrorDetail


WHY = {
    400: "The request cannot be carried out.",
    401: "No bearer token, or an unknown or revoked one.",
    403: "The caller's role may not do this.",
    404: "Nothing here (or nothing of the caller's).",
    409: "The saga, dead letter or escalation is not in a state that allows this.",
    413: "The request body is too large.",
    422: "The request or the plan is invalid.",
    503: "The ledger is not reachable or its schema is not current.",
}


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, each with the error body."""
    return {code: {"model": ErrorBody, "description": WHY[code]} for code in codes}


AUTHED = (401, 403, 422, 503)  # what every call with a token may answer


def status_of(exc: PivotalError) -> int:
    return next((status for cls, status in STATUS if isinstance(exc, cls)), 400)


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def error_response(exc: PivotalError) -> JSONResponse:
    extra: dict[str, Any] = {}
    if isinstance(exc, PlanRejected):
        extra["errors"] = [e.to_dict() for e in exc.errors]
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return JSONResponse(
        error_body(exc.code, exc.message, **extra), status_code=status_of(exc), headers=headers
    )


async def _pivotal(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PivotalError)
    return error_response(exc)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400:  # FastAPI could not read the body (not UTF-8, say)
        return JSONResponse(error_body(InvalidInput.code, str(exc.detail)), status_code=422)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(
        error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers
    )


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {
            "path": ".".join(str(p) for p in e.get("loc", ())),
            "message": str(e.get("msg", ""))[:500],
        }
        for e in exc.errors()
    ][:50]
    message = "; ".join(f"{p['path']}: {p['message']}" for p in problems[:5])
    return JSONResponse(
        error_body(InvalidInput.code, message or "invalid request", problems=problems),
        status_code=422,
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(PivotalError, _pivotal)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(RequestValidationError, _invalid)
