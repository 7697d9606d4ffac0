"""A worker's own metrics endpoint: Prometheus' HTTP server over a ``PivotalMetrics``
registry, and a task that keeps its ledger gauges fresh.

``pivotal worker --metrics-port N`` runs one for as long as the worker runs. The server
answers in a thread of its own, so a scrape never waits on the event loop; the gauges it
serves are those of the last refresh (every ``every`` seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from types import TracebackType
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server

from pivotal.clock import Clock, SystemClock
from pivotal.errors import PivotalError
from pivotal.observability.metrics import PivotalMetrics
from pivotal.store.base import Store

log = logging.getLogger("pivotal.metrics")


class MetricsEndpointError(PivotalError):
    """The metrics endpoint could not listen."""

    code = "metrics_endpoint_failed"


class MetricsEndpoint:
    """``async with MetricsEndpoint(metrics, store, port=9464):`` serves the metrics at
    ``http://host:port/metrics`` and refreshes the ledger gauges until the block ends."""

    def __init__(
        self,
        metrics: PivotalMetrics,
        store: Store,
        *,
        port: int,
        host: str = "127.0.0.1",
        every: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        self.metrics = metrics
        self.store = store
        self.port = port
        self.host = host
        self.every = every
        self.clock = clock or SystemClock()
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """Where the metrics are served (the port the server bound)."""
        port = self._server.server_port if self._server is not None else self.port
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}/metrics"

    async def __aenter__(self) -> MetricsEndpoint:
        await self.metrics.refresh(self.store, self.clock.now())  # served from the start
        try:
            self._server, self._thread = start_http_server(
                self.port, self.host, registry=self.metrics.registry
            )
        except OSError as exc:
            raise MetricsEndpointError(
                f"cannot serve metrics on {self.host}:{self.port}: {exc}"
            ) from exc
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
        if self._server is not None:
            server, thread = self._server, self._thread
            await asyncio.to_thread(_shut, server, thread)

    async def _refreshing(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            await self.metrics.refresh(self.store, self.clock.now())  # never raises


def _shut(server: WSGIServer, thread: threading.Thread | None) -> None:
    server.shutdown()
    server.server_close()
    if thread is not None:
        thread.join(timeout=5)
