"""Limits: a cap on request bodies (413 past it, before any route reads it), pagination on
every list, and ``Lockout``: the one count of failed credentials (bad bearer tokens on the
API, failed logins on the pages) per source address and, for a login, per submitted token,
refusing bad credentials with 429 past its limit (``gate``)."""

from __future__ import annotations

import json
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Query
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pivotal.server.errors import BodyTooLarge, error_body
from pivotal.server.peers import client_key

MAX_BODY = 512 * 1024
MAX_PAGE = 500
MAX_OFFSET = 100_000


class BodyLimit:
    """Reads the whole request body first, at most ``max_body`` bytes; a larger one (by its
    Content-Length or as it streams in) is answered 413 and never reaches a route."""

    def __init__(self, app: ASGIApp, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        exc = BodyTooLarge(f"the request body is larger than {self.max_body} bytes")
        payload = json.dumps(error_body(exc.code, exc.message)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


@dataclass(frozen=True)
class Page:
    limit: int
    offset: int

    @property
    def wanted(self) -> int:
        """How many rows to read to fill this page and know whether another follows."""
        return self.offset + self.limit + 1

    def of(self, items: list[Any]) -> dict[str, Any]:
        """This page of ``items`` (every item up to at least ``wanted``), as JSON."""
        shown = items[self.offset : self.offset + self.limit]
        more = len(items) > self.offset + self.limit
        return {
            "items": shown,
            "limit": self.limit,
            "offset": self.offset,
            "next_offset": self.offset + self.limit if more else None,
        }


async def page(
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many.")] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Skip this many.")] = 0,
) -> Page:
    return Page(limit, offset)


class Lockout:
    """Failed credentials per key (a client, ``peers.client_key``, or ``token_key`` of a token a
    login submitted): ``limit`` failures within ``window`` seconds lock the key for ``lock``
    seconds, during which a bad credential under it is refused (429 with ``Retry-After``);
    a valid token is not (``gate``), so a shared address locked by one client refuses no
    one else. ``clock`` (monotonic seconds) is injectable, so tests need no sleeping. At
    most ``max_keys`` keys are remembered (the longest untouched is forgotten first)."""

    def __init__(
        self,
        *,
        limit: int = 20,
        window: float = 60.0,
        lock: float = 60.0,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1 or window <= 0 or lock <= 0 or max_keys < 1:
            raise ValueError("a lockout needs a positive limit, window, lock and size")
        self.limit, self.window, self.lock, self.max_keys = limit, window, lock, max_keys
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._locked: dict[str, float] = {}

    def retry_after(self, *keys: str) -> int | None:
        """Whole seconds until the most locked of ``keys`` is free again, or None."""
        now = self.clock()
        waits = []
        for key in keys:
            until = self._locked.get(key)
            if until is None:
                continue
            if until <= now:
                del self._locked[key]
            else:
                waits.append(until - now)
        return max(1, math.ceil(max(waits))) if waits else None

    def failed(self, *keys: str) -> None:
        now = self.clock()
        for key in keys:
            times = self._failures.pop(key, None) or deque()
            while times and times[0] <= now - self.window:
                times.popleft()
            times.append(now)
            if len(times) >= self.limit:
                self._locked[key] = now + self.lock
                times.clear()
            self._failures[key] = times
            while len(self._failures) > self.max_keys:
                old, _ = self._failures.popitem(last=False)
                self._locked.pop(old, None)
        if len(self._locked) > self.max_keys:
            for key in [k for k, until in self._locked.items() if until <= now]:
                del self._locked[key]


def lockout_of(scope: Scope) -> Lockout:
    """The application's lockout (one per app, made on first use)."""
    state = scope["app"].state
    found = getattr(state, "pivotal_lockout", None)
    if not isinstance(found, Lockout):
        found = Lockout()
        state.pivotal_lockout = found
    return found


def token_key(token_hash: str) -> str:
    """The lockout's key for a submitted token (by its hash; never an address)."""
    return f"token:{token_hash}"


def token_locked(scope: Scope, token_hash: str) -> int | None:
    """Seconds until the submitted token (by its hash) may be tried again, or None: a token
    locked by its own failed logins is not looked up at all."""
    return lockout_of(scope).retry_after(token_key(token_hash))


def login_failed(scope: Scope, token_hash: str | None) -> int | None:
    """A page login whose token is unknown or revoked (``token_hash``: of what was
    submitted, None when nothing usable was): the seconds to wait when its address or that
    token is locked (answer 429, counting nothing more), else None once it is counted
    against both (answer 401)."""
    lockout = lockout_of(scope)
    keys = [client_key(scope)] + ([token_key(token_hash)] if token_hash else [])
    wait = lockout.retry_after(*keys)
    if wait is None:
        lockout.failed(*keys)
    return wait
