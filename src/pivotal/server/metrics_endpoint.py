"""A worker's own metrics endpoint: ``GET /metrics`` over a ``PivotalMetrics`` registry,
served by uvicorn behind the edge every listener has (``server.edge``), and a task that
keeps its ledger gauges fresh.

``pivotal worker --metrics-port N`` runs one for as long as the worker runs, on the
worker's event loop. As on ``pivotal serve``'s ``/metrics``, a scrape needs a bearer token of
the ledger, of any role; bad tokens are locked out, the ``Host`` must be an allowed one,
and a slow or large request is cut off. The gauges it serves are those of the last refresh
(every ``every`` seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from pivotal.clock import Clock, SystemClock
from pivotal.errors import PivotalError
from pivotal.observability.metrics import PivotalMetrics
from pivotal.people.principals import Role
from pivotal.ports import bind
from pivotal.server.edge import Edge, caller_gate, default_hosts, ledger_tokens, mount
from pivotal.store.base import Store

log = logging.getLogger("pivotal.metrics")


class MetricsEndpointError(PivotalError):
    """The metrics endpoint could not listen."""

    code = "metrics_endpoint_failed"


PATH = "/metrics"


def metrics_app(metrics: PivotalMetrics, store: Store, edge: Edge | None = None) -> Any:
    """The endpoint's application: ``GET /metrics`` (the registry as it stands), for a
    bearer token of ``store`` of any role, behind ``edge`` (by default one answering for
    loopback's names)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def scrape(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app = Starlette(routes=[Route(PATH, scrape, methods=["GET"])])
    chosen = edge if edge is not None else Edge(allowed_hosts=default_hosts("127.0.0.1"))
    mount(app, chosen, caller_gate(ledger_tokens(store, list(Role))))
    return app


class MetricsEndpoint:
    """``async with MetricsEndpoint(metrics, store, port=9464):`` serves the metrics at
    ``http://host:port/metrics`` and refreshes the ledger gauges until the block ends.
    ``edge`` (default: answering for ``host`` and loopback's names) is its edge; ``app``,
    when given, is what it serves (``listeners``: built with its edge) in place of
    ``metrics_app``'s."""

    def __init__(
        self,
        metrics: PivotalMetrics,
        store: Store,
        *,
        port: int,
        host: str = "127.0.0.1",
        every: float = 5.0,
        clock: Clock | None = None,
        edge: Edge | None = None,
        app: Any = None,
    ) -> None:
        self.metrics = metrics
        self.store = store
        self.port = port
        self.host = host
        self.every = every
        self.clock = clock or SystemClock()
        self.edge = edge if edge is not None else Edge(allowed_hosts=default_hosts(host))
        self.app = app if app is not None else metrics_app(metrics, store, self.edge)
        self._socket: socket.socket | None = None
        self._server: Any = None
        self._serving: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """Where the metrics are served (the port the server bound)."""
        port = self._socket.getsockname()[1] if self._socket is not None else self.port
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}{PATH}"

    async def __aenter__(self) -> MetricsEndpoint:
        await self.metrics.refresh(self.store, self.clock.now())  # served from the start
        self._socket = bind(self.host, self.port, option="--metrics-port")
        self._server = _server(self.app, self.host, self.port)
        self._serving = asyncio.create_task(
            self._server.serve(sockets=[self._socket]), name="pivotal-metrics-endpoint"
        )
        while not self._server.started:  # readiness: uvicorn sets it once it listens
            if self._serving.done():
                await self._close()
                raise MetricsEndpointError(f"cannot serve metrics on {self.host}:{self.port}")
            await asyncio.sleep(0.01)
        self._task = asyncio.create_task(self._refreshing(), name="pivotal-metrics-refresh")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close()

    async def _close(self) -> None:
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await self._serving
        if self._socket is not None:
            self._socket.close()

    async def _refreshing(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            await self.metrics.refresh(self.store, self.clock.now())  # never raises


def _server(app: Any, host: str, port: int) -> Any:
    """Uvicorn serving ``app`` as every listener is served (``edge.uvicorn_config``),
    leaving the process's signals to the worker."""
    import uvicorn

    from pivotal.server.edge import uvicorn_config

    class Embedded(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the worker handles SIGINT and SIGTERM; it closes this server itself

    config = uvicorn_config(app, host, port, log_level="warning")
    config.lifespan = "off"
    return Embedded(config)
