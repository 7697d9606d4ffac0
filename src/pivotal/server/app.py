"""The FastAPI application over a ledger and an app's catalogues."""

from __future__ import annotations

from fastapi import FastAPI

from pivotal.app import App
from pivotal.catalogue import Catalogue
from pivotal.clock import Clock, SystemClock
from pivotal.orchestrator import Orchestrator
from pivotal.server import errors, pages
from pivotal.server.context import Context
from pivotal.server.limits import MAX_BODY, BodyLimit
from pivotal.server.routes import agents, approvals, health, operators
from pivotal.store.base import Store

DESCRIPTION = (
    "Agents validate and submit plans; approvers decide pivots; operators settle what waits "
    "for a person. Every call but /healthz and /readyz needs `Authorization: Bearer <token>` "
    "(`pivotal tokens create`). The server only records: workers run the sagas."
)


def create_app(
    store: Store,
    app: App | Catalogue,
    *,
    clock: Clock | None = None,
    max_body: int = MAX_BODY,
    owner: str = "pivotal-serve",
) -> FastAPI:
    """The HTTP API over an open ``store`` and ``app``'s catalogues (the caller opens and
    closes the store)."""
    chosen = clock or SystemClock()
    orchestrator = Orchestrator(store, app, clock=chosen, owner=owner)
    api = FastAPI(title="Pivotal", version="1", description=DESCRIPTION)
    api.state.pivotal = Context(store, orchestrator, chosen, max_body)
    errors.install(api)
    for group in (health, agents, approvals, operators):
        api.include_router(group.router)
    api.include_router(pages.router)
    api.add_middleware(BodyLimit, max_body=max_body)
    return api
