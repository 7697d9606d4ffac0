"""The engine's announcements go to the agent that asked (the outbox section of the manual's
operating page, docs/site/how-to/operating.md, routes them there): each tells the outcome, a
reason code and a short message, never the policy, who decided or why, nor a failed step's
raw error."""

from __future__ import annotations

from typing import Any

from agent_world import (
    APPROVER,
    NOTE,
    OPERATOR,
    TOKEN,
    WHY,
    parked_plan,
    provider_plan,
    told,
    with_provider,
)
from pivotal import FakeClock, Orchestrator, parse_plan
from pivotal.examples.commerce import CommerceApp
from pivotal.operations.relay import CallableSink, Relay
from pivotal.sagas.outbox import Message
from pivotal.store import Store


def fulfilment() -> str:
    pay = '{"order_id": "4471", "amount": "180.00"}'
    return (
        '{"catalogue": "fulfilment", "rationale": "ship order 4471", "steps": ['
        '{"name": "reserve_stock", "args": {"order_id": "4471", "sku": "lamp", '
        '"quantity": 1, "warehouse": "B"}}, '
        f'{{"name": "authorize_payment", "args": {pay}}}, '
        f'{{"name": "capture_payment", "args": {pay}}}]}}'
    )


async def delivered(store: Store, clock: FakeClock) -> list[Message]:
    got: list[Message] = []

    async def keep(message: Message) -> None:
        got.append(message)

    await Relay(store, [CallableSink(keep)], clock=clock).run(until_idle=True)
    return got


def payloads(messages: list[Message], kind: str) -> list[dict[str, Any]]:
    return [dict(m.payload) for m in messages if m.type == kind]


async def test_approval_requested_tells_the_agent_it_waits_not_the_threshold(
    orchestrator: Orchestrator, store: Store, clock: FakeClock
) -> None:
    state = await orchestrator.execute(parse_plan(fulfilment()), saga_id="big")
    assert state.approval is not None
    assert "150" in state.approval.reason
    [asked] = payloads(await delivered(store, clock), "approval.requested")
    assert told(asked) == [], asked
    assert "required" not in asked
    assert asked["reason_code"] == "approval_pending"
    assert asked["step_name"] == "capture_payment"
    await orchestrator.reject("big", APPROVER, NOTE, run=True)
    [ended] = payloads(await delivered(store, clock), "saga.compensated")
    assert told(ended) == [], ended
    assert ended["reason_code"] == "approval_rejected"


async def test_a_stop_a_failure_and_a_settlement_are_announced_without_names_or_errors(
    orchestrator: Orchestrator, store: Store, app: CommerceApp, clock: FakeClock
) -> None:
    with_provider(app)
    await orchestrator.submit(parse_plan(fulfilment()), saga_id="stop")
    await orchestrator.abort("stop", OPERATOR, WHY, run=True)
    failed = await orchestrator.execute(parse_plan(provider_plan()), saga_id="fail")
    parked = await orchestrator.execute(parse_plan(parked_plan()), saga_id="park")
    assert failed.reason is not None
    assert TOKEN in failed.reason
    assert parked.status.value == "needs_human"
    await orchestrator.resolve("park", OPERATOR, WHY)
    got = await delivered(store, clock)
    ended = {p["saga_id"]: p for p in payloads(got, "saga.compensated")}
    assert ended["stop"]["reason_code"] == "stopped_by_a_person"
    assert ended["fail"]["reason_code"] == "step_failed"
    assert "call_provider (step 1) failed" in ended["fail"]["reason"]
    [waits] = payloads(got, "saga.needs_human")
    assert waits["reason_code"] == "step_failed_after_point_of_no_return"
    [settled] = payloads(got, "saga.resolved")
    assert settled["reason_code"] == "resolved_by_a_person"
    for payload in (*ended.values(), waits, settled):
        assert told(payload) == [], payload
