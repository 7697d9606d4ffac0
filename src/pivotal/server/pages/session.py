"""Browser sessions for the web pages: a token is exchanged once for a random session id
kept server-side (in this process); every POST form carries the session's CSRF token.

The token's role is looked up on every request, so a revoked token ends its sessions.

A session is only *pending* when ``Sessions.open`` makes it: it is kept apart, counts against
no cap and cannot be used. The login route checks the token's role and then sets the session
cookie (``set_cookie`` with ``COOKIE``), which ``confirm``s it: only then is it usable and
counted. At most ``PER_PERSON`` sessions are open per person (the token's name as people are
compared, ``principals.canonical_person``: the tokens of one person, ``pivotal tokens create
--same-person``, share the cap), the oldest of that person's closed first, so someone holding
tokens can never log anyone else out; ``MAX_SESSIONS`` bounds the whole (reached only with more
than ``MAX_SESSIONS / PER_PERSON`` people logged in).

The cookie is ``Secure`` when the request arrived over https (to this server, or to a trusted
proxy that says so in ``X-Forwarded-Proto``), or always with ``secure_cookies(api)``
(``pivotal serve --secure-cookies``)."""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field, replace

from fastapi import Request
from starlette.responses import Response

from pivotal.people.principals import Role, canonical_person, hash_token
from pivotal.server.peers import arrived_over_https
from pivotal.store.base import Store

COOKIE = "pivotal_session"
LOGIN_COOKIE = "pivotal_login"  # the double-submit CSRF token of the login form
PATH = "/ui"
TTL = 8 * 3600.0
MAX_SESSIONS = 10_000
PER_PERSON = 20  # open sessions per person: the oldest of that person's is closed first
MAX_PENDING = 1000  # sessions opened but not yet confirmed (logins in flight)
MAX_TOKEN = 512


@dataclass(frozen=True)
class Session:
    token_hash: str
    csrf: str
    expires_at: float
    person: str = ""  # the canonical name of the token's principal, once the login found it

    @property
    def owner(self) -> str:
        """Whose session this is, for the caps: the person, else (no name) the token."""
        return f"person:{self.person}" if self.person else f"token:{self.token_hash}"


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
    pending: dict[str, Session] = field(default_factory=dict)

    def open(self, token: str) -> tuple[str, Session]:
        """A pending session for ``token``: unusable, and closing no other, until
        ``confirm``ed once the token is known to be good."""
        now = time.monotonic()
        while len(self.pending) >= MAX_PENDING:
            del self.pending[next(iter(self.pending))]
        sid = secrets.token_urlsafe(32)
        session = Session(hash_token(token), secrets.token_urlsafe(32), now + TTL)
        self.pending[sid] = session
        return sid, session

    def name(self, sid: str, name: str) -> None:
        """Say whose the pending session ``sid`` is: the name of its token's principal."""
        session = self.pending.get(sid)
        if session is not None:
            self.pending[sid] = replace(session, person=canonical_person(name))

    def confirm(self, sid: str) -> Session | None:
        """Make the pending session ``sid`` usable; close the oldest sessions of its own
        person past ``PER_PERSON`` (and, past ``MAX_SESSIONS`` in all, the oldest of the
        person with the most sessions)."""
        session = self.pending.pop(sid, None)
        if session is None:
            return self.found.get(sid)
        now = time.monotonic()
        for key in [k for k, s in self.found.items() if s.expires_at <= now]:
            del self.found[key]
        mine = [k for k, s in self.found.items() if s.owner == session.owner]
        for key in mine[: max(0, len(mine) - PER_PERSON + 1)]:
            del self.found[key]
        while self.found and len(self.found) >= MAX_SESSIONS:
            counts: dict[str, int] = {}
            for s in self.found.values():
                counts[s.owner] = counts.get(s.owner, 0) + 1
            busiest = max(counts, key=lambda h: counts[h])
            del self.found[next(k for k, s in self.found.items() if s.owner == busiest)]
        self.found[sid] = session
        return session

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
            self.pending.pop(sid, None)


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


def secure_cookies(api: object, on: bool = True) -> None:
    """Mark every cookie ``Secure``, however the request arrived."""
    api.state.pivotal_secure_cookies = on  # type: ignore[attr-defined]


def secure(request: Request) -> bool:
    """Whether a cookie set in answer to ``request`` is ``Secure``."""
    forced = getattr(request.app.state, "pivotal_secure_cookies", False) is True
    return forced or arrived_over_https(request.scope)


def set_cookie(request: Request, response: Response, name: str, value: str, age: int) -> None:
    """Set a cookie of the pages; setting the session cookie confirms its session."""
    if name == COOKIE:
        sessions_of(request).confirm(value)
    response.set_cookie(
        name,
        value,
        max_age=age,
        path=PATH,
        httponly=True,
        samesite="strict",
        secure=secure(request),
    )
