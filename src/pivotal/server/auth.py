"""Who is calling: the bearer token names a principal and its role (never a body field).

``allow(*roles)`` is a route dependency: 401 without a valid token, 403 when the token's
role is not among ``roles`` (an admin may do everything).

Behind an authenticating reverse proxy, ``trust_proxy_header(api, "X-Forwarded-User",
Role.VIEWER)`` (``pivotal serve --trust-proxy-header``) makes a request that carries that
header act as the principal it names, with the given role, and no token is needed. It is off
by default, and only safe when every request reaches the server through a proxy that removes
the header from what clients send and sets it itself: anyone who can reach the server
directly can otherwise claim any name by sending the header."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pivotal.principals import Role, hash_token
from pivotal.server.context import Context, context
from pivotal.server.errors import Forbidden, Unauthorized

MAX_TOKEN = 512
MAX_NAME = 200

bearer = HTTPBearer(auto_error=False, description="A token from `pivotal tokens create`.")


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role
    token_id: str


READERS = (Role.APPROVER, Role.OPERATOR, Role.VIEWER)  # and admin: every list and view


@dataclass(frozen=True)
class ProxyTrust:
    """The request header an authenticating proxy sets to the user's name, and the role
    every principal named there has."""

    header: str
    role: Role = Role.VIEWER


def trust_proxy_header(api: FastAPI, header: str, role: Role = Role.VIEWER) -> None:
    """Let ``header`` (set by a trusted proxy) name the principal, with ``role``."""
    name = header.strip()
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"{header!r} is not a header name")
    api.state.pivotal_proxy = ProxyTrust(name, role)


def _proxied(request: Request) -> Principal | None:
    trust: ProxyTrust | None = getattr(request.app.state, "pivotal_proxy", None)
    if trust is None:
        return None
    values = request.headers.getlist(trust.header)
    if not values:
        return None
    name = values[0].strip()
    if len(values) > 1 or not name or len(name) > MAX_NAME or not name.isprintable():
        raise Unauthorized(f"the {trust.header} header must name one principal")
    return Principal(name, trust.role, f"proxy:{trust.header}")


async def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ctx: Annotated[Context, Depends(context)],
) -> Principal:
    """The caller: named by the trusted proxy header when one is set and present, else by
    its bearer token."""
    proxied = _proxied(request)
    if proxied is not None:
        return proxied
    if credentials is None or not credentials.credentials:
        raise Unauthorized("a bearer token is required: Authorization: Bearer <token>")
    secret = credentials.credentials
    if len(secret) > MAX_TOKEN:
        raise Unauthorized("the bearer token is unknown or revoked")
    token = await ctx.store.token_by_hash(hash_token(secret))
    if token is None or token.revoked_at is not None:
        raise Unauthorized("the bearer token is unknown or revoked")
    try:
        role = Role(token.role)
    except ValueError:
        raise Unauthorized(f"the token's role {token.role!r} is unknown") from None
    return Principal(token.name, role, token.id)


def allow(*roles: Role) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency: the caller, if its role is one of ``roles`` or admin; else 403."""
    allowed = {*roles, Role.ADMIN}

    async def check(who: Annotated[Principal, Depends(principal)]) -> Principal:
        if who.role not in allowed:
            names = ", ".join(sorted(r.value for r in allowed))
            raise Forbidden(f"the role {who.role.value} may not do this (allowed: {names})")
        return who

    return check
