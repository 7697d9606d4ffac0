"""The demo's planned scenario: the 002 worked example, end to end."""

from __future__ import annotations

from rich.console import Console

from pivotal import ActorType, SagaStatus
from pivotal.examples.commerce.demo import PLANNED, play_planned
from pivotal.planning import PlanningMode


async def test_the_goodwill_credit_is_rejected_then_the_replan_pauses_for_approval(
    orchestrator, app, services, ledger
) -> None:
    console = Console(record=True, width=120)
    scenario, state = await play_planned(orchestrator, app, "demo-planned", console)

    assert scenario.title == PLANNED
    assert state.status is scenario.expect is SagaStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert "amount=180 exceeds the approval threshold 150" in state.approval.reason
    assert "goodwill credit" in state.approval.rationale
    assert [c.call.name for c in scenario.plan.calls()] == [
        "reserve_stock",
        "authorize_payment",
        "capture_payment",
        "create_shipment",
        "send_confirmation",
    ]
    assert scenario.plan.provenance.actor_type is ActorType.AGENT
    assert scenario.plan.provenance.model == "scripted"
    assert services.calls("capture") == []
    assert [r["warehouse"] for r in services.rows("reservations")] == ["B"]

    [run] = await ledger.runs(PlanningMode.LIVE)
    assert [a.accepted for a in run.attempts] == [False, True]
    assert run.attempts[0].errors[0].step == "apply_goodwill_credit"

    text = console.export_text()
    assert "planner: scripted" in text
    assert "no model is called" in text
    assert "[unknown_step] steps[2].name:" in text
    assert "'apply_goodwill_credit' is not in" in text
    assert "paused for approval" in text
