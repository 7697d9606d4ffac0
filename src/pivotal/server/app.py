"""The FastAPI application over a ledger and an app's catalogues."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fastapi import FastAPI

from pivotal.clock import Clock, SystemClock
from pivotal.declarations.app import App
from pivotal.declarations.catalogue import Catalogue
from pivotal.engine.telemetry import Telemetry
from pivotal.observability.metrics import PivotalMetrics
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.server import errors, pages
from pivotal.server.context import Context
from pivotal.server.edge import Edge, mount
from pivotal.server.gate import OPENAPI, AuthGate
from pivotal.server.limits import MAX_BODY, Lockout
from pivotal.server.pages.session import secure_cookies as secure
from pivotal.server.routes import (
    agents,
    approvals,
    catalogues,
    health,
    operators,
    reference,
    reports,
    searches,
    workers,
)
from pivotal.server.routes import metrics as metrics_route
from pivotal.server.timeouts import BODY_TIMEOUT, HEADER_TIMEOUT, MIN_BODY_RATE
from pivotal.store.base import Store

DESCRIPTION = (
    "Agents validate and submit plans; approvers decide pivots; operators settle what waits "
    "for a person. Every call but /healthz and /readyz (this document and its page, /docs, "
    "too) needs `Authorization: Bearer <token>` (`pivotal tokens create`); a request body is JSON "
    "(`Content-Type: application/json`). The server only records: workers run the sagas."
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
    allowed_hosts: Iterable[str] | None = None,
    trusted_proxies: Iterable[str] = (),
    secure_cookies: bool = False,
    body_timeout: float = BODY_TIMEOUT,
    min_body_rate: float = MIN_BODY_RATE,
    header_timeout: float = HEADER_TIMEOUT,
    lockout: Lockout | None = None,
) -> FastAPI:
    """The HTTP API over an open ``store`` and ``app``'s catalogues (the caller opens and
    closes the store). ``metrics`` (else metrics of its own) observe what the API commits
    (submissions, decisions) and are served at ``/metrics``; ``telemetry`` (log fields,
    traces) observes them too.

    In front of the routes, the edge every listener has (``edge.mount``), outermost first:
    ``guard.Guard`` (``allowed_hosts``: None
    checks no Host; cross-site requests; headers on every answer), ``gate.AuthGate`` (the
    caller before the body; ``lockout``, else one of its own, counts failed credentials),
    ``timeouts.BodyTimeouts`` (``body_timeout``, ``min_body_rate``) and the body cap;
    ``header_timeout`` is for uvicorn (``edge.uvicorn_config``).
    ``trusted_proxies`` (addresses, networks) may say a request came over https and who
    the client is; ``secure_cookies`` makes every cookie ``Secure``. The OpenAPI document is
    at ``/openapi.json`` and Swagger UI over it at ``/docs`` (``routes.reference``: from
    packaged files, nothing from another host), both for any principal
    (``gate.SPEC_PATHS``); there is no ReDoc page."""
    chosen = clock or SystemClock()
    measured = metrics if metrics is not None else PivotalMetrics()
    orchestrator = Orchestrator(
        store, app, clock=chosen, owner=owner, telemetry=[measured, *telemetry]
    )
    measured.expect(c.name for c in orchestrator.app)
    api = FastAPI(
        title="Pivotal",
        version="1",
        description=DESCRIPTION,
        openapi_url=OPENAPI,
        docs_url=None,  # ours, from packaged files: routes.reference
        redoc_url=None,
    )
    api.state.pivotal = Context(store, orchestrator, chosen, max_body)
    api.state.pivotal_metrics = measured
    secure(api, secure_cookies)
    errors.install(api)
    for group in (
        health,
        agents,
        catalogues,
        approvals,
        operators,
        reports,
        metrics_route,
        workers,
        searches,
        reference,
    ):
        api.include_router(group.router)
    api.include_router(pages.router)
    edge = Edge(
        allowed_hosts=None if allowed_hosts is None else tuple(allowed_hosts),
        trusted_proxies=tuple(trusted_proxies),
        max_body=max_body,
        body_timeout=body_timeout,
        min_body_rate=min_body_rate,
        header_timeout=header_timeout,
        lockout=lockout or Lockout(),
    )
    mount(api, edge, AuthGate)
    return api
