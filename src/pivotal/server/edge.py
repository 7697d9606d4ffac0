"""The edge: what every listener Pivotal serves puts in front of what it serves.

Every HTTP listener (the API and its pages, MCP over HTTP, a worker's metrics endpoint:
``pivotal.cli.listeners.LISTENERS``) is mounted behind the same layers, outermost first:

* ``guard.Guard``: the allowed hosts (421 for another ``Host``), cross-site refusal (403 for
  a state-changing request from another site) and the headers on every answer;
* a caller check, before a byte of the body is read: ``gate.AuthGate`` for the API and its
  pages, ``CallerGate`` (a bearer token of the ledger, of the roles the listener serves)
  for the others. A bad credential is counted in the listener's ``limits.Lockout`` under
  the client as a network sees it (``peers.client_key``: an IPv4 address, an IPv6 /64),
  and past the limit refused with 429; a valid token is never locked out;
* ``timeouts.BodyTimeouts``: a body that pauses or trickles is cut off (408);
* ``limits.BodyLimit``: a body over the cap is refused (413) before anything reads it.

Under it, uvicorn (``uvicorn_config``) closes a connection whose request head is late
(``timeouts.timed_h11``), an idle one, and refuses requests past a concurrency limit.
``Edge`` holds the settings; ``mount`` puts the layers on an application and keeps the
settings on its state, where ``uvicorn_config`` reads the header timeout."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from pivotal.observability.logs import RequestLog
from pivotal.people.principals import Role
from pivotal.server.auth import Principal, bearer_of, token_principal
from pivotal.server.errors import Unauthorized
from pivotal.server.guard import LOOPBACK, Guard, answer, normal_hosts
from pivotal.server.limits import MAX_BODY, BodyLimit, Lockout, lockout_of
from pivotal.server.peers import client_key, trust_proxies
from pivotal.server.timeouts import BODY_TIMEOUT, HEADER_TIMEOUT, MIN_BODY_RATE, BodyTimeouts
from pivotal.store.base import Store

if TYPE_CHECKING:
    import uvicorn

    from pivotal.observability.tracing import Tracing

KEEP_ALIVE = 5
CONCURRENCY = 1000
MAX_HEAD = 16 * 1024  # bytes of a request head uvicorn buffers at most


@dataclass(frozen=True)
class Edge:
    """A listener's edge settings. ``allowed_hosts`` None checks no ``Host`` (an app built
    in a test or embedded; the commands always give some: ``default_hosts``)."""

    allowed_hosts: tuple[str, ...] | None = None
    trusted_proxies: tuple[str, ...] = ()
    max_body: int = MAX_BODY
    body_timeout: float = BODY_TIMEOUT
    min_body_rate: float = MIN_BODY_RATE
    header_timeout: float = HEADER_TIMEOUT
    lockout: Lockout = field(default_factory=Lockout)

    def __post_init__(self) -> None:
        if self.allowed_hosts is not None:
            normal_hosts(self.allowed_hosts)  # ValueError on one that is no host
        if self.max_body < 0 or self.header_timeout <= 0:
            raise ValueError("the body cap and the header timeout must be positive")


def default_hosts(host: str, allowed: Iterable[str] | None = None) -> tuple[str, ...]:
    """The hosts a listener bound to ``host`` answers for: ``allowed`` when given, else
    loopback's names and ``host`` itself (unless it is every address)."""
    chosen = list(allowed or ())
    if not chosen:
        chosen = [*LOOPBACK, *([] if host in ("0.0.0.0", "::") else [host])]
    return tuple(chosen)


def mount(app: Any, edge: Edge, gate: Callable[[ASGIApp], ASGIApp]) -> None:
    """Put the edge on ``app`` (a Starlette or FastAPI application, before it first
    serves), with ``gate`` (wrapping what follows it) as the caller check."""
    app.state.pivotal_edge = edge
    app.state.pivotal_lockout = edge.lockout
    trust_proxies(app, edge.trusted_proxies)
    app.add_middleware(BodyLimit, max_body=edge.max_body)  # innermost
    app.add_middleware(BodyTimeouts, idle=edge.body_timeout, min_rate=edge.min_body_rate)
    app.add_middleware(_Wrapped, wrap=gate)
    app.add_middleware(Guard, allowed_hosts=edge.allowed_hosts)  # outermost


