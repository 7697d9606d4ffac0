"""``AuthGate``: who is calling is settled before a byte of the body is read.

Pure ASGI middleware, in front of the body cap and the routes:

* the API (``/v1/...``), ``/metrics`` and the API's description (``SPEC_PATHS``: the OpenAPI
  document and the reference page over it, with its assets) need a principal
  (``auth.authenticate``: the trusted proxy header or a bearer token); without one the answer
  is 401 at once, the body unread and the connection closed. The principal found is kept on
  the request's state for the routes (``auth.principal``);
* a page's POST (``/ui/...``) needs a live session, else a redirect to the login page;
* ``POST /ui/login`` carries its token in the body: it is let through to its route, which
  counts its failures with ``login_failed``.

Failed credentials are counted in the application's ``limits.Lockout`` (``edge.admit``): a
bearer token that is unknown or revoked per client (``peers.client_key``: an IPv4 address,
an IPv6 /64, however written); a failed page login per client address and per
the submitted token (its hash: ``token_key``), the one name a failed login has. Past the
limit a key is locked: a bad credential under it is answered 429 with ``Retry-After`` (and
no longer counted), a token locked by its own failures is not even looked up. A *valid*
token is never refused because its address is locked, so one client failing behind a shared
proxy address cannot lock everyone else out: only unauthenticated attempts are."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from pivotal.server.auth import PRINCIPAL, Principal, authenticate
from pivotal.server.context import Context
from pivotal.server.edge import Refused, admit
from pivotal.server.errors import Unauthorized
from pivotal.server.guard import has_body
from pivotal.server.pages import session

OPENAPI = "/openapi.json"
REFERENCE = "/docs"  # Swagger UI over OPENAPI (routes.reference), its assets under it
# Who may read the API's description: any principal, for the document and the page alike
# (a request refused one is refused the other). This is the whole rule: neither route adds
# a role check of its own.
SPEC_PATHS = (OPENAPI, REFERENCE)
TOKEN_PATHS = ("/v1", "/metrics", *SPEC_PATHS)
LOGIN = "/ui/login"


def needs_token(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in TOKEN_PATHS)


class AuthGate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        method = str(scope.get("method", "GET"))
        if needs_token(path):
            await self._api(scope, receive, send)
        elif method == "POST" and path == LOGIN:  # no session yet: its route counts failures
            await self.app(scope, receive, send)
        elif method == "POST" and path.startswith("/ui/"):
            request = Request(scope)
            ctx: Context = scope["app"].state.pivotal
            if await session.viewer(request, ctx.store) is None:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 303,
                        "headers": [
                            (b"location", LOGIN.encode()),
                            (b"content-length", b"0"),
                            *_closing(scope),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b""})
                return
            await self.app(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _api(self, scope: Scope, receive: Receive, send: Send) -> None:
        admitted, who = await admit(scope, send, _principal)
        if admitted:
            scope.setdefault("state", {})[PRINCIPAL] = who  # a valid token: never locked out
            await self.app(scope, receive, send)


async def _principal(scope: Scope) -> Principal:
    """The API's caller (``auth.authenticate``); a bad credential presented is counted."""
    request = Request(scope)
    ctx: Context = scope["app"].state.pivotal
    try:
        return await authenticate(request, ctx)
    except Unauthorized as exc:
        presented = "authorization" in request.headers
        raise Refused(401, exc.code, exc.message, counted=presented) from None


def _closing(scope: Scope) -> list[tuple[bytes, bytes]]:
    return [(b"connection", b"close")] if has_body(Headers(scope=scope)) else []
