"""Who is calling: the bearer token names a principal and its role (never a body field).

``allow(*roles)`` is a route dependency: 401 without a valid token, 403 when the token's
role is not among ``roles`` (an admin may do everything)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from pivotal.principals import Role, hash_token
from pivotal.server.context import Context, context
from pivotal.server.errors import Forbidden, Unauthorized

MAX_TOKEN = 512

bearer = HTTPBearer(auto_error=False, description="A token from `pivotal tokens create`.")


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role
    token_id: str


READERS = (Role.APPROVER, Role.OPERATOR, Role.VIEWER)  # and admin: every list and view


async def principal(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ctx: Annotated[Context, Depends(context)],
) -> Principal:
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
