"""Browser sessions for the web pages: a token is exchanged once for a random session id
kept server-side (in this process); every POST form carries the session's CSRF token.

The token's role is looked up on every request, so a revoked token ends its sessions."""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field

from fastapi import Request
from starlette.responses import Response

from pivotal.principals import Role, hash_token
from pivotal.store.base import Store

COOKIE = "pivotal_session"
LOGIN_COOKIE = "pivotal_login"  # the double-submit CSRF token of the login form
PATH = "/ui"
TTL = 8 * 3600.0
MAX_SESSIONS = 10_000
MAX_TOKEN = 512


@dataclass(frozen=True)
class Session:
    token_hash: str
    csrf: str
    expires_at: float


@dataclass(frozen=True)
class Viewer:
    """Who is looking at a page: the token's name and role, and the session's CSRF token."""

    name: str
    role: Role
    csrf: str

    def may(self, *roles: Role) -> bool:
        return self.role in roles or self.role is Role.ADMIN


@dataclass
class Sessions:
    found: dict[str, Session] = field(default_factory=dict)

    def open(self, token: str) -> tuple[str, Session]:
        now = time.monotonic()
        for key in [k for k, s in self.found.items() if s.expires_at <= now]:
            del self.found[key]
        while len(self.found) >= MAX_SESSIONS:
            del self.found[next(iter(self.found))]
        sid = secrets.token_urlsafe(32)
        session = Session(hash_token(token), secrets.token_urlsafe(32), now + TTL)
        self.found[sid] = session
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        if not sid or len(sid) > 128:
            return None
        session = self.found.get(sid)
        if session is None or session.expires_at <= time.monotonic():
            self.found.pop(sid, None)
            return None
        return session

    def close(self, sid: str | None) -> None:
        if sid:
            self.found.pop(sid, None)


def sessions_of(request: Request) -> Sessions:
    state = request.app.state
    found = getattr(state, "pivotal_sessions", None)
    if not isinstance(found, Sessions):
        found = Sessions()
        state.pivotal_sessions = found
    return found


async def role_of(store: Store, token_hash: str) -> tuple[str, Role] | None:
    """The name and role of a live token, else None."""
    token = await store.token_by_hash(token_hash)
    if token is None or token.revoked_at is not None:
        return None
    try:
        return token.name, Role(token.role)
    except ValueError:
        return None


async def viewer(request: Request, store: Store) -> Viewer | None:
    session = sessions_of(request).get(request.cookies.get(COOKIE))
    if session is None:
        return None
    found = await role_of(store, session.token_hash)
    if found is None:
        return None
    return Viewer(found[0], found[1], session.csrf)


def same(given: object, expected: str | None) -> bool:
    """A constant-time comparison of a submitted CSRF token with the expected one."""
    if not isinstance(given, str) or not expected or not given:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def set_cookie(request: Request, response: Response, name: str, value: str, age: int) -> None:
    response.set_cookie(
        name,
        value,
        max_age=age,
        path=PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
