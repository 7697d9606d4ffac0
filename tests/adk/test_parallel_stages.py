"""Parallel acting stages: a ``ParallelAgent`` inside the saga is one parallel group.

The story: reserve, then charge and book the shipment side by side, then the e-mail. Plan
indices: reserve 0, charge 1, ship 2 (the group at plan position 1), notify 3.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from adk_story import Checker, Session, acts, check_stage, comp_records, plan_stage
from google.adk.agents import LlmAgent, ParallelAgent, SequentialAgent

from pivotal import EventType, FakeClock, Orchestrator
from pivotal.adk import Act, Decide, Parallel, SagaAgent, ScriptedLlm, StageError
from pivotal.examples.commerce import CommerceApp, CommerceServices, Fault
from pivotal.hooks import Point
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.sagas.state import SagaStatus, StepStatus, UndoStatus
from pivotal.store import Store
from pivotal.testing import CrashAt, CrashSite, SimulatedCrash

# ParallelAgent is deprecated in google-adk 2.x (in favour of Workflow); it is the form the
# pattern's readers write, so it is accepted, and its construction warns
pytestmark = pytest.mark.filterwarnings(
    "ignore:(Parallel|Sequential)Agent is deprecated:DeprecationWarning"
)


def pay_and_ship() -> ParallelAgent:
    _, charge, ship, _ = acts()
    return ParallelAgent(name="pay_and_ship", sub_agents=[charge.agent(), ship.agent()])


def parallel_saga(orch: Orchestrator, *, check: Decide | None = None) -> SagaAgent:
    """PLAN -> reserve -> [charge | ship] -> [CHECK] -> notify."""
    reserve, _, _, notify = acts()
    stages: list[Any] = [plan_stage(), reserve, pay_and_ship()]
    if check is not None:
        stages.append(check)
    stages.append(notify)
    return SagaAgent(name="order_saga", orchestrator=orch, catalogue="checkout", stages=stages)


async def undo_order(orch: Orchestrator, saga_id: str) -> list[int | None]:
    events = await orch.store.events(saga_id)
    return [e.step for e in events if e.type is EventType.UNDO_STARTED]


async def test_a_parallel_group_runs_both_members_between_its_neighbours(
    orchestrator: Orchestrator, services: CommerceServices, check: Checker
) -> None:
    session = Session(parallel_saga(orchestrator))
    await session.run()
    state = await session.state()

    assert state["saga_status"] == "completed"
    assert set(comp_records(state)) == {"comp:reserve", "comp:charge", "comp:ship"}
    saga_id = state["pivotal_saga_id"]
    assert state["comp:charge"]["key"] == f"{saga_id}:1"
    assert state["comp:ship"]["key"] == f"{saga_id}:2"
    stored = (await orchestrator.get(saga_id)).state
    assert [r.group for r in stored.steps] == [None, 1, 1, None]
    plan = (await orchestrator.get(saga_id)).plan
    assert [c.call.name for c in plan.calls()] == [
        "reserve_stock",
        "charge_payment",
        "create_shipment",
        "send_confirmation",
    ]
    events = await orchestrator.store.events(saga_id)
    started = [e.step for e in events if e.type is EventType.STEP_STARTED]
    assert started[0] == 0
    assert sorted(started[1:3]) == [1, 2]  # both members start before the e-mail
    assert started[3:] == [3]
    assert len(services.calls("email")) == 1
    await check(saga_id)


async def test_a_failing_member_undoes_its_sibling_then_the_earlier_stage(
    orchestrator: Orchestrator, services: CommerceServices, faults: Any, check: Checker
) -> None:
    faults.always("ship", Fault.PERMANENT)
    session = Session(parallel_saga(orchestrator))
    await session.run()
    state = await session.state()

    assert state["saga_status"] == "compensated"
    assert "create_shipment (step 2) failed" in state["saga_reason"]
    assert set(comp_records(state)) == {"comp:reserve", "comp:charge"}  # ship: no effect
    assert state["comp:charge"]["undo"] == state["comp:reserve"]["undo"] == "done"
    saga_id = state["pivotal_saga_id"]
    assert await undo_order(orchestrator, saga_id) == [1, 0]  # the earlier stage last
    assert services.calls("email") == []  # the later stage never ran
    assert len(services.calls("refund")) == len(services.calls("release")) == 1
    await check(saga_id)


async def test_a_veto_after_the_group_undoes_both_members_before_the_earlier_stage(
    orchestrator: Orchestrator, services: CommerceServices, check: Checker
) -> None:
    session = Session(parallel_saga(orchestrator, check=check_stage("invalid")))
    await session.run()
    state = await session.state()

    assert state["saga_status"] == "compensated"
    assert state["decided:check"] == "the order check said 'invalid'"
    assert {k: v["undo"] for k, v in comp_records(state).items()} == {
        "comp:reserve": "done",
        "comp:charge": "done",
        "comp:ship": "done",
    }
    undone = await undo_order(orchestrator, state["pivotal_saga_id"])
    assert sorted(undone[:2]) == [1, 2]  # the members in either order
    assert undone[2:] == [0]  # then the stage before them
    assert services.calls("email") == []
    await check(state["pivotal_saga_id"])


async def test_a_gate_before_the_group_decides_before_either_member_starts(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    reserve, _, _, notify = acts()
    stages: list[Any] = [plan_stage(), reserve, check_stage("invalid"), pay_and_ship(), notify]
    agent = SagaAgent(
        name="order_saga", orchestrator=orchestrator, catalogue="checkout", stages=stages
    )
    session = Session(agent)
    await session.run()
    state = await session.state()
    assert state["saga_status"] == "compensated"
    assert set(comp_records(state)) == {"comp:reserve"}
    assert services.calls("charge") == services.calls("ship") == []


def dying(store: Store, app: CommerceApp, clock: FakeClock, site: CrashSite) -> Orchestrator:
    return Orchestrator(
        store, app, clock=clock, rng=random.Random(1), owner="dying", hook=CrashAt(site)
    )


SITES = [
    CrashSite(Point.AFTER_EFFECT, 1),  # the charge took effect, its outcome was lost
    CrashSite(Point.AFTER_EFFECT, 2),  # the same, for the shipment
    CrashSite(Point.AFTER_INTENT, 2),  # the shipment's intent is durable, no call made
]


@pytest.mark.parametrize("recovery", ["worker", "rerun"])
@pytest.mark.parametrize("site", SITES, ids=str)
async def test_a_crash_mid_group_neither_repeats_nor_loses_a_member(
    site: CrashSite,
    recovery: str,
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
    check: Checker,
) -> None:
    session = Session(parallel_saga(dying(store, app, clock, site)))
    with pytest.raises(SimulatedCrash):
        await session.run()
    saga_id = (await session.state())["pivotal_saga_id"]
    crashed = (await orchestrator.get(saga_id)).state
    assert crashed.steps[site.index].status is StepStatus.STARTED  # intent, no outcome
    assert crashed.steps[3].status is StepStatus.PENDING  # the e-mail waits for the group
    in_flight = (StepStatus.STARTED, StepStatus.PENDING)
    assert all(r.status in in_flight for r in crashed.steps[1:3])  # the group mid-way

    # the dead process's lease runs out, and so does the doubt about any call it began (its
    # timeout, 60 s, plus the catalogue's doubt grace, 30 s): a worker polls, it never waits
    clock.advance(91)
    if recovery == "worker":
        stats = await Worker(orchestrator, WorkerConfig(poll_interval=0.01)).run(until_idle=True)
        assert stats.finished == {"completed": 1}
    session.rebind(parallel_saga(orchestrator))  # a restarted process, the same session
    await session.run("how is my order?")
    state = await session.state()

    assert state["pivotal_saga_id"] == saga_id
    assert state["saga_status"] == "completed"
    assert set(comp_records(state)) == {"comp:reserve", "comp:charge", "comp:ship"}
    for op in ("reserve", "charge", "ship", "email"):  # each effect once, by its one key
        keys = {c["key"] for c in services.calls(op)}
        assert len(keys) == 1, (op, keys)
    assert len(services.calls("charge")) == 1  # found by its key, never charged again
    assert len(services.rows("payments")) == len(services.rows("shipments")) == 1
    final = await check(saga_id)
    assert final.status is SagaStatus.COMPLETED


async def test_a_crash_while_undoing_the_group_undoes_each_member_once(
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
    faults: Any,
    check: Checker,
) -> None:
    faults.always("ship", Fault.PERMANENT)
    crashing = dying(store, app, clock, CrashSite(Point.AFTER_UNDO_EFFECT, 1))  # the refund
    session = Session(parallel_saga(crashing))
    with pytest.raises(SimulatedCrash):
        await session.run()
    clock.advance(61)
    session.rebind(parallel_saga(orchestrator))
    await session.run("status?")
    state = await session.state()

    assert state["saga_status"] == "compensated"
    stored = (await orchestrator.get(state["pivotal_saga_id"])).state
    assert [r.undo_status for r in stored.steps] == [
        UndoStatus.DONE,
        UndoStatus.DONE,
        UndoStatus.NONE,
        UndoStatus.NONE,
    ]
    assert len({c["key"] for c in services.calls("refund")}) == 1
    assert len(services.calls("release")) == 1
    await check(state["pivotal_saga_id"])


async def test_pivotal_parallel_is_the_same_group_without_adk_deprecation(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    reserve, charge, ship, notify = acts()
    stages: list[Any] = [plan_stage(), reserve, Parallel("pay_and_ship", [charge, ship]), notify]
    agent = SagaAgent(
        name="order_saga", orchestrator=orchestrator, catalogue="checkout", stages=stages
    )
    session = Session(agent)
    await session.run()
    state = await session.state()
    assert state["saga_status"] == "completed"
    stored = (await orchestrator.get(state["pivotal_saga_id"])).state
    assert [r.group for r in stored.steps] == [None, 1, 1, None]


def saga_of(orch: Orchestrator, *stages: Any) -> SagaAgent:
    return SagaAgent(name="x", orchestrator=orch, catalogue="checkout", stages=list(stages))


def test_what_a_parallel_stage_may_hold_is_checked(orchestrator: Orchestrator) -> None:
    reserve, charge, ship, notify = acts()
    judge = LlmAgent(name="judge", model=ScriptedLlm.of("ok"), instruction="Judge.")
    with pytest.raises(StageError, match=r"only acting stages.*judge is a model stage"):
        saga_of(orchestrator, reserve, ParallelAgent(name="p", sub_agents=[judge]))
    inner = ParallelAgent(name="inner", sub_agents=[charge.agent()])
    with pytest.raises(StageError, match="parallel stages do not nest"):
        saga_of(orchestrator, reserve, ParallelAgent(name="p", sub_agents=[inner, ship.agent()]))
    seq = SequentialAgent(name="seq", sub_agents=[charge.agent(), ship.agent()])
    with pytest.raises(StageError, match=r"only acting stages.*seq is a SequentialAgent"):
        saga_of(orchestrator, reserve, ParallelAgent(name="p", sub_agents=[seq]))
    with pytest.raises(StageError, match="at least one acting stage"):
        saga_of(orchestrator, reserve, ParallelAgent(name="p", sub_agents=[]))
    with pytest.raises(StageError, match="send_confirmation is a retriable step"):
        saga_of(orchestrator, reserve, Parallel("p", [charge, notify]))
    with pytest.raises(StageError, match="unique: charge"):
        saga_of(orchestrator, charge, Parallel("p", [charge, ship]))


def test_fulfilment_refuses_the_pivot_in_a_parallel_stage(orchestrator: Orchestrator) -> None:
    order = {"order_id": "o", "amount": "1.00"}
    authorize = Act("authorize_payment", lambda s: order)
    capture = Act("capture_payment", lambda s: order)
    with pytest.raises(StageError, match="capture_payment is a pivot step"):
        SagaAgent(
            name="x",
            orchestrator=orchestrator,
            catalogue="fulfilment",
            stages=[Parallel("p", [authorize, capture])],
        )


async def test_an_acting_stage_run_outside_a_saga_agent_refuses(
    orchestrator: Orchestrator, services: CommerceServices
) -> None:
    _, charge, _, _ = acts()
    session = Session(charge.agent())
    with pytest.raises(StageError, match="only inside a SagaAgent"):
        await session.run()
    assert services.calls() == []
