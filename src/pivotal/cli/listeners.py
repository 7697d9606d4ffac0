"""Every HTTP listener Pivotal serves, in one list: ``LISTENERS``.

Each is built here and nowhere else, behind the one edge (``server.edge``): the commands
that serve them build them with ``build``, and the test of the edge walks this list, so a
listener cannot be added without it. A listener names the command that serves it, the
request that needs a caller (``probe``) and the roles whose tokens it admits.

=================  ==================================  ========================================
listener           served by                           what
=================  ==================================  ========================================
``api``            ``pivotal serve``                   the HTTP API and the pages
``mcp``            ``pivotal mcp --transport http``    the planner's tools over streamable HTTP
``worker-metrics`` ``pivotal worker --metrics-port``   the worker's Prometheus metrics
=================  ==================================  ========================================

The web frameworks (FastAPI, the MCP SDK) are imported only when a listener is built."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pivotal.people.principals import Role

if TYPE_CHECKING:
    from pivotal.orchestration.orchestrator import Orchestrator
    from pivotal.server.edge import Edge


@dataclass(frozen=True)
class Listener:
    """One listener: its ``name``, the ``command`` serving it, ``probe`` (a method and path
    that needs a caller), the ``roles`` whose tokens get past its gate, and ``factory``
    (``factory(orchestrator, edge, **options)``: the ASGI application, edge mounted)."""

    name: str
    command: str
    probe: tuple[str, str]
    roles: frozenset[Role]
    factory: Callable[..., Any]

    def build(self, orchestrator: Orchestrator, edge: Edge, **options: Any) -> Any:
        """The application over ``orchestrator`` behind ``edge``."""
        return self.factory(orchestrator, edge, **options)


def _api(orchestrator: Orchestrator, edge: Edge, **options: Any) -> Any:
    from pivotal.server import create_app

    return create_app(
        orchestrator.store,
        orchestrator.app,
        clock=orchestrator.clock,
        allowed_hosts=edge.allowed_hosts,
        trusted_proxies=edge.trusted_proxies,
        max_body=edge.max_body,
        body_timeout=edge.body_timeout,
        min_body_rate=edge.min_body_rate,
        header_timeout=edge.header_timeout,
        lockout=edge.lockout,
        **options,
    )


def _mcp(orchestrator: Orchestrator, edge: Edge, **options: Any) -> Any:
    from pivotal.mcp.server import http_app

    _, app = http_app(orchestrator, edge=edge, **options)
    return app


def _worker_metrics(orchestrator: Orchestrator, edge: Edge, **options: Any) -> Any:
    from pivotal.observability.metrics import PivotalMetrics
    from pivotal.server.metrics_endpoint import metrics_app

    metrics = options.pop("metrics", None) or PivotalMetrics()
    return metrics_app(metrics, orchestrator.store, edge, **options)


LISTENERS: tuple[Listener, ...] = (
    Listener(
        "api",
        "pivotal serve",
        ("POST", "/v1/plans/validate"),
        frozenset(Role),
        _api,
    ),
    Listener(
        "mcp",
        "pivotal mcp --transport http",
        ("POST", "/mcp"),
        frozenset({Role.AGENT}),
        _mcp,
    ),
    Listener(
        "worker-metrics",
        "pivotal worker --metrics-port",
        ("GET", "/metrics"),
        frozenset(Role),
        _worker_metrics,
    ),
)


def listener(name: str) -> Listener:
    """The listener called ``name``; KeyError when there is none."""
    for found in LISTENERS:
        if found.name == name:
            return found
    raise KeyError(name)
