"""A saga agent pauses at the approval gate and survives its process dying."""

from __future__ import annotations

import random
from typing import Any

import pytest
from adk_story import Checker, Session, check_stage, comp_records, order_agent, plan_stage
from google.adk.agents import LlmAgent

from pivotal import FakeClock, Orchestrator
from pivotal.adk import Act, Decide, SagaAgent, ScriptedLlm
from pivotal.examples.commerce import CommerceApp, CommerceServices
from pivotal.hooks import Point
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.sagas.state import SagaStatus
from pivotal.store import Store
from pivotal.testing import CrashAt, CrashSite, SimulatedCrash
from pivotal.views.agent_view import WAITING

BIG_ORDER = {  # order 4471 is 180.00: over the threshold, its capture needs approval
    "order_id": "4471",
    "sku": "lamp",
    "quantity": 1,
    "amount": "180.00",
    "warehouse": "B",
    "recipient": "customer-4471@example.com",
}


def fulfilment_agent(orch: Orchestrator) -> SagaAgent:
    def order(s: Any) -> dict[str, Any]:
        return dict(s["order_plan"])

    pay = ("order_id", "amount")
    stages: list[Any] = [
        plan_stage(BIG_ORDER),
        Act(
            "reserve_stock",
            lambda s: {k: order(s)[k] for k in ("order_id", "sku", "quantity", "warehouse")},
        ),
        Act("authorize_payment", lambda s: {k: order(s)[k] for k in pay}),
        Act("capture_payment", lambda s: {k: order(s)[k] for k in pay}),
        Act(  # from the reservation's warehouse: the default, A, would disagree with B
            "create_shipment",
            lambda s: {k: order(s)[k] for k in ("order_id", "warehouse")},
        ),
    ]
    return SagaAgent(name="fulfil", orchestrator=orch, catalogue="fulfilment", stages=stages)


async def test_the_approval_gate_pauses_and_the_next_run_finishes(
    orchestrator: Orchestrator, services: CommerceServices, check: Checker
) -> None:
    session = Session(fulfilment_agent(orchestrator))
    await session.run()
    state = await session.state()
    assert state["saga_status"] == "awaiting_approval"
    assert state["saga_approval"]["step"] == "capture_payment"
    assert state["saga_approval"]["reason"] == WAITING  # why a person decides is theirs
    assert "threshold" not in str(state["saga_approval"])
    assert services.calls("capture") == []
    saga_id = state["pivotal_saga_id"]

    # a person decides through the CLI or the API; the agent is not running meanwhile
    await orchestrator.approve(saga_id, "maria", "ok", run=False)
    await session.run("is it done?")
    state = await session.state()
    assert state["pivotal_saga_id"] == saga_id  # the same saga went on
    assert state["saga_status"] == "completed"
    assert set(comp_records(state)) == {"comp:reserve_stock", "comp:authorize_payment"}
    assert len(services.calls("capture")) == 1
    await check(saga_id)


def dying(store: Store, app: CommerceApp, clock: FakeClock, site: CrashSite) -> Orchestrator:
    return Orchestrator(
        store, app, clock=clock, rng=random.Random(1), owner="dying", hook=CrashAt(site)
    )


@pytest.mark.parametrize("recovery", ["worker", "rerun"])
async def test_a_process_dying_after_the_charge_loses_and_doubles_nothing(
    recovery: str,
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
    check: Checker,
) -> None:
    crashing = dying(store, app, clock, CrashSite(Point.AFTER_EFFECT, 1))  # the charge
    session = Session(order_agent(crashing))
    with pytest.raises(SimulatedCrash):
        await session.run()
    state = await session.state()
    saga_id = state["pivotal_saga_id"]
    assert set(comp_records(state)) == {"comp:reserve"}  # the charge's outcome was lost
    stored = (await orchestrator.get(saga_id)).state
    assert stored.steps[1].status.value == "started"  # intent recorded, outcome not
    assert len(services.calls("charge")) == 1

    clock.advance(61)  # the dead process's lease runs out
    if recovery == "worker":
        stats = await Worker(orchestrator, WorkerConfig(poll_interval=0.01)).run(until_idle=True)
        assert stats.finished == {"completed": 1}
    session.rebind(order_agent(orchestrator))  # a restarted process, the same session
    await session.run("how is my order?")
    state = await session.state()

    assert state["pivotal_saga_id"] == saga_id
    assert state["saga_status"] == "completed"
    assert set(comp_records(state)) == {"comp:reserve", "comp:charge", "comp:ship"}
    assert state["comp:charge"]["result"] == stored_result(services, f"{saga_id}:1")
    for op in ("reserve", "charge", "ship", "email"):  # each effect exactly once
        keys = [c["key"] for c in services.calls(op)]
        assert len(set(keys)) == 1, (op, keys)
    assert len(services.rows("payments")) == 1
    final = await check(saga_id)
    assert final.status is SagaStatus.COMPLETED


def stored_result(services: CommerceServices, key: str) -> Any:
    import json

    row = next(r for r in services.rows("effects") if r["key"] == key)
    return json.loads(row["result"])


async def test_a_worker_that_recovers_before_a_verdict_is_shown_as_skipped(
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
) -> None:
    def die(_: object) -> str:
        raise SimulatedCrash("the process died while the model was thinking")

    check = LlmAgent(name="check", model=ScriptedLlm.of(die), instruction="Judge.", output_key="v")
    crashing = Orchestrator(store, app, clock=clock, owner="dying")
    session = Session(order_agent(crashing, check=Decide(check)))
    with pytest.raises(SimulatedCrash):
        await session.run()
    saga_id = (await session.state())["pivotal_saga_id"]
    clock.advance(61)
    await Worker(orchestrator, WorkerConfig(poll_interval=0.01)).run(until_idle=True)

    # the worker knows the plan, not the model stage: the ledger says what happened, and
    # the session shows that the verdict was never given
    session.rebind(order_agent(orchestrator, check=check_stage("invalid")))
    await session.run("status?")
    state = await session.state()
    assert state["saga_status"] == "completed"
    assert state["decided:check"].startswith("skipped: the saga passed step 1")
    assert (await orchestrator.get(saga_id)).state.status is SagaStatus.COMPLETED
