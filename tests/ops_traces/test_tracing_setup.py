"""Choosing tracing from the environment, the trace context recorded at submit, and a
package that imports without OpenTelemetry."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pivotal.errors import PivotalError
from pivotal.observability.tracing import Tracing, TracingUnavailable, from_environment


def test_traceparent_is_the_current_span_or_none() -> None:
    provider = TracerProvider()
    tracer = Tracing(provider)
    assert tracer.traceparent() is None
    with provider.get_tracer("t").start_as_current_span("outer") as span:
        ctx = span.get_span_context()
        header = tracer.traceparent()
    assert header is not None
    assert header.startswith(f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-")
    assert tracer.traceparent() is None
    provider.shutdown()


@pytest.mark.parametrize("env", [{}, {"PIVOTAL_TRACES": ""}, {"PIVOTAL_TRACES": "off"}])
def test_no_tracing_unless_asked(env: dict[str, str]) -> None:
    assert from_environment(env) is None


def test_console_tracing_writes_spans_on_stderr_under_the_service_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    found = from_environment({"PIVOTAL_TRACES": "Console", "OTEL_SERVICE_NAME": "shop"})
    assert isinstance(found, Tracing)
    assert isinstance(found.provider, TracerProvider)
    with found.tracer.start_as_current_span("one"):
        pass
    found.close()
    span = json.loads(err.getvalue())
    assert span["name"] == "one"
    assert span["resource"]["attributes"]["service.name"] == "shop"


def test_an_unknown_exporter_is_refused_with_the_choices() -> None:
    with pytest.raises(TracingUnavailable, match="console, otlp or off"):
        from_environment({"PIVOTAL_TRACES": "jaeger"})


def test_otlp_without_its_exporter_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for transport in ("http", "grpc"):
        name = f"opentelemetry.exporter.otlp.proto.{transport}.trace_exporter"
        monkeypatch.setitem(sys.modules, name, None)  # importing it fails
    with pytest.raises(TracingUnavailable, match="pip install opentelemetry-exporter-otlp") as e:
        from_environment({"PIVOTAL_TRACES": "otlp"})
    assert isinstance(e.value, PivotalError)
    assert e.value.code == "tracing_unavailable"


def test_a_tracing_given_a_provider_closes_it() -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    Tracing(provider).close()
    with provider.get_tracer("t").start_as_current_span("after"):
        pass
    assert exporter.get_finished_spans() == ()  # shut down: nothing more is exported
    Tracing().close()  # the global provider is never shut down by us


def test_the_package_imports_without_opentelemetry() -> None:
    probe = textwrap.dedent(
        """
        import sys
        for name in ("opentelemetry", "opentelemetry.trace"):
            sys.modules[name] = None  # as if the otel extra were not installed
        from pivotal.observability.tracing import Tracing, TracingUnavailable, from_environment
        import pivotal.observability.logs, pivotal.cli._progress, pivotal.cli.serve
        assert from_environment({}) is None
        for attempt in (Tracing, lambda: from_environment({"PIVOTAL_TRACES": "console"})):
            try:
                attempt()
            except TracingUnavailable as exc:
                print(exc)
            else:
                raise SystemExit("no error")
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.splitlines()
        == ['Tracing needs OpenTelemetry: pip install "pivotal[otel]".'] * 2
    )
