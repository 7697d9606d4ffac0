"""The review report over a real ledger (both backends): causes, provenance, the period,
the planner's rejections, and a report cut short by its limit saying so."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from report_ledger import AGENT, PERSON, Ledger

from pivotal import FakeClock, Orchestrator
from pivotal.declarations.policy import DAY
from pivotal.examples.commerce import CommerceServices, Fault, Faults
from pivotal.sagas.state import SagaStatus
from pivotal.store import Store
from pivotal.views.report import (
    CauseKind,
    InvalidPeriod,
    Period,
    Report,
    build_report,
    parse_moment,
)

NOW = 1_800_000_000.0


async def report_of(ledger: Ledger, since: str = "7d", limit: int = 1000) -> Report:
    period = Period.parse(since, None, ledger.now)
    return await build_report(ledger.store, period, now=ledger.now, limit=limit)


def groups(report: Report) -> dict[str, list[str]]:
    return {g.cause.label: [s.saga_id for s in g.sagas] for g in report.causes}


async def test_sagas_of_the_period_are_grouped_by_cause(reviewed: Ledger) -> None:
    report = await report_of(reviewed)
    assert groups(report) == {
        "charge_payment: permanent": ["declined-2", "declined"],
        "capture_payment: approval expired": ["expired"],
        "capture_payment: approval rejected": ["rejected"],
        "create_shipment: unknown after the point of no return": ["stuck"],
        "poison": ["poison"],
        "undo dead-lettered: reserve_stock": ["undo-failed"],
    }
    assert [g.count for g in report.causes] == [2, 1, 1, 1, 1, 1]  # largest first
    assert report.sagas == 7
    assert report.by_status == {"compensated": 4, "compensation_failed": 1, "needs_human": 2}
    assert not report.truncated
    assert report.truncated_lists == []
    kinds = {g.cause.label: g.cause.kind for g in report.causes}
    assert kinds["poison"] is CauseKind.POISON
    assert kinds["create_shipment: unknown after the point of no return"] is (
        CauseKind.FAILED_AFTER_POINT_OF_NO_RETURN
    )
    declined = report.causes[0]
    assert declined.cause.step == "charge_payment"
    assert declined.cause.outcome == "permanent"
    assert declined.statuses == {"compensated": 2}


async def test_each_saga_has_its_reason_and_who_proposed_it(reviewed: Ledger) -> None:
    report = await report_of(reviewed)
    entries = {s.saga_id: s for g in report.causes for s in g.sagas}
    declined = entries["declined"]
    assert declined.provenance == AGENT
    assert declined.provenance_ref == AGENT.ref()
    assert declined.provenance is not None
    assert declined.provenance.on_behalf_of == "alice"
    assert declined.provenance.model == "gpt-test"
    assert declined.provenance.prompt_version == "checkout-v3"
    assert declined.reason is not None
    assert declined.reason.startswith("charge_payment (step 1) failed: Permanent")
    assert entries["expired"].provenance == PERSON
    rejected = entries["rejected"]
    assert rejected.reason == (
        "approval for capture_payment rejected by carol: customer asked to cancel"
    )
    assert rejected.status is SagaStatus.COMPENSATED
    failed = entries["undo-failed"]
    assert failed.status is SagaStatus.COMPENSATION_FAILED
    assert failed.trigger is not None
    assert failed.trigger.label == "create_shipment: permanent"  # what started compensation
    assert entries["poison"].reason is not None
    assert entries["poison"].reason.startswith("poison")
    assert "fine" not in entries  # completed
    assert "waits" not in entries  # awaiting approval


async def test_only_sagas_that_ended_in_the_period_are_listed(reviewed: Ledger) -> None:
    everything = await report_of(reviewed, since="30d")
    assert "old-declined" in groups(everything)["charge_payment: permanent"]
    assert everything.sagas == 8
    assert (
        "old-declined"
        not in groups(await report_of(reviewed, since="7d"))["charge_payment: permanent"]
    )

    # until a day after the old sagas: only what happened then
    then = dt.datetime.fromtimestamp(reviewed.old + DAY, dt.UTC).isoformat()
    period = Period.parse("30d", then, reviewed.now)
    early = await build_report(reviewed.store, period, now=reviewed.now)
    assert groups(early) == {"charge_payment: permanent": ["old-declined"]}
    assert early.planner.runs == 1
    assert [e.request_id for e in early.planner.escalations] == ["req-0"]


async def test_the_planners_rejections_of_the_period_are_counted(reviewed: Ledger) -> None:
    planner = (await report_of(reviewed)).planner
    assert planner.runs == 2
    assert planner.outcomes == {"live": {"accepted": 1, "escalated": 1}}
    assert planner.rejected_attempts == 3
    codes = {c.code: (c.errors, c.attempts, c.validator) for c in planner.codes}
    assert codes == {"unknown_step": (2, 2, True), "invalid_args": (1, 1, True)}
    assert planner.codes[0].code == "unknown_step"  # most frequent first
    [escalation] = planner.escalations
    assert escalation.request_id == "req-2"
    assert escalation.status == "open"
    assert escalation.codes == ["unknown_step"]  # of its last attempt
    assert escalation.planner == "agent:scripted model=scripted"
    assert "no valid plan after 2 attempt(s)" in escalation.reason


async def test_a_limit_that_cuts_a_list_makes_the_report_say_it_is_partial(
    reviewed: Ledger,
) -> None:
    report = await report_of(reviewed, limit=2)
    assert report.truncated
    assert "sagas (compensated)" in report.truncated_lists
    assert "planning runs (live)" in report.truncated_lists
    assert report.limit == 2
    assert report.sagas < 7


async def test_an_empty_period_reports_nothing(reviewed: Ledger) -> None:
    period = Period(reviewed.now + 10, reviewed.now + 20)
    report = await build_report(reviewed.store, period, now=reviewed.now)
    assert (report.sagas, report.causes, report.planner.runs) == (0, [], 0)
    assert report.by_status == {"compensated": 0, "compensation_failed": 0, "needs_human": 0}


# -- the period ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "back"),
    [("7d", 7 * DAY), ("24h", DAY), ("30m", 1800), ("45s", 45), ("2w", 14 * DAY), (" 1d ", DAY)],
)
def test_a_duration_counts_back_from_now(text: str, back: float) -> None:
    assert parse_moment(text, NOW) == NOW - back


def test_an_iso_date_is_utc_unless_it_says_otherwise() -> None:
    midnight = dt.datetime(2026, 11, 1, tzinfo=dt.UTC).timestamp()
    assert parse_moment("2026-11-01", NOW) == midnight
    assert parse_moment("2026-11-01T02:00:00+02:00", NOW) == midnight


@pytest.mark.parametrize("text", ["", "7", "d7", "7 days", "-7d", "yesterday", "2026-13-01"])
def test_anything_else_is_refused_with_a_clear_error(text: str) -> None:
    with pytest.raises(InvalidPeriod, match="neither a duration"):
        parse_moment(text, NOW)


def test_a_period_must_start_before_it_ends() -> None:
    with pytest.raises(InvalidPeriod, match="at or after it ends"):
        Period.parse("1d", "2d", NOW)
    assert Period.parse("2d", "1d", NOW) == Period(NOW - 2 * DAY, NOW - DAY)
    assert InvalidPeriod.code == "invalid_period"


async def test_causes_at_the_point_of_no_return(
    orchestrator: Orchestrator,
    store: Store,
    clock: FakeClock,
    faults: Faults,
    services: CommerceServices,
    fulfilment_plan: Any,
) -> None:
    # approved, but the order was cancelled meanwhile: the capture's precondition fails
    await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="stale")
    services.set_order_status("4471", "cancelled")
    state = await orchestrator.approve("stale", "carol")
    assert state.status is SagaStatus.COMPENSATED
    # the capture's client fails and no lookup can tell whether it took effect
    faults.next("capture", Fault.ERROR_BEFORE_EFFECT).always("find", Fault.TRANSIENT)
    state = await orchestrator.execute(fulfilment_plan(), saga_id="doubt")
    assert state.status is SagaStatus.NEEDS_HUMAN
    faults.clear()

    period = Period.parse("1h", None, clock.now())
    report = await build_report(store, period, now=clock.now())
    found = {g.cause.label: (g.cause.kind, [s.saga_id for s in g.sagas]) for g in report.causes}
    assert found == {
        "capture_payment: precondition": (CauseKind.STEP_FAILED, ["stale"]),
        "capture_payment: outcome unknown at the point of no return": (
            CauseKind.POINT_OF_NO_RETURN_UNKNOWN,
            ["doubt"],
        ),
    }
