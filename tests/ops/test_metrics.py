"""``PivotalMetrics`` driven by real sagas of the commerce app (both backends, fake clock):
every counter and histogram read back from the metrics' own registry."""

from __future__ import annotations

import random
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    NothingToUndo,
    Orchestrator,
    SagaStatus,
    StepContext,
    parse_plan,
)
from pivotal.examples.commerce import CommerceApp, Fault, Faults
from pivotal.observability.metrics import PivotalMetrics
from pivotal.operations.worker import Sweeper
from pivotal.store import Store

CHARGE_FIRST = ("charge_payment", "reserve_stock", "create_shipment")


@pytest.fixture
def metrics() -> PivotalMetrics:
    return PivotalMetrics()


@pytest.fixture
def measured(
    store: Store, app: CommerceApp, clock: FakeClock, metrics: PivotalMetrics
) -> Orchestrator:
    return Orchestrator(store, app, clock=clock, rng=random.Random(0), telemetry=[metrics])


def value(metrics: PivotalMetrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def steps(metrics: PivotalMetrics, catalogue: str, outcome: str) -> dict[str, float]:
    """Step counts of one outcome, by step name (only the non-zero ones)."""
    return _by_step(metrics, "pivotal_steps_total", catalogue, outcome)


def undos(metrics: PivotalMetrics, catalogue: str, outcome: str) -> dict[str, float]:
    return _by_step(metrics, "pivotal_undos_total", catalogue, outcome)


def _by_step(metrics: PivotalMetrics, name: str, catalogue: str, outcome: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in metrics.registry.collect():
        for s in family.samples:
            labels = s.labels
            if (s.name, labels.get("catalogue"), labels.get("outcome")) == (
                name,
                catalogue,
                outcome,
            ) and s.value:
                out[labels["step"]] = s.value
    return out


async def test_a_completed_saga(measured: Orchestrator, metrics, clock, checkout_plan) -> None:
    state = await measured.execute(checkout_plan("o-1"), saga_id="ok")
    assert state.status is SagaStatus.COMPLETED

    assert value(metrics, "pivotal_sagas_submitted_total", catalogue="checkout") == 1
    finished = {"catalogue": "checkout", "status": "completed"}
    assert value(metrics, "pivotal_sagas_finished_total", **finished) == 1
    assert steps(metrics, "checkout", "succeeded") == {
        "reserve_stock": 1,
        "charge_payment": 1,
        "create_shipment": 1,
    }
    assert undos(metrics, "checkout", "done") == {}
    assert value(metrics, "pivotal_saga_duration_seconds_count", **finished) == 1
    assert value(metrics, "pivotal_saga_duration_seconds_sum", **finished) == 0  # fake clock
    for step in ("reserve_stock", "charge_payment", "create_shipment"):
        call = {"catalogue": "checkout", "step": step, "kind": "action", "outcome": "succeeded"}
        assert value(metrics, "pivotal_step_call_duration_seconds_count", **call) == 1
        assert value(metrics, "pivotal_step_call_duration_seconds_sum", **call) > 0
    assert value(metrics, "pivotal_compensations_started_total", catalogue="checkout") == 0
    # never the process-wide registry
    assert (
        REGISTRY.get_sample_value("pivotal_sagas_submitted_total", {"catalogue": "checkout"})
        is None
    )


async def test_a_compensated_saga_times_its_compensation(
    measured: Orchestrator, metrics, faults: Faults, checkout_plan
) -> None:
    faults.always("ship", Fault.PERMANENT)
    state = await measured.execute(checkout_plan("o-1"), saga_id="comp")
    assert state.status is SagaStatus.COMPENSATED

    finished = {"catalogue": "checkout", "status": "compensated"}
    assert value(metrics, "pivotal_sagas_finished_total", **finished) == 1
    assert steps(metrics, "checkout", "failed") == {"create_shipment": 1}
    assert undos(metrics, "checkout", "done") == {"reserve_stock": 1, "charge_payment": 1}
    assert value(metrics, "pivotal_compensations_started_total", catalogue="checkout") == 1
    assert value(metrics, "pivotal_compensation_duration_seconds_count", **finished) == 1
    undo_call = {
        "catalogue": "checkout",
        "step": "charge_payment",
        "kind": "undo",
        "outcome": "succeeded",
    }
    assert value(metrics, "pivotal_step_call_duration_seconds_count", **undo_call) == 1
    failed_call = {
        "catalogue": "checkout",
        "step": "create_shipment",
        "kind": "action",
        "outcome": "permanent",
    }
    assert value(metrics, "pivotal_step_call_duration_seconds_count", **failed_call) == 1


async def test_retries_and_a_lost_reply_settled_by_lookup(
    measured: Orchestrator, metrics, faults: Faults, checkout_plan
) -> None:
    faults.next("charge", Fault.TRANSIENT).always("ship", Fault.TIMEOUT_AFTER_EFFECT)
    state = await measured.execute(checkout_plan("o-1"), saga_id="lost")
    assert state.status is SagaStatus.COMPLETED

    assert steps(metrics, "checkout", "retried") == {"charge_payment": 1, "create_shipment": 3}
    assert steps(metrics, "checkout", "succeeded_by_lookup") == {"create_shipment": 1}
    assert steps(metrics, "checkout", "succeeded") == {"reserve_stock": 1, "charge_payment": 1}
    timeout = {
        "catalogue": "checkout",
        "step": "create_shipment",
        "kind": "action",
        "outcome": "timeout",
    }
    assert value(metrics, "pivotal_step_call_duration_seconds_count", **timeout) == 4


async def test_a_dead_lettered_undo_then_resolved(
    measured: Orchestrator, store: Store, metrics, faults: Faults, clock, checkout_plan
) -> None:
    faults.always("ship", Fault.PERMANENT).always("release", Fault.PERMANENT)
    state = await measured.execute(checkout_plan("o-1", order=CHARGE_FIRST), saga_id="dl")
    assert state.status is SagaStatus.COMPENSATION_FAILED
    clock.advance(30)

    failed = {"catalogue": "checkout", "status": "compensation_failed"}
    assert value(metrics, "pivotal_sagas_finished_total", **failed) == 1
    assert undos(metrics, "checkout", "dead_lettered") == {"reserve_stock": 1}
    assert undos(metrics, "checkout", "done") == {"charge_payment": 1}
    assert value(metrics, "pivotal_compensation_duration_seconds_count", **failed) == 1

    [letter] = await store.dead_letters()
    await measured.resolve_dead_letter(letter.id, "olga", "released by hand")
    assert undos(metrics, "checkout", "resolved") == {"reserve_stock": 1}


async def test_approvals_granted_rejected_and_expired_with_their_waits(
    measured: Orchestrator, metrics, clock: FakeClock, services, fulfilment_plan
) -> None:
    for order in ("5001", "5002"):
        services.order(order, customer=f"c-{order}", amount="180.00", sku="sku-1")
    big = fulfilment_plan("4471", amount="180.00")
    await measured.execute(big, saga_id="granted")
    clock.advance(120)
    assert (await measured.approve("granted", "ana")).status is SagaStatus.COMPLETED

    await measured.execute(fulfilment_plan("5001", amount="180.00"), saga_id="rejected")
    clock.advance(30)
    assert (await measured.reject("rejected", "ana", "no")).status is SagaStatus.COMPENSATED

    await measured.execute(fulfilment_plan("5002", amount="180.00"), saga_id="expired")
    clock.advance(2 * 86_400)
    await Sweeper(measured).sweep()
    assert (await measured.get("expired")).state.status is SagaStatus.COMPENSATED

    fulfilment = {"catalogue": "fulfilment"}
    for decision, n in (("requested", 3), ("granted", 1), ("rejected", 1), ("expired", 1)):
        assert value(metrics, "pivotal_approvals_total", decision=decision, **fulfilment) == n
    waits = {
        d: value(metrics, "pivotal_approval_wait_seconds_sum", decision=d, **fulfilment)
        for d in ("granted", "rejected", "expired")
    }
    assert waits["granted"] == 120
    assert waits["rejected"] == 30
    assert waits["expired"] >= 86_400
    completed = {"catalogue": "fulfilment", "status": "completed"}
    assert value(metrics, "pivotal_saga_duration_seconds_sum", **completed) == 120


class Item(BaseModel):
    n: int = 1


async def test_an_undo_that_found_nothing_is_a_noop(
    store: Store, clock: FakeClock, metrics: PivotalMetrics
) -> None:
    catalogue = Catalogue("noop")

    async def undo(args: Item, result: Any, ctx: StepContext) -> str:
        return NothingToUndo("nothing was charged")

    @catalogue.compensable(undo=undo)
    async def charge(args: Item, ctx: StepContext) -> None:
        raise RuntimeError("the client crashed: did it charge?")

    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0), telemetry=[metrics])
    plan = parse_plan({"catalogue": "noop", "steps": [{"name": "charge", "args": {}}]})
    assert (await orch.execute(plan, saga_id="n")).status is SagaStatus.COMPENSATED

    # the call ended unknown; it is undone by its key, never repeated just to be undone
    assert steps(metrics, "noop", "unknown") == {"charge": 1}
    assert undos(metrics, "noop", "noop") == {"charge": 1}
    assert undos(metrics, "noop", "done") == {}
