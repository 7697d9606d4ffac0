"""``pivotal serve``: the HTTP API over the ledger (FastAPI; OpenAPI at ``/openapi.json``,
Swagger UI over it at ``/docs``).

The server only records: plans are validated and submitted, decisions are recorded, and
workers run the sagas. Importing ``pivotal`` never imports this package (nor FastAPI); nor
does importing ``views`` or ``api_errors``, the answers' shapes and the API's own errors,
which ``pivotal.client`` shares: ``create_app`` (and FastAPI with it) is imported when first
asked for.

=====================  ===================================================================
module                 what
=====================  ===================================================================
``app``                ``create_app(store, app)``: the FastAPI application
``context``            what every route shares: the ledger, the orchestrator, the clock
``auth``               bearer tokens to principals, role checks
``errors``             every error as ``{"error": {"code", "message"}}`` with its status
``api_errors``         the errors only the API answers with (unauthorized, forbidden, ...)
``views``              the shapes the API answers with (its OpenAPI response schemas)
``limits``             the request body cap, pagination
``routes.*``           the endpoints, per group (health, agents, approvals, operators)
=====================  ===================================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pivotal.server.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> object:
    """``create_app``, imported (with FastAPI) when first asked for."""
    if name == "create_app":
        from pivotal.server.app import create_app

        globals()[name] = create_app
        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
