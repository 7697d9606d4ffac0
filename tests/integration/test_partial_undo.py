"""Compensation is semantic: an undo that cannot restore what was there says so with
``Partial(note)``; it is settled (not retried, not dead-lettered), recorded as its own
event, announced, counted and shown, and the saga still ends compensated."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from rich.console import Console

from pivotal import (
    Catalogue,
    EventType,
    Partial,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    UndoStatus,
    parse_plan,
)
from pivotal.examples.commerce import Fault
from pivotal.observability.metrics import PivotalMetrics
from pivotal.sagas.state import replay
from pivotal.views.render import saga_view, steps_table


async def test_a_release_after_units_were_resold_is_partial_and_the_saga_compensated(
    orchestrator, store, services, faults, checkout_plan, check
) -> None:
    faults.always("ship", Fault.PERMANENT)
    services.resell("o-1", "sku-1", 1)  # one of the two reserved units went to another buyer

    state = await orchestrator.execute(checkout_plan("o-1"), saga_id="part")

    assert state.status is SagaStatus.COMPENSATED
    reserve, charge, _ = state.steps
    assert reserve.undo_status is UndoStatus.PARTIAL
    assert reserve.undo_attempts == 1  # settled: not retried
    assert charge.undo_status is UndoStatus.DONE
    assert state.dead_letters == ()
    assert "undone only in part: reserve_stock (step 0)" in (state.reason or "")
    assert services.available("sku-1", "A") == 49  # 50 - 2 reserved + 1 returned
    assert await store.dead_letters() == []

    events = await store.events("part")
    [partial] = [e for e in events if e.type is EventType.UNDO_PARTIAL]
    assert partial.step == 0
    assert "1 of 2 units" in partial.data["note"]
    assert [e.step for e in events if e.type is EventType.UNDO_SUCCEEDED] == [1]
    assert events[-1].type is EventType.SAGA_COMPENSATED
    assert replay(events) == state

    # announced with the event that records it
    [message] = [m for m in await store.messages(saga_id="part") if m.type == "step.undo_partial"]
    assert message.payload["saga_id"] == "part"
    assert message.payload["step"] == 0
    assert message.payload["step_name"] == "reserve_stock"
    assert message.payload["note"] == partial.data["note"]
    assert message.id == f"part:{partial.seq}"

    # counted
    metrics = PivotalMetrics()
    metrics.committed(None, state, events)
    labels = {"catalogue": "checkout", "step": "reserve_stock"}
    assert metrics.registry.get_sample_value("pivotal_undos_partial_total", labels) == 1
    assert (
        metrics.registry.get_sample_value("pivotal_undos_total", {**labels, "outcome": "partial"})
        == 1
    )
    await check("part")


async def test_sagas_show_lists_the_partial_undo_with_its_note(
    orchestrator, store, services, faults, checkout_plan
) -> None:
    faults.always("ship", Fault.PERMANENT)
    services.resell("o-1", "sku-1", 2)

    state = await orchestrator.execute(checkout_plan("o-1"), saga_id="shown")
    events = await store.events("shown")
    console = Console(width=200, record=True)
    console.print(steps_table(state, events))
    console.print(saga_view(state, events, None, "customer checkout"))
    text = console.export_text()

    assert "partial (1)" in text
    assert "undo_partial" in text
    assert "0 of 2 units back in stock" in text


class Refund(BaseModel):
    amount: int


def refunds(paid_out: int, calls: list[str]) -> Catalogue:
    cat = Catalogue("refunds")

    @cat.compensable(undo_retry=RetryPolicy(max_attempts=3, base_delay=0.0))
    async def charge(args: Refund, ctx: StepContext) -> dict[str, Any]:
        return {"charged": args.amount}

    @charge.undo
    async def refund(args: Refund, result: Any, ctx: StepContext) -> str:
        calls.append(ctx.key)
        if len(calls) == 1:
            raise ConnectionError("the bank did not answer")  # retried as usual
        if paid_out:
            back = args.amount - paid_out
            return Partial(f"refunded {back} of {args.amount}: {paid_out} was already paid out")
        return "refunded in full"

    @cat.pivot()
    async def fail(args: Refund, ctx: StepContext) -> None:
        raise Permanent("the order was cancelled")

    cat.check()
    return cat


def refund_plan() -> Any:
    return parse_plan(
        {
            "catalogue": "refunds",
            "steps": [
                {"name": "charge", "args": {"amount": 180}},
                {"name": "fail", "args": {"amount": 180}},
            ],
            "rationale": "a refund that only partly succeeds",
        }
    )


async def test_a_partial_refund_is_settled_after_a_retry(make_orchestrator, store) -> None:
    calls: list[str] = []
    orchestrator = make_orchestrator(refunds(30, calls))

    state = await orchestrator.execute(refund_plan(), saga_id="refund")

    assert calls == ["refund:0:undo", "refund:0:undo"]
    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].undo_status is UndoStatus.PARTIAL
    assert state.steps[0].undo_attempts == 2
    events = await store.events("refund")
    kinds = [e.type for e in events if e.step == 0 and e.type.value.startswith("undo")]
    assert kinds == [
        EventType.UNDO_STARTED,
        EventType.UNDO_RETRY_SCHEDULED,
        EventType.UNDO_STARTED,
        EventType.UNDO_PARTIAL,
    ]
    assert events[-1].data["reason"].endswith("undone only in part: charge (step 0)")
    assert await orchestrator.replayed("refund") == state


async def test_a_full_refund_is_not_partial(make_orchestrator, store) -> None:
    orchestrator = make_orchestrator(refunds(0, []))

    state = await orchestrator.execute(refund_plan(), saga_id="full")

    assert state.steps[0].undo_status is UndoStatus.DONE
    assert "in part" not in (state.reason or "")
    assert not [e for e in await store.events("full") if e.type is EventType.UNDO_PARTIAL]


def test_partial_is_a_note() -> None:
    note = Partial("refunded 150 of 180")
    assert isinstance(note, str)
    assert note == "refunded 150 of 180"


async def test_the_review_report_counts_and_lists_the_partial_undos(
    orchestrator, store, services, faults, checkout_plan, clock
) -> None:
    from pivotal.cli.report import render
    from pivotal.views.report import Period, build_report

    faults.always("ship", Fault.PERMANENT)
    services.resell("o-1", "sku-1", 1)
    await orchestrator.execute(checkout_plan("o-1"), saga_id="rep")
    await orchestrator.execute(checkout_plan("o-2"), saga_id="whole")

    now = clock.now()
    report = await build_report(store, Period.parse("7d", None, now), now=now)

    assert report.partial_undos == 1
    entries = {s.saga_id: s for g in report.causes for s in g.sagas}
    [partial] = entries["rep"].partial_undos
    assert (partial.step, partial.index) == ("reserve_stock", 0)
    assert "1 already re-sold" in (partial.note or "")
    assert entries["whole"].partial_undos == []
    console = Console(width=200, record=True)
    console.print(render(report))
    text = console.export_text()
    assert "undone only in part: 1 undo" in text
    assert "reserve_stock (step 0)" in text
