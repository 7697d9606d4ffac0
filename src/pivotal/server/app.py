"""The FastAPI application over a ledger and an app's catalogues."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import FastAPI

from pivotal.app import App
from pivotal.catalogue import Catalogue
from pivotal.clock import Clock, SystemClock
from pivotal.observability.metrics import PivotalMetrics
from pivotal.orchestrator import Orchestrator
from pivotal.server import errors, pages
from pivotal.server.context import Context
from pivotal.server.limits import MAX_BODY, BodyLimit
from pivotal.server.routes import agents, approvals, health, operators, reports
from pivotal.server.routes import metrics as metrics_route
from pivotal.store.base import Store
from pivotal.telemetry import Telemetry

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
    metrics: PivotalMetrics | None = None,
    telemetry: Sequence[Telemetry] = (),
) -> FastAPI:
    """The HTTP API over an open ``store`` and ``app``'s catalogues (the caller opens and
    closes the store). ``metrics`` (else metrics of its own) observe what the API commits
    (submissions, decisions) and are served at ``/metrics``; ``telemetry`` (log fields,
    traces) observes them too."""
    chosen = clock or SystemClock()
    measured = metrics if metrics is not None else PivotalMetrics()
    orchestrator = Orchestrator(
        store, app, clock=chosen, owner=owner, telemetry=[measured, *telemetry]
    )
    measured.expect(c.name for c in orchestrator.app)
    api = FastAPI(title="Pivotal", version="1", description=DESCRIPTION)
    api.state.pivotal = Context(store, orchestrator, chosen, max_body)
    api.state.pivotal_metrics = measured
    errors.install(api)
    for group in (health, agents, approvals, operators, reports, metrics_route):
        api.include_router(group.router)
    api.include_router(pages.router)
    api.add_middleware(BodyLimit, max_body=max_body)
    return api
