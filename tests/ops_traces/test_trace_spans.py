"""OpenTelemetry spans: one per saga pass, one per action or undo call, all in the trace the
saga was submitted under. Spans go to an in-memory exporter on a private provider."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from pivotal import Abort, Catalogue, FakeClock, Orchestrator, SagaStatus, StepContext, parse_plan
from pivotal.examples.commerce import CommerceApp, Fault, Faults
from pivotal.examples.commerce.catalogues import ReserveStock
from pivotal.observability.tracing import Tracing
from pivotal.store import Store

CHARGE_FIRST = ("charge_payment", "reserve_stock", "create_shipment")


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


@pytest.fixture
def traced(
    store: Store, app: CommerceApp, clock: FakeClock, provider: TracerProvider, exporter: Any
) -> Orchestrator:
    return Orchestrator(
        store, app, clock=clock, rng=random.Random(0), telemetry=[Tracing(provider)]
    )


def named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def ids(header: str | None) -> tuple[int, int]:
    """The trace id and span id in a W3C ``traceparent`` header (sampled)."""
    assert header is not None
    version, trace_id, span_id, flags = header.split("-")
    assert version == "00"
    assert int(flags, 16) & 1  # sampled
    return int(trace_id, 16), int(span_id, 16)


def ids_of(span: trace.Span | ReadableSpan) -> tuple[int, int]:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.trace_id, ctx.span_id


async def test_a_completed_saga_has_a_pass_span_and_a_span_per_step(
    traced: Orchestrator, exporter: InMemorySpanExporter, checkout_plan: Any
) -> None:
    state = await traced.execute(checkout_plan("o-1"), saga_id="ok")
    assert state.status is SagaStatus.COMPLETED

    spans = exporter.get_finished_spans()
    [saga_pass] = named(spans, "pivotal.saga_pass")
    [submitted] = named(spans, "pivotal.submit")
    steps = named(spans, "pivotal.step ")
    assert len(spans) == 2 + len(steps)
    assert [s.name for s in steps] == [
        "pivotal.step reserve_stock",
        "pivotal.step charge_payment",
        "pivotal.step create_shipment",
    ]
    assert attrs(saga_pass) == {
        "pivotal.saga_id": "ok",
        "pivotal.catalogue": "checkout",
        "pivotal.owner": traced.owner,
        "pivotal.status_before": "submitted",
        "pivotal.status": "completed",
    }
    assert saga_pass.status.status_code is StatusCode.UNSET
    assert submitted.parent is None  # submitted under no trace: the submission starts one
    assert saga_pass.parent is not None
    assert saga_pass.parent.span_id == ids_of(submitted)[1]
    trace_id = ids_of(saga_pass)[0]
    for index, span in enumerate(steps):
        assert span.parent is not None
        assert span.parent.span_id == ids_of(saga_pass)[1]
        assert ids_of(span)[0] == trace_id
        assert attrs(span) == {
            "pivotal.saga_id": "ok",
            "pivotal.catalogue": "checkout",
            "pivotal.step": span.name.split()[-1],
            "pivotal.step_index": index,
            "pivotal.idempotency_key": f"ok:{index}",
            "pivotal.attempt": 1,
            "pivotal.undo": False,
            "pivotal.outcome": "succeeded",
        }
        assert span.status.status_code is StatusCode.UNSET
    # ``execute`` creates the saga with the first commit of this pass: its submission shows
    assert [e.name for e in saga_pass.events] == ["saga_submitted", "saga_completed"]


async def test_a_compensated_saga_has_undo_spans_newest_first(
    traced: Orchestrator, exporter: InMemorySpanExporter, faults: Faults, checkout_plan: Any
) -> None:
    faults.always("ship", Fault.PERMANENT)

    state = await traced.execute(checkout_plan("o-1", order=CHARGE_FIRST), saga_id="comp")
    assert state.status is SagaStatus.COMPENSATED

    spans = exporter.get_finished_spans()
    [saga_pass] = named(spans, "pivotal.saga_pass")
    assert attrs(saga_pass)["pivotal.status"] == "compensated"
    [ship] = named(spans, "pivotal.step create_shipment")
    assert attrs(ship)["pivotal.outcome"] == "permanent"
    assert ship.status.status_code is StatusCode.ERROR
    undos = named(spans, "pivotal.undo ")
    assert [s.name for s in undos] == ["pivotal.undo reserve_stock", "pivotal.undo charge_payment"]
    for span, index in zip(undos, (1, 0), strict=True):
        assert attrs(span)["pivotal.undo"] is True
        assert attrs(span)["pivotal.idempotency_key"] == f"comp:{index}:undo"
        assert attrs(span)["pivotal.step_index"] == index
        assert attrs(span)["pivotal.outcome"] == "succeeded"
        assert span.parent is not None
        assert span.parent.span_id == ids_of(saga_pass)[1]
    names = [e.name for e in saga_pass.events]
    assert names[:2] == ["saga_submitted", "step_failed"]  # created by the pass's first commit
    assert "compensation_started" in names
    assert names[-1] == "saga_compensated"


async def test_every_pass_joins_the_trace_the_saga_was_submitted_under(
    traced: Orchestrator,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    fulfilment_plan: Any,
) -> None:
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("POST /v1/sagas") as request:
        submitted = await traced.submit(fulfilment_plan("4471", amount="180.00"), saga_id="big")
    assert ids(submitted.traceparent) == ids_of(request)
    assert (await traced.get("big")).state.traceparent == submitted.traceparent  # durable

    # outside any span now, as a worker would be
    assert (await traced.run("big")).status is SagaStatus.AWAITING_APPROVAL
    assert (await traced.approve("big", "maria", "known customer")).status is (SagaStatus.COMPLETED)

    spans = exporter.get_finished_spans()
    passes = named(spans, "pivotal.saga_pass")
    assert [attrs(p)["pivotal.status"] for p in passes] == ["awaiting_approval", "completed"]
    for span in passes:
        assert span.parent is not None
        assert span.parent.span_id == ids_of(request)[1]
    assert {ids_of(s)[0] for s in spans} == {ids_of(request)[0]}
    assert "approval_requested" in [e.name for e in passes[0].events]
    steps = [s.name.split()[-1] for s in named(spans, "pivotal.step ")]
    assert steps == [
        "reserve_stock",
        "authorize_payment",
        "capture_payment",
        "create_shipment",
        "send_confirmation",
    ]


async def test_retried_attempts_are_separate_spans_with_their_attempt_numbers(
    traced: Orchestrator, exporter: InMemorySpanExporter, faults: Faults, checkout_plan: Any
) -> None:
    faults.next("reserve", Fault.TRANSIENT, Fault.TRANSIENT)

    assert (await traced.execute(checkout_plan("o-1"), saga_id="tr")).status is (
        SagaStatus.COMPLETED
    )

    reserves = named(exporter.get_finished_spans(), "pivotal.step reserve_stock")
    assert [attrs(s)["pivotal.attempt"] for s in reserves] == [1, 2, 3]
    assert [attrs(s)["pivotal.outcome"] for s in reserves] == [
        "transient",
        "transient",
        "succeeded",
    ]
    assert [s.status.status_code for s in reserves] == [
        StatusCode.ERROR,
        StatusCode.ERROR,
        StatusCode.UNSET,
    ]
    assert {attrs(s)["pivotal.idempotency_key"] for s in reserves} == {"tr:0"}
    assert len({ids_of(s)[1] for s in reserves}) == 3


async def test_action_and_undo_get_the_traceparent_of_their_own_call_span(
    store: Store,
    clock: FakeClock,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    seen: list[tuple[str | None, tuple[int, int]]] = []
    catalogue = Catalogue("traced")

    def note(ctx: StepContext) -> None:
        seen.append((ctx.traceparent, ids_of(trace.get_current_span())))

    async def release(args: ReserveStock, result: Any, ctx: StepContext) -> None:
        note(ctx)

    @catalogue.compensable(undo=release)
    async def reserve_stock(args: ReserveStock, ctx: StepContext) -> dict[str, Any]:
        note(ctx)
        return {"reserved": ctx.key}

    async def forget(args: ReserveStock, result: Any, ctx: StepContext) -> None:
        raise AssertionError("a step that took no effect is never undone")

    @catalogue.compensable(undo=forget)
    async def fraud_check(args: ReserveStock, ctx: StepContext) -> None:
        raise Abort("the fraud check says no")

    orchestrator = Orchestrator(store, catalogue, clock=clock, telemetry=[Tracing(provider)])
    args = {"order_id": "o-1", "sku": "sku-1", "quantity": 1, "warehouse": "A"}
    steps = [{"name": "reserve_stock", "args": args}, {"name": "fraud_check", "args": args}]
    plan = parse_plan({"catalogue": "traced", "steps": steps})
    assert (await orchestrator.execute(plan, saga_id="tp")).status is SagaStatus.COMPENSATED

    spans = exporter.get_finished_spans()
    [action] = named(spans, "pivotal.step reserve_stock")
    [undo] = named(spans, "pivotal.undo reserve_stock")
    [check] = named(spans, "pivotal.step fraud_check")
    assert attrs(check)["pivotal.outcome"] == "abort"
    assert len(seen) == 2
    for (given, current), span in zip(seen, (action, undo), strict=True):
        assert ids(given) == ids_of(span)
        assert current == ids_of(span)  # the call span is current while the step runs


async def test_a_dead_letter_retried_later_joins_the_saga_trace(
    traced: Orchestrator,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    faults: Faults,
    checkout_plan: Any,
) -> None:
    faults.always("ship", Fault.PERMANENT).always("release", Fault.PERMANENT)
    with provider.get_tracer("test").start_as_current_span("submit") as request:
        await traced.submit(checkout_plan("o-1", order=CHARGE_FIRST), saga_id="dl")
    assert (await traced.run("dl")).status is SagaStatus.COMPENSATION_FAILED
    [saga_pass] = named(exporter.get_finished_spans(), "pivotal.saga_pass")
    assert saga_pass.status.status_code is StatusCode.ERROR  # a person has to look
    assert attrs(saga_pass)["pivotal.status"] == "compensation_failed"
    exporter.clear()

    faults.clear()
    [letter] = await traced.store.dead_letters()
    assert await traced.retry_dead_letter(letter.id)

    [undo] = named(exporter.get_finished_spans(), "pivotal.undo reserve_stock")
    assert attrs(undo)["pivotal.outcome"] == "succeeded"
    assert ids_of(undo)[0] == ids_of(request)[0]
    assert undo.parent is not None
    assert undo.parent.span_id == ids_of(request)[1]


async def test_members_of_a_parallel_group_nest_under_the_pass(
    traced: Orchestrator, exporter: InMemorySpanExporter, app: CommerceApp
) -> None:
    # an open order of two lines for 20.00; the plan reserves each line once, both from
    # warehouse A, the one the shipment leaves from (reservations and shipment must agree)
    lines = [{"sku": "sku-1", "quantity": 1}, {"sku": "sku-2", "quantity": 1}]
    app.services.order(
        "p-1", customer="c-p-1", amount="20.00", lines=lines, recipient="p-1@example.com"
    )
    member: dict[str, Any] = {
        "name": "reserve_stock",
        "args": {"order_id": "p-1", "sku": "sku-1", "quantity": 1},
    }
    other = {**member, "args": {**member["args"], "sku": "sku-2", "warehouse": "A"}}
    plan = parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {"parallel": [member, other]},
                {"name": "charge_payment", "args": {"order_id": "p-1", "amount": "20.00"}},
                {"name": "create_shipment", "args": {"order_id": "p-1"}},
            ],
        }
    )
    assert (await traced.execute(plan, saga_id="par")).status is SagaStatus.COMPLETED

    spans = exporter.get_finished_spans()
    [saga_pass] = named(spans, "pivotal.saga_pass")
    reserves = named(spans, "pivotal.step reserve_stock")
    assert sorted(attrs(s)["pivotal.idempotency_key"] for s in reserves) == ["par:0", "par:1"]
    for span in named(spans, "pivotal.step "):
        assert span.parent is not None
        assert span.parent.span_id == ids_of(saga_pass)[1]


async def test_a_saga_submitted_outside_any_trace_gets_one_that_every_pass_joins(
    traced: Orchestrator,
    exporter: InMemorySpanExporter,
    fulfilment_plan: Any,
) -> None:
    """``pivotal submit`` in one shell, ``approvals approve --run`` in another: one trace."""
    submitted = await traced.submit(fulfilment_plan("4471", amount="180.00"), saga_id="cli")
    assert submitted.traceparent is not None
    [root] = named(exporter.get_finished_spans(), "pivotal.submit")
    assert root.parent is None
    assert attrs(root)["pivotal.saga_id"] == "cli"
    assert ids(submitted.traceparent) == ids_of(root)

    assert (await traced.run("cli")).status is SagaStatus.AWAITING_APPROVAL
    assert (await traced.approve("cli", "maria", "known customer")).status is (SagaStatus.COMPLETED)

    spans = exporter.get_finished_spans()
    passes = named(spans, "pivotal.saga_pass")
    assert len(passes) == 2
    assert all(p.parent is not None and p.parent.span_id == root.context.span_id for p in passes)
    assert {ids_of(s)[0] for s in spans} == {root.context.trace_id}
