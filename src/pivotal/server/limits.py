"""Limits: a cap on request bodies (413 past it, before any route reads it) and pagination
on every list."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Query
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pivotal.server.errors import BodyTooLarge, error_body

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


def page(
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many.")] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Skip this many.")] = 0,
) -> Page:
    return Page(limit, offset)
