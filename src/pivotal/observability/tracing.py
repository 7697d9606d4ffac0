"""OpenTelemetry spans for sagas: one span per pass, one child span per action or undo call.

Every pass of a saga joins the trace the saga was submitted under: the orchestrator records
``Tracing.traceparent()`` with the saga, and each pass starts its span under the W3C trace
context stored in ``SagaState.traceparent`` (the first pass, one after an approval, one
after a crash on another worker, a resume). A call span becomes the current span while the
step runs, and the step receives its W3C header as ``ctx.traceparent`` so that its own HTTP
calls join the trace.

Needs the ``otel`` extra (``pip install "pivotal[otel]"``). This module imports without it;
``Tracing()`` then raises ``TracingUnavailable``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pivotal.engine.telemetry import Call, Telemetry
from pivotal.errors import PivotalError
from pivotal.observability.logs import ASGIApp, Message, Receive, Scope, Send, saga_in_path
from pivotal.sagas.state import Event, EventType, SagaState, SagaStatus

_MISSING: ImportError | None
try:
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - exercised in a fresh interpreter
    _MISSING = exc
else:
    _MISSING = None

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["ENV_TRACES", "TraceRequests", "Tracing", "TracingUnavailable", "from_environment"]

ENV_TRACES = "PIVOTAL_TRACES"  # console | otlp | off (the default)
SCOPE = "pivotal"
# Statuses a person has to look at: the pass span ends with an error status.
TROUBLED = frozenset({SagaStatus.COMPENSATION_FAILED, SagaStatus.NEEDS_HUMAN})
# Events the call spans already show; the others become events on the pass span.
SHOWN_BY_CALLS = frozenset(
    {
        EventType.STEP_STARTED,
        EventType.STEP_SUCCEEDED,
        EventType.UNDO_STARTED,
        EventType.UNDO_SUCCEEDED,
    }
)


class TracingUnavailable(PivotalError):
    """Tracing needs OpenTelemetry: pip install "pivotal[otel]"."""

    code = "tracing_unavailable"


@dataclass
class _Pass:
    """The span of the pass in progress, and the saga's status as last committed."""

    saga_id: str
    span: trace.Span
    status: SagaStatus


_current_pass: ContextVar[_Pass | None] = ContextVar("pivotal_trace_pass", default=None)


class Tracing(Telemetry):
    """Spans for saga passes and step calls, on ``provider`` (the global one by default)."""

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        if _MISSING is not None:
            raise TracingUnavailable() from _MISSING
        self.provider = provider
        self.tracer = trace.get_tracer(SCOPE, tracer_provider=provider)
        self._propagator = TraceContextTextMapPropagator()

    # -- trace context --------------------------------------------------------------------

    def traceparent(self) -> str | None:
        """The current span's W3C ``traceparent``; None without a valid current span."""
        return self._header(trace.get_current_span())

    def submission_trace(self, saga_id: str) -> str | None:
        """The current span's context; a saga submitted outside any span (``pivotal
        submit``, a script) gets a trace of its own: a ``pivotal.submit`` span, ended at
        once, under which every pass of the saga then runs (after an approval from another
        shell, a crash, a resume), instead of each pass starting a trace of its own."""
        current = self.traceparent()
        if current is not None:
            return current
        # no span is current: this one is a root
        span = self.tracer.start_span("pivotal.submit", attributes={"pivotal.saga_id": saga_id})
        span.end()
        return self._header(span)

    def _header(self, span: trace.Span) -> str | None:
        if not span.get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, context=trace.set_span_in_context(span))
        return carrier.get("traceparent")

    def extract(self, headers: Mapping[str, str]) -> Context:
        """The trace context W3C ``headers`` (``traceparent``, ``tracestate``) carry."""
        return self._propagator.extract(headers)

    def _parent(self, traceparent: str | None) -> Context | None:
        """The context a pass starts under: the submission's, when one was recorded."""
        if not traceparent:
            return None
        return self.extract({"traceparent": traceparent})

    # -- observing the engine -------------------------------------------------------------

    @contextlib.contextmanager
    def saga_pass(self, state: SagaState, owner: str) -> Iterator[None]:
        parent = self._parent(state.traceparent)
        with self.tracer.start_as_current_span(
            "pivotal.saga_pass",
            context=parent,
            attributes={
                "pivotal.saga_id": state.saga_id,
                "pivotal.catalogue": state.catalogue,
                "pivotal.owner": owner,
                "pivotal.status_before": state.status.value,
            },
        ) as span:
            current = _Pass(state.saga_id, span, state.status)
            token = _current_pass.set(current)
            try:
                yield
            finally:
                _current_pass.reset(token)
                span.set_attribute("pivotal.status", current.status.value)
                if current.status in TROUBLED:
                    span.set_status(trace.StatusCode.ERROR, current.status.value)

    def committed(
        self, before: SagaState | None, after: SagaState, events: Sequence[Event]
    ) -> None:
        current = _current_pass.get()
        if current is None or current.saga_id != after.saga_id:
            return
        current.status = after.status
        for event in events:
            if event.type in SHOWN_BY_CALLS:
                continue
            attributes: dict[str, str | int] = {"pivotal.status": after.status.value}
            if event.step is not None:
                attributes["pivotal.step_index"] = event.step
            if event.attempt is not None:
                attributes["pivotal.attempt"] = event.attempt
            current.span.add_event(event.type.value, attributes)

    @contextlib.contextmanager
    def call(self, call: Call) -> Iterator[None]:
        kind = "undo" if call.undo else "step"
        current = _current_pass.get()
        # Inside a pass of this saga the call nests under the pass span; a call made outside
        # one (a dead letter retried by hand) joins the saga's trace through its context.
        inside = current is not None and current.saga_id == call.saga_id
        with self.tracer.start_as_current_span(
            f"pivotal.{kind} {call.step}",
            context=None if inside else self._parent(call.traceparent),
            attributes={
                "pivotal.saga_id": call.saga_id,
                "pivotal.catalogue": call.catalogue,
                "pivotal.step": call.step,
                "pivotal.step_index": call.index,
                "pivotal.idempotency_key": call.key,
                "pivotal.attempt": call.attempt,
                "pivotal.undo": call.undo,
            },
        ) as span:
            header = self._header(span)
            if header is not None:
                call.traceparent = header
            try:
                yield
            finally:
                span.set_attribute("pivotal.outcome", call.outcome)
                if call.outcome != "succeeded":
                    span.set_status(trace.StatusCode.ERROR, call.outcome)

    def lease_lost(self, saga_id: str, owner: str) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event("lease_lost", {"pivotal.saga_id": saga_id, "pivotal.owner": owner})

    def close(self) -> None:
        """Flush and stop the provider (only one this ``Tracing`` was given or built)."""
        shutdown = getattr(self.provider, "shutdown", None)
        if callable(shutdown):
            shutdown()