class _Wrapped:
    def __init__(self, app: ASGIApp, wrap: Callable[[ASGIApp], ASGIApp]) -> None:
        self.app = wrap(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class Refused(Exception):
    """The caller may not go on: ``status`` with an error ``code``; ``counted`` when it
    presented a credential that failed (the lockout counts it)."""

    def __init__(self, status: int, code: str, message: str, *, counted: bool) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.counted = status, code, message, counted


Identify = Callable[[Scope], Awaitable[Any]]


async def admit(scope: Scope, send: Send, identify: Identify) -> tuple[bool, Any]:
    """Who calls, before the body: ``(True, caller)``, or ``(False, None)`` once answered
    (401 or 403; 429 with ``Retry-After`` for a bad credential while its client is
    locked: it is then not counted again)."""
    try:
        return True, await identify(scope)
    except Refused as exc:
        if exc.counted:
            lockout = lockout_of(scope)
            key = client_key(scope)
            wait = lockout.retry_after(key)
            if wait is not None:
                await answer(
                    send,
                    429,
                    "too_many_failures",
                    f"too many failed credentials: try again in {wait} s",
                    [(b"retry-after", str(wait).encode())],
                )
                return False, None
            lockout.failed(key)
        challenge = b'Bearer error="insufficient_scope"' if exc.status == 403 else b"Bearer"
        await answer(send, exc.status, exc.code, exc.message, [(b"www-authenticate", challenge)])
        return False, None


def ledger_tokens(store: Store, roles: Iterable[Role]) -> Identify:
    """A caller check by the ledger's bearer tokens: a token of one of ``roles`` passes
    (its ``auth.Principal``); none at all is 401, an unknown or revoked one 401 and counted,
    one of another role 403."""
    wanted = frozenset(roles)

    async def identify(scope: Scope) -> Principal:
        headers = Headers(scope=scope)
        try:
            who = await token_principal(bearer_of(headers), store)
        except Unauthorized as exc:
            raise Refused(401, exc.code, exc.message, counted="authorization" in headers) from None
        if who.role not in wanted:
            names = ", ".join(sorted(r.value for r in wanted))
            raise Refused(
                403,
                "forbidden",
                f"the role {who.role.value} may not use this server (allowed: {names})",
                counted=False,
            )
        return who

    return identify


class CallerGate:
    """Every request needs a caller (``identify``) before its body is read; lifespan
    messages pass."""

    def __init__(self, app: ASGIApp, identify: Identify) -> None:
        self.app = app
        self.identify = identify

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        admitted, _ = await admit(scope, send, self.identify)
        if admitted:
            await self.app(scope, receive, send)


def caller_gate(identify: Identify) -> Callable[[ASGIApp], ASGIApp]:
    """``mount``'s gate for a listener whose every request needs ``identify``."""

    def wrap(app: ASGIApp) -> ASGIApp:
        return CallerGate(app, identify)

    return wrap


def edge_of(app: Any) -> Edge:
    """The edge ``mount`` put on ``app``; LookupError when it has none."""
    found = getattr(getattr(app, "state", None), "pivotal_edge", None)
    if not isinstance(found, Edge):
        raise LookupError("this application has no edge: build it with pivotal.cli.listeners")
    return found


def uvicorn_config(
    api: Any,
    host: str,
    port: int,
    *,
    tracing: Tracing | None = None,
    header_timeout: float | None = None,
    keep_alive: int = KEEP_ALIVE,
    limit_concurrency: int | None = CONCURRENCY,
    log_level: str = "info",
) -> uvicorn.Config:
    """Uvicorn serving ``api`` behind ``RequestLog`` (and ``TraceRequests`` with
    ``tracing``), with no logging setup of its own: its lines reach the root logger's
    handler (``configure_logging``) and its access log is off (``RequestLog`` writes one
    line per request instead, without the query string).

    Slow clients are cut off: a request head must arrive within ``header_timeout`` seconds
    (else the app's edge's, else ``HEADER_TIMEOUT``; ``timeouts.timed_h11``), an idle
    connection is closed after ``keep_alive`` seconds, a head buffers at most ``MAX_HEAD``
    bytes, and past ``limit_concurrency`` connections and requests at once a new request is
    answered 503. Uvicorn's own proxy headers are off: the app believes ``X-Forwarded-*``
    only from its trusted proxies (``server.peers``)."""
    import uvicorn

    from pivotal.server.timeouts import timed_h11

    if header_timeout is None:
        try:
            header_timeout = edge_of(api).header_timeout
        except LookupError:
            header_timeout = HEADER_TIMEOUT
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        # a uvicorn set up earlier in this process (its default dictConfig) may have left
        # handlers of its own that stop propagation: its lines go to ours
        own = logging.getLogger(name)
        own.handlers.clear()
        own.propagate = True
        own.disabled = False
    served: Any = RequestLog(api)
    if tracing is not None:
        from pivotal.observability.tracing import TraceRequests

        served = TraceRequests(served, tracing)
    return uvicorn.Config(
        served,
        host=host,
        port=port,
        log_level=log_level,
        log_config=None,
        access_log=False,
        http=timed_h11(header_timeout),
        timeout_keep_alive=keep_alive,
        limit_concurrency=limit_concurrency,
        h11_max_incomplete_event_size=MAX_HEAD,
        proxy_headers=False,
    )
