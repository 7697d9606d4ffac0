"""Who is calling: the bearer token names a principal and its role (never a body field).

``allow(*roles)`` is a route dependency: 401 without a valid token, 403 when the token's
role is not among ``roles`` (an admin may do everything).

Behind an authenticating reverse proxy, ``trust_proxy_header(api, "X-Forwarded-User",
Role.VIEWER, proxies=["127.0.0.1"])`` (``pivotal serve --trust-proxy-header ...
--trusted-proxy ...``) makes a request that carries that header act as the principal it
names, with the given role, and no token is needed. It is off by default, and the header is
honoured only when the request's TCP peer is one of the trusted proxies (``peers``) and, with
``secret_header``, when that header carries the proxy's shared secret (compared in constant
time); from anyone else the header is ignored and a bearer token is needed. The proxy must
still remove the header from what clients send and set it itself.

``authenticate`` is what ``principal`` runs; ``gate.AuthGate`` runs it before a body is read
and keeps the answer on the request's state, so a route does not look the token up again."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import Headers

from pivotal.people.principals import MAX_PERSON, Role, hash_token
from pivotal.server.context import Context, context
from pivotal.server.errors import Forbidden, Unauthorized
from pivotal.server.peers import from_trusted_proxy, trust_proxies
from pivotal.store.base import Store

MAX_TOKEN = 512
MAX_NAME = MAX_PERSON  # characters of a person's name

bearer = HTTPBearer(auto_error=False, description="A token from `pivotal tokens create`.")


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role
    token_id: str
    require_on_behalf_of: bool = False  # its plans must name whom they are for


PRINCIPAL = "pivotal_principal"  # where the gate keeps the caller on the request's state
READERS = (Role.APPROVER, Role.OPERATOR, Role.VIEWER)  # and admin: every list and view


@dataclass(frozen=True)
class ProxyTrust:
    """The request header an authenticating proxy sets to the user's name, the role every
    principal named there has, and optionally the header carrying the proxy's secret."""

    header: str
    role: Role = Role.VIEWER
    secret_header: str | None = None
    secret: str | None = None


def _header_name(header: str) -> str:
    name = header.strip()
    if not name or len(name) > 100 or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"{header!r} is not a header name")
    return name


def trust_proxy_header(
    api: FastAPI,
    header: str,
    role: Role = Role.VIEWER,
    *,
    proxies: Iterable[str] | None = None,
    secret_header: str | None = None,
    secret: str | None = None,
) -> None:
    """Let ``header`` name the principal, with ``role``, on requests from ``proxies`` (or
    the proxies trusted already: ``peers.trust_proxies``) that carry ``secret`` in
    ``secret_header`` when one is given."""
    name = _header_name(header)
    if proxies is not None:
        trust_proxies(api, proxies)
    if not getattr(getattr(api.state, "pivotal_proxies", None), "networks", ()):
        raise ValueError(
            "a trusted proxy header needs the proxies it is trusted from "
            "(--trusted-proxy ADDRESS or NETWORK)"
        )
    if secret_header is not None:
        secret_header = _header_name(secret_header)
        if not secret or len(secret) < 16:
            raise ValueError("the proxy's secret must be at least 16 characters")
    elif secret is not None:
        raise ValueError("a proxy secret needs the header that carries it")
    api.state.pivotal_proxy = ProxyTrust(name, role, secret_header, secret)


def _proxied(request: Request) -> Principal | None:
    trust: ProxyTrust | None = getattr(request.app.state, "pivotal_proxy", None)
    if trust is None:
        return None
    values = request.headers.getlist(trust.header)
    if not values or not from_trusted_proxy(request.scope):
        return None  # from anyone but a trusted proxy the header means nothing
    if trust.secret_header is not None and trust.secret is not None:
        given = request.headers.getlist(trust.secret_header)
        if len(given) != 1 or not hmac.compare_digest(
            given[0].encode(errors="replace"), trust.secret.encode()
        ):
            return None
    name = values[0].strip()
    if len(values) > 1 or not name or len(name) > MAX_NAME or not name.isprintable():
        raise Unauthorized(f"the {trust.header} header must name one principal")
    return Principal(name, trust.role, f"proxy:{trust.header}")


def bearer_of(request: Request | Headers) -> str | None:
    """The bearer token of the Authorization header, if any."""
    headers = request if isinstance(request, Headers) else request.headers
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


async def authenticate(request: Request, ctx: Context) -> Principal:
    """The caller: named by the trusted proxy header when one is set, present and sent by
    a trusted proxy, else by its bearer token; Unauthorized otherwise."""
    proxied = _proxied(request)
    if proxied is not None:
        return proxied
    return await token_principal(bearer_of(request), ctx.store)


async def token_principal(secret: str | None, store: Store) -> Principal:
    """The principal of bearer token ``secret`` in the ledger; Unauthorized when there is
    none, or it is unknown or revoked."""
    if secret is None:
        raise Unauthorized("a bearer token is required: Authorization: Bearer <token>")
    if len(secret) > MAX_TOKEN:
        raise Unauthorized("the bearer token is unknown or revoked")
    token = await store.token_by_hash(hash_token(secret))
    if token is None or token.revoked_at is not None:
        raise Unauthorized("the bearer token is unknown or revoked")
    try:
        role = Role(token.role)
    except ValueError:
        raise Unauthorized(f"the token's role {token.role!r} is unknown") from None
    return Principal(token.name, role, token.id, token.require_on_behalf_of)


async def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ctx: Annotated[Context, Depends(context)],
) -> Principal:
    """The caller (``authenticate``), as the gate found it before the body was read."""
    found = request.scope.get("state", {}).get(PRINCIPAL)
    if isinstance(found, Principal):
        return found
    return await authenticate(request, ctx)


def allow(*roles: Role) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency: the caller, if its role is one of ``roles`` or admin; else 403."""
    allowed = {*roles, Role.ADMIN}

    async def check(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if who.role not in allowed:
            names = ", ".join(sorted(r.value for r in allowed))
            raise Forbidden(f"the role {who.role.value} may not do this (allowed: {names})")
        return who

    return check