class TraceRequests:
    """ASGI middleware: a server span per HTTP request, under the caller's W3C trace context
    (``traceparent``/``tracestate`` headers) when it sent one. The span is current while
    the app serves the request, so a saga submitted by it records the request's trace and
    every pass of that saga joins it."""

    def __init__(self, app: ASGIApp, tracing: Tracing) -> None:
        self.app = app
        self.tracing = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = str(scope.get("method", ""))
        path = str(scope.get("path", ""))
        carrier = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope.get("headers", ())
            if name.lower() in (b"traceparent", b"tracestate")
        }
        attributes: dict[str, str] = {"http.request.method": method, "url.path": path}
        saga_id = saga_in_path(path)
        if saga_id is not None:
            attributes["pivotal.saga_id"] = saga_id
        with self.tracing.tracer.start_as_current_span(
            f"HTTP {method}",
            context=self.tracing.extract(carrier),
            kind=trace.SpanKind.SERVER,
            attributes=attributes,
        ) as span:

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(trace.StatusCode.ERROR, str(status))
                await send(message)

            try:
                await self.app(scope, receive, sending)
            finally:
                route = getattr(scope.get("route"), "path", None)  # Starlette names it
                if isinstance(route, str):
                    span.set_attribute("http.route", route)
                    span.update_name(f"{method} {route}")


def from_environment(env: Mapping[str, str] | None = None) -> Tracing | None:
    """Tracing as ``PIVOTAL_TRACES`` asks: ``console`` (spans as JSON on stderr), ``otlp``
    (the OTLP exporter, configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables);
    absent, empty or ``off``: None. ``OTEL_SERVICE_NAME`` names the service (default
    ``pivotal``). The provider is private: the global one is left alone."""
    env = os.environ if env is None else env
    choice = env.get(ENV_TRACES, "").strip().lower()
    if choice in ("", "off", "none"):
        return None
    if choice not in ("console", "otlp"):
        raise TracingUnavailable(
            f"{ENV_TRACES}={choice!r} is not a trace exporter: use console, otlp or off"
        )
    if _MISSING is not None:
        raise TracingUnavailable() from _MISSING
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    service = env.get("OTEL_SERVICE_NAME", "").strip() or "pivotal"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if choice == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    else:
        provider.add_span_processor(BatchSpanProcessor(_otlp_exporter()))
    return Tracing(provider)


def _otlp_exporter() -> SpanExporter:
    """The OTLP span exporter: over HTTP when installed, else over gRPC."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
            OTLPSpanExporter,
        )
    except ImportError:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter,
            )
        except ImportError as exc:
            raise TracingUnavailable(
                f"{ENV_TRACES}=otlp needs the OTLP exporter: "
                "pip install opentelemetry-exporter-otlp"
            ) from exc
    exporter: SpanExporter = OTLPSpanExporter()
    return exporter
