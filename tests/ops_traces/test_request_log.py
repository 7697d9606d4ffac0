"""The ASGI request log: one line per request with method, path, status, duration and the
saga the path names; never a token, a query string or a body."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pivotal.observability.logs import (
    JsonLines,
    Message,
    RequestLog,
    SagaFieldsFilter,
    Scope,
    current_fields,
    saga_in_path,
)

SECRET = "s3cret-token-value"
APP_LOG = logging.getLogger("tests.ops_traces.app")


async def show(request: Request) -> Response:
    APP_LOG.info("showing")
    return JSONResponse({"saga_id": current_fields().saga_id})


async def approve(request: Request) -> Response:
    await request.body()
    return JSONResponse({"ok": True}, status_code=409)


async def boom(request: Request) -> Response:
    raise RuntimeError("the handler broke")


def tiny_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/v1/sagas/{saga_id}", show),
            Route("/v1/approvals/{saga_id}/approve", approve, methods=["POST"]),
            Route("/boom", boom),
        ]
    )


@contextlib.contextmanager
def json_log() -> Iterator[io.StringIO]:
    """Lines of ``pivotal.http`` and of the app, as JSON lines."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JsonLines())
    handler.addFilter(SagaFieldsFilter())
    loggers = [logging.getLogger("pivotal.http"), APP_LOG]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        yield buffer
    finally:
        for log, level in zip(loggers, levels, strict=True):
            log.removeHandler(handler)
            log.setLevel(level)


def lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


async def test_one_line_per_request_with_the_saga_and_no_secrets() -> None:
    transport = httpx.ASGITransport(app=RequestLog(tiny_app()), raise_app_exceptions=False)
    headers = {"Authorization": f"Bearer {SECRET}", "Cookie": f"session={SECRET}"}
    with json_log() as buffer:
        async with httpx.AsyncClient(
            transport=transport, base_url="http://pivotal", headers=headers
        ) as client:
            shown = await client.get(f"/v1/sagas/big?token={SECRET}")
            refused = await client.post("/v1/approvals/big/approve", content=SECRET)
            broken = await client.get("/boom")
            missing = await client.get("/nowhere")
    assert shown.json() == {"saga_id": "big"}  # the handler runs under the saga's fields
    assert (refused.status_code, broken.status_code, missing.status_code) == (409, 500, 404)

    text = buffer.getvalue()
    assert SECRET not in text
    app_line, *requests = lines(buffer)
    assert (app_line["message"], app_line["saga_id"]) == ("showing", "big")
    assert [(r["method"], r["path"], r["status"], r.get("saga_id")) for r in requests] == [
        ("GET", "/v1/sagas/big", 200, "big"),
        ("POST", "/v1/approvals/big/approve", 409, "big"),
        ("GET", "/boom", 500, None),
        ("GET", "/nowhere", 404, None),
    ]
    for r in requests:
        assert r["logger"] == "pivotal.http"
        assert r["event"] == "http_request"
        assert 0 <= r["duration_seconds"] < 60
        assert r["message"].startswith(f"{r['method']} {r['path']} {r['status']} ")
        assert r["message"].endswith("ms")
    assert [r["level"] for r in requests] == ["info", "info", "warning", "info"]


@pytest.mark.parametrize(
    ("path", "saga_id"),
    [
        ("/v1/sagas/big", "big"),
        ("/v1/sagas/big/resume", "big"),
        ("/api/v1/sagas/s-1/events", "s-1"),
        ("/v1/approvals/big/reject", "big"),
        ("/ui/sagas/big", "big"),
        ("/ui/approvals/big", "big"),
        ("/v1/sagas", None),
        ("/v1/sagas/", None),
        ("/ui/sagas", None),
        ("/v1/dead-letters/3/retry", None),
        ("/v1/catalogues/checkout", None),
        ("/healthz", None),
        ("/", None),
        ("/v1/sagas/" + "x" * 129, None),
        ("/v1/sagas/a\nb", None),
    ],
)
def test_which_paths_name_a_saga(path: str, saga_id: str | None) -> None:
    assert saga_in_path(path) == saga_id


async def test_other_scopes_pass_through_without_a_line() -> None:
    seen: list[str] = []

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    async def receive() -> Message:
        return {"type": "lifespan.startup"}

    async def send(message: Message) -> None:
        return None

    with json_log() as buffer:
        await RequestLog(app)({"type": "lifespan"}, receive, send)
    assert seen == ["lifespan"]
    assert buffer.getvalue() == ""
