"""Plans reach the MCP tools as the agent wrote them, so that one parser reads every plan.

A JSON-RPC message is parsed by the MCP SDK before any tool sees it, and a JSON parser
keeps the last of two equal keys: ``{"amount": 1, "amount": 500}`` would reach the tool as
500, silently. So every message goes through ``plans_as_text`` first, on stdio and over
HTTP: the ``plan`` argument of ``validate_plan`` and ``submit_plan``, when it is a JSON
object, is replaced by its own JSON text, duplicate keys and numbers exactly as sent. The
tool then reads it with ``parse_plan``, as the CLI and the HTTP API read a plan file or a
request body: a key given twice is refused, and so is a plan over the size limit.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

PLAN_TOOLS = frozenset({"validate_plan", "submit_plan"})
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # a larger HTTP body is refused (413); the edge caps it first

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its key-value pairs, in order, duplicates kept."""


class _Raw(str):
    """A JSON number or constant, as its text."""


def _load(text: str | bytes) -> Any:
    return json.loads(
        text, object_pairs_hook=_Pairs, parse_float=_Raw, parse_int=_Raw, parse_constant=_Raw
    )


def _dump(value: Any) -> str:
    if isinstance(value, _Pairs):
        return "{" + ",".join(f"{json.dumps(k)}:{_dump(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, _Raw):
        return str.__str__(value)
    return json.dumps(value)


def _get(pairs: _Pairs, key: str) -> Any:
    return next((v for k, v in reversed(pairs) if k == key), None)


def _plans_to_text(message: Any) -> bool:
    """Rewrite the plan arguments of a plan tool's call in place; whether any changed."""
    if not isinstance(message, _Pairs) or _get(message, "method") != "tools/call":
        return False
    params = _get(message, "params")
    if not isinstance(params, _Pairs) or _get(params, "name") not in PLAN_TOOLS:
        return False
    arguments = _get(params, "arguments")
    if not isinstance(arguments, _Pairs):
        return False
    keys = [k for k, _ in arguments]
    if len(keys) != len(set(keys)):  # an argument given twice: the plan read is refused
        arguments[:] = [("plan", _dump(arguments))]
        return True
    changed = False
    for n, (key, value) in enumerate(arguments):
        if key == "plan" and isinstance(value, _Pairs):
            arguments[n] = (key, _dump(value))
            changed = True
    return changed


def plans_as_text(raw: str | bytes) -> str | bytes:
    """``raw`` (one JSON-RPC message or a batch) with every plan argument of a plan tool
    as its JSON text; unchanged when it has none, or is no JSON (the SDK says so)."""
    try:
        message = _load(raw)
    except (ValueError, RecursionError):
        return raw
    batch = message if type(message) is list else [message]  # a batch; an object is _Pairs
    changed = [_plans_to_text(m) for m in batch]
    if not any(changed):
        return raw
    text = _dump(message)
    return text.encode() if isinstance(raw, bytes) else text


async def strict_lines(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """Each line of a stdio transport through ``plans_as_text``."""
    async for line in lines:
        found = plans_as_text(line)
        yield found if isinstance(found, str) else found.decode()


class StrictPlans:
    """ASGI middleware for the streamable HTTP transport: each POST body through
    ``plans_as_text`` (a body over ``MAX_MESSAGE_BYTES`` is refused with 413)."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _too_large(send, self.max_bytes)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        found = plans_as_text(b"".join(chunks))
        body = found if isinstance(found, bytes) else found.encode()
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _too_large(send: Send, limit: int) -> None:
    text = f"the request body is larger than {limit} bytes".encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"text/plain"),
                (b"content-length", str(len(text)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": text})
