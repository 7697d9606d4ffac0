"""One request through an application's ASGI interface, without a server: what it answered
and how much of the body it read (``reads``: calls of ``receive``), for the tests that check
a request is refused before its body is read."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

WAIT = 10.0  # seconds an application may take: far past every timeout the tests set


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    reads: int  # how many times the app called receive
    sent: int = 0  # body bytes the app took


@dataclass
class Body:
    """A request body the app may read: ``chunks`` then, with ``stall``, nothing ever more."""

    chunks: list[bytes] = field(default_factory=list)
    stall: bool = False


async def call(
    app: Any,
    method: str,
    path: str,
    headers: dict[str, str],
    body: Body | None = None,
    client: str = "192.0.2.7",
) -> Answer:
    """One request through ``app``'s ASGI interface, counting what it reads."""
    body = body or Body()
    reads = 0
    taken = 0
    started: dict[str, Any] = {}
    parts: list[bytes] = []
    pending = list(body.chunks)

    async def receive() -> dict[str, Any]:
        nonlocal reads, taken
        reads += 1
        if pending:
            chunk = pending.pop(0)
            taken += len(chunk)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending) or body.stall}
        if body.stall:
            await asyncio.Event().wait()  # a client that sends nothing more
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.update(message)
        elif message["type"] == "http.response.body":
            parts.append(message.get("body", b""))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": (client, 40_000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    await asyncio.wait_for(app(scope, receive, send), WAIT)
    found = {k.decode().lower(): v.decode() for k, v in started.get("headers", [])}
    return Answer(started["status"], found, b"".join(parts), reads, taken)
