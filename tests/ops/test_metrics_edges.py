"""``PivotalMetrics`` on odd input, poison sagas, lost leases and an unreadable ledger: it
never raises into the engine, and a failed ledger read never breaks a scrape."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
from prometheus_client import generate_latest
from pydantic import BaseModel

from pivotal import Catalogue, FakeClock, Orchestrator, SagaStatus, StepContext, parse_plan
from pivotal.engine.telemetry import Call, Telemetry
from pivotal.observability.metrics import PivotalMetrics
from pivotal.sagas.state import (
    ApprovalRecord,
    ApprovalStatus,
    Event,
    EventType,
    SagaState,
    StepRecord,
)
from pivotal.store import Store
from pivotal.store.base import OpsSnapshot

NOW = 1_800_000_000.0


def saga(**changes: Any) -> SagaState:
    base: dict[str, Any] = {
        "saga_id": "s",
        "catalogue": "checkout",
        "plan_digest": "d",
        "provenance_ref": "p",
        "status": SagaStatus.RUNNING,
        "steps": (StepRecord(index=0, name="reserve_stock", kind="compensable"),),
        "created_at": NOW,
        "updated_at": NOW,
    }
    return SagaState(**{**base, **changes})


def value(metrics: PivotalMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_events_naming_no_step_are_counted_under_unknown() -> None:
    metrics = PivotalMetrics()
    after = saga()
    events = [
        Event(EventType.STEP_SUCCEEDED, NOW, step=7, data={"via": 3}),
        Event(EventType.STEP_FAILED, NOW, step=-1, data={}),
        Event(EventType.UNDO_SUCCEEDED, NOW, step=None, data={"noop": "yes"}),
        Event(EventType.UNDO_DEAD_LETTERED, NOW, step=0, data={}),
    ]

    metrics.committed(None, after, events)

    steps = {"catalogue": "checkout", "step": "unknown"}
    assert value(metrics, "pivotal_steps_total", outcome="succeeded", **steps) == 1
    assert value(metrics, "pivotal_steps_total", outcome="failed", **steps) == 1
    assert value(metrics, "pivotal_undos_total", outcome="done", **steps) == 1
    dead = {"catalogue": "checkout", "step": "reserve_stock", "outcome": "dead_lettered"}
    assert value(metrics, "pivotal_undos_total", **dead) == 1


def test_decisions_and_endings_without_their_records_do_not_raise() -> None:
    metrics = PivotalMetrics()
    after = saga(status=SagaStatus.COMPENSATED, approval=None, compensating_since=None)
    events = [
        Event(EventType.APPROVAL_GRANTED, NOW, step=0),
        Event(EventType.APPROVAL_REJECTED, NOW, step=0),
        Event(EventType.SAGA_COMPENSATED, NOW - 50),  # before it was created: no negative time
    ]

    metrics.committed(saga(), after, events)

    rejected = {"catalogue": "checkout", "decision": "rejected"}
    assert value(metrics, "pivotal_approvals_total", **rejected) == 1
    assert value(metrics, "pivotal_approval_wait_seconds_count", **rejected) is None
    assert (
        value(metrics, "pivotal_approvals_total", catalogue="checkout", decision="granted") is None
    )
    finished = {"catalogue": "checkout", "status": "compensated"}
    assert value(metrics, "pivotal_saga_duration_seconds_sum", **finished) == 0
    assert value(metrics, "pivotal_compensation_duration_seconds_count", **finished) is None


def test_only_the_grant_that_completes_the_approvers_is_a_decision() -> None:
    metrics = PivotalMetrics()
    pending = ApprovalRecord(
        step=0,
        status=ApprovalStatus.PENDING,
        reason="r",
        rationale="",
        requested_at=NOW,
        expires_at=NOW + 100,
        required=2,
        approved_by=("ana",),
    )
    first = Event(EventType.APPROVAL_GRANTED, NOW + 10, step=0, data={"approver": "ana"})
    metrics.committed(saga(), saga(approval=pending), [first])
    granted = {"catalogue": "checkout", "decision": "granted"}
    assert value(metrics, "pivotal_approvals_total", **granted) is None

    approved = ApprovalRecord(
        step=0,
        status=ApprovalStatus.APPROVED,
        reason="r",
        rationale="",
        requested_at=NOW,
        expires_at=NOW + 100,
        decided_at=NOW + 40,
        required=2,
        approved_by=("ana", "bo"),
    )
    second = Event(EventType.APPROVAL_GRANTED, NOW + 40, step=0, data={"approver": "bo"})
    metrics.committed(saga(approval=pending), saga(approval=approved), [second])
    assert value(metrics, "pivotal_approvals_total", **granted) == 1
    assert value(metrics, "pivotal_approval_wait_seconds_sum", **granted) == 40


def test_poison_sagas_and_lost_leases_are_counted() -> None:
    metrics = PivotalMetrics()
    parked = saga(status=SagaStatus.NEEDS_HUMAN)
    metrics.committed(
        saga(), parked, [Event(EventType.SAGA_NEEDS_HUMAN, NOW + 5, data={"poison": True})]
    )
    metrics.committed(
        saga(), parked, [Event(EventType.SAGA_NEEDS_HUMAN, NOW + 5, data={"reason": "x"})]
    )
    metrics.lease_lost("s", "w1")
    metrics.lease_lost("t", "w1")

    assert value(metrics, "pivotal_poison_sagas_total", catalogue="checkout") == 1
    finished = {"catalogue": "checkout", "status": "needs_human"}
    assert value(metrics, "pivotal_sagas_finished_total", **finished) == 2
    assert value(metrics, "pivotal_lease_takeovers_total") == 2


def test_a_call_is_timed_even_when_it_raises_and_odd_outcomes_stay_bounded() -> None:
    metrics = PivotalMetrics()
    call = Call("s", "checkout", "charge_payment", 1, "s:1", 1, undo=True)

    def engine_fails() -> None:
        with metrics.call(call):
            call.outcome = "something new"
            raise RuntimeError("the engine's own failure passes through")

    with pytest.raises(RuntimeError):
        engine_fails()

    labels = {"catalogue": "checkout", "step": "charge_payment", "kind": "undo"}
    count = "pivotal_step_call_duration_seconds_count"
    assert value(metrics, count, outcome="unknown", **labels) == 1


class Broken(Telemetry):
    def committed(self, before: Any, after: Any, events: Any) -> None:
        raise RuntimeError("a broken exporter")


class Item(BaseModel):
    n: int = 1


async def test_a_saga_completes_with_odd_observers_beside_the_metrics(
    store: Store, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = PivotalMetrics()
    catalogue = Catalogue("one")

    async def undo(args: Item, result: Any, ctx: StepContext) -> str:
        return "undone"

    @catalogue.compensable(undo=undo)
    async def book(args: Item, ctx: StepContext) -> dict[str, int]:
        return {"n": args.n}

    orch = Orchestrator(
        store, catalogue, clock=clock, rng=random.Random(0), telemetry=[Broken(), metrics]
    )
    plan = parse_plan({"catalogue": "one", "steps": [{"name": "book", "args": {}}]})
    with caplog.at_level(logging.ERROR, logger="pivotal.telemetry"):
        state = await orch.execute(plan, saga_id="x")

    assert state.status is SagaStatus.COMPLETED
    assert value(metrics, "pivotal_sagas_finished_total", catalogue="one", status="completed") == 1
    assert "a broken exporter" in caplog.text


class Unreadable:
    """A ledger whose operations view fails (or answers after a failure)."""

    def __init__(self) -> None:
        self.fail = True

    async def ops_snapshot(self, now: float, alive_within: float = 60.0) -> OpsSnapshot:
        if self.fail:
            raise ConnectionError("the ledger went away")
        return OpsSnapshot(
            at=now,
            sagas_by_status={"running": 2},
            open_dead_letters=1,
            oldest_open_dead_letter_at=now - 30,
            pending_approvals=1,
            oldest_approval_requested_at=now - 60,
            soonest_approval_expires_at=now + 600,
            outbox_pending=3,
            outbox_dead=0,
            oldest_pending_message_at=now - 9,
            workers_alive=1,
            last_worker_heartbeat_at=now - 2,
        )


async def test_a_failed_ledger_read_sets_the_error_and_keeps_the_counters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = PivotalMetrics()
    metrics.lease_lost("s", "w")
    ledger = Unreadable()

    with caplog.at_level(logging.WARNING, logger="pivotal.metrics"):
        assert await metrics.refresh(ledger, NOW) is False  # type: ignore[arg-type]
    text = generate_latest(metrics.registry).decode()
    assert "pivotal_ledger_scrape_error 1.0" in text
    assert "pivotal_lease_takeovers_total 1.0" in text
    assert value(metrics, "pivotal_workers_alive") is None
    assert "the ledger went away" in caplog.text

    ledger.fail = False
    assert await metrics.refresh(ledger, NOW) is True  # type: ignore[arg-type]
    assert value(metrics, "pivotal_ledger_scrape_error") == 0
    assert value(metrics, "pivotal_sagas", status="running") == 2
    assert value(metrics, "pivotal_sagas", status="completed") == 0
    assert value(metrics, "pivotal_dead_letter_oldest_age_seconds") == 30
    assert value(metrics, "pivotal_approval_oldest_age_seconds") == 60
    assert value(metrics, "pivotal_approval_soonest_expiry_seconds") == 600
    assert value(metrics, "pivotal_outbox_pending") == 3
    assert value(metrics, "pivotal_outbox_oldest_age_seconds") == 9
    assert value(metrics, "pivotal_worker_heartbeat_age_seconds") == 2


async def test_a_ledger_that_hangs_is_given_up_on() -> None:
    metrics = PivotalMetrics(read_timeout=0.05)

    class Hanging:
        async def ops_snapshot(self, now: float, alive_within: float = 60.0) -> OpsSnapshot:
            import asyncio

            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    assert await metrics.refresh(Hanging(), NOW) is False  # type: ignore[arg-type]
    assert value(metrics, "pivotal_ledger_scrape_error") == 1


def test_two_metrics_objects_never_share_samples() -> None:
    a, b = PivotalMetrics(), PivotalMetrics()
    a.lease_lost("s", "w")
    assert value(a, "pivotal_lease_takeovers_total") == 1
    assert value(b, "pivotal_lease_takeovers_total") == 0
