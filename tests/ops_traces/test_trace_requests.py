"""HTTP requests as server spans: a saga submitted by a request joins the caller's trace,
and so does every later pass of it."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pivotal import FakeClock, Orchestrator, SagaStatus
from pivotal.cli.serve import uvicorn_config
from pivotal.examples.commerce import CommerceApp
from pivotal.observability.logs import RequestLog
from pivotal.observability.tracing import TraceRequests, Tracing
from pivotal.store import Store

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CALLER = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    provider = TracerProvider()
    yield provider
    provider.shutdown()


@pytest.fixture
def exporter(provider: TracerProvider) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def client(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://pivotal")


async def test_a_saga_submitted_by_a_request_joins_the_callers_trace(
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    checkout_plan: Any,
) -> None:
    tracing = Tracing(provider)
    orchestrator = Orchestrator(store, app, clock=clock, rng=random.Random(0), telemetry=[tracing])

    async def submit(request: Request) -> Response:
        state = await orchestrator.submit(checkout_plan("o-1"), saga_id="web")
        return JSONResponse({"traceparent": state.traceparent}, status_code=201)

    web = Starlette(routes=[Route("/v1/sagas", submit, methods=["POST"])])
    async with client(TraceRequests(web, tracing)) as http:
        reply = await http.post("/v1/sagas", headers={"traceparent": CALLER})
    assert reply.status_code == 201

    [server] = exporter.get_finished_spans()
    assert server.kind is SpanKind.SERVER
    assert server.name == "POST /v1/sagas"
    assert server.parent is not None
    assert (f"{server.parent.trace_id:032x}", f"{server.parent.span_id:016x}") == (
        CALLER_TRACE,
        CALLER_SPAN,
    )
    assert dict(server.attributes or {}) == {
        "http.request.method": "POST",
        "url.path": "/v1/sagas",
        "http.response.status_code": 201,
        "http.route": "/v1/sagas",
    }
    ctx = server.get_span_context()
    assert ctx is not None
    assert reply.json()["traceparent"].startswith(f"00-{CALLER_TRACE}-{ctx.span_id:016x}-")

    # a worker runs it later, outside any request: its pass is a child of the request
    assert (await orchestrator.run("web")).status is SagaStatus.COMPLETED
    [saga_pass] = [s for s in exporter.get_finished_spans() if s.name == "pivotal.saga_pass"]
    assert saga_pass.parent is not None
    assert saga_pass.parent.span_id == ctx.span_id
    assert {f"{s.context.trace_id:032x}" for s in exporter.get_finished_spans() if s.context} == {
        CALLER_TRACE
    }


async def test_requests_without_a_caller_trace_start_one_and_errors_are_marked(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def show(request: Request) -> Response:
        return JSONResponse({})

    async def boom(request: Request) -> Response:
        raise RuntimeError("broken")

    web = Starlette(routes=[Route("/ui/sagas/{saga_id}", show), Route("/boom", boom)])
    async with client(TraceRequests(web, Tracing(provider))) as http:
        assert (await http.get("/ui/sagas/big")).status_code == 200
        assert (await http.get("/boom")).status_code == 500
        assert (await http.get("/nowhere")).status_code == 404

    shown, broken, missing = exporter.get_finished_spans()
    assert shown.parent is None
    assert shown.name == "GET /ui/sagas/{saga_id}"
    assert dict(shown.attributes or {})["pivotal.saga_id"] == "big"
    assert broken.status.status_code is StatusCode.ERROR
    assert missing.name == "HTTP GET"  # no route matched: no template to name it by
    assert missing.status.status_code is StatusCode.UNSET


def test_serve_traces_requests_when_tracing_is_on(provider: TracerProvider) -> None:
    web = Starlette()
    assert isinstance(uvicorn_config(web, "127.0.0.1", 0).app, RequestLog)
    traced = uvicorn_config(web, "127.0.0.1", 0, tracing=Tracing(provider)).app
    assert isinstance(traced, TraceRequests)
    assert isinstance(traced.app, RequestLog)
