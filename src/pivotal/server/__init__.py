"""``pivotal serve``: the HTTP API over the ledger (FastAPI; OpenAPI at ``/openapi.json``).

The server only records: plans are validated and submitted, decisions are recorded, and
workers run the sagas. Importing ``pivotal`` never imports this package (nor FastAPI).

=====================  ===================================================================
module                 what
=====================  ===================================================================
``app``                ``create_app(store, app)``: the FastAPI application
``context``            what every route shares: the ledger, the orchestrator, the clock
``auth``               bearer tokens to principals, role checks
``errors``             every error as ``{"error": {"code", "message"}}`` with its status
``limits``             the request body cap, pagination
``routes.*``           the endpoints, per group (health, agents, approvals, operators)
=====================  ===================================================================
"""

from __future__ import annotations

from pivotal.server.app import create_app

__all__ = ["create_app"]
