"""What the report tests share: a ledger holding sagas of every kind the review report looks
at, some of them long ago, and planning runs, made by the real orchestrator and planning loop
over the commerce app."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus
from pivotal.declarations.plan import ActorType, Provenance
from pivotal.declarations.policy import DAY
from pivotal.examples.commerce import Fault, Faults
from pivotal.hooks import Point
from pivotal.planning import PlanningOutcome, PlanRequest, ScriptedPlanner, plan_and_submit
from pivotal.store import Store

AGENT = Provenance(
    actor_type=ActorType.AGENT,
    actor_id="order-bot",
    run_id="run-7",
    model="gpt-test",
    prompt_version="checkout-v3",
    on_behalf_of="alice",
)
PERSON = Provenance(actor_type=ActorType.HUMAN, actor_id="bob")


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


FULFIL = [
    call("reserve_stock", order_id="4471", sku="lamp", quantity=1, warehouse="B"),
    call("authorize_payment", order_id="4471", amount="180"),
    call("capture_payment", order_id="4471", amount="180"),
    call("create_shipment", order_id="4471", warehouse="B"),
]
CREDIT = [*FULFIL[:2], call("apply_goodwill_credit", order_id="4471", amount="20"), *FULFIL[2:]]
BAD_AMOUNT = [FULFIL[0], call("authorize_payment", order_id="4471", amount="-5"), *FULFIL[2:]]


def request(n: int) -> PlanRequest:
    return PlanRequest(
        text="ship it from B",
        context={"order_id": "4471", "amount": "180"},
        catalogue="fulfilment",
        request_id=f"req-{n}",
    )


def by(plan: Plan, provenance: Provenance) -> Plan:
    return plan.model_copy(update={"provenance": provenance})


@dataclass
class Ledger:
    """What was put in the ledger, and when."""

    store: Store
    clock: FakeClock
    old: float  # when the old sagas ended (ten days before ``now``)
    now: float


async def build_ledger(
    store: Store,
    clock: FakeClock,
    orchestrator: Orchestrator,
    faults: Faults,
    checkout_plan: Any,
    fulfilment_plan: Any,
) -> Ledger:
    """Ten days ago: one declined checkout and one escalated planning run. Now: two declined
    checkouts (by an agent for alice), an approval rejected and one expired, a shipment
    stuck after the capture, an undo dead-lettered, a poison saga; plus a completed saga, one
    waiting for approval, an accepted planning run that was re-planned once, and an
    escalation. Each kind of saga is checked here as it is made."""
    old = clock.now()
    faults.next("charge", Fault.PERMANENT)
    state = await orchestrator.execute(by(checkout_plan("o-old"), AGENT), saga_id="old-declined")
    assert state.status is SagaStatus.COMPENSATED
    escalated = await plan_and_submit(
        request(0), ScriptedPlanner([{"steps": CREDIT}]), orchestrator, max_replans=0
    )
    assert escalated.outcome is PlanningOutcome.ESCALATED

    clock.advance(9 * DAY)  # the approval that will expire is asked for a day before now
    state = await orchestrator.execute(
        by(fulfilment_plan("4471", amount="180.00"), PERSON), saga_id="expired"
    )
    assert state.status is SagaStatus.AWAITING_APPROVAL
    clock.advance(DAY + 3600)
    assert (await orchestrator.run("expired")).status is SagaStatus.COMPENSATED

    for saga_id in ("declined", "declined-2"):
        clock.advance(60)
        faults.next("charge", Fault.PERMANENT)
        state = await orchestrator.execute(by(checkout_plan(saga_id), AGENT), saga_id=saga_id)
        assert state.status is SagaStatus.COMPENSATED
    state = await orchestrator.execute(
        by(fulfilment_plan("4471", amount="180.00"), AGENT), saga_id="rejected"
    )
    assert state.status is SagaStatus.AWAITING_APPROVAL
    state = await orchestrator.reject("rejected", "carol", "customer asked to cancel")
    assert state.status is SagaStatus.COMPENSATED

    faults.always("ship", Fault.TRANSIENT)
    state = await orchestrator.execute(fulfilment_plan(), saga_id="stuck")
    assert state.status is SagaStatus.NEEDS_HUMAN
    faults.clear()

    faults.next("ship", Fault.PERMANENT).always("release", Fault.TRANSIENT)
    order = ("charge_payment", "reserve_stock", "create_shipment")
    state = await orchestrator.execute(checkout_plan("o-dl", order=order), saga_id="undo-failed")
    assert state.status is SagaStatus.COMPENSATION_FAILED
    faults.clear()

    def bug(point: Point, index: int) -> None:
        if point is Point.BEFORE_INTENT and index == 1:
            raise RuntimeError("a bug in this release")

    orchestrator.hook = bug
    await orchestrator.submit(checkout_plan("o-p"), saga_id="poison")
    for _ in range(orchestrator.poison_after + 3):
        try:
            state = await orchestrator.run("poison")
            break
        except RuntimeError:
            pass
    orchestrator.hook = None
    assert state.saga_id == "poison"
    assert state.status is SagaStatus.NEEDS_HUMAN

    assert (await orchestrator.execute(checkout_plan("o-ok"), saga_id="fine")).status is (
        SagaStatus.COMPLETED
    )
    state = await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="waits")
    assert state.status is SagaStatus.AWAITING_APPROVAL

    replanned = await plan_and_submit(
        request(1), ScriptedPlanner([{"steps": CREDIT}, {"steps": FULFIL}]), orchestrator
    )
    assert replanned.outcome is PlanningOutcome.ACCEPTED
    escalated = await plan_and_submit(
        request(2),
        ScriptedPlanner([{"steps": BAD_AMOUNT}, {"steps": CREDIT}]),
        orchestrator,
        max_replans=1,
    )
    assert escalated.outcome is PlanningOutcome.ESCALATED
    return Ledger(store, clock, old, clock.now())
