"""Policies ask for two distinct approvers above a second amount; plans with no
``on_behalf_of`` keep their digests."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import BaseModel

from pivotal.declarations.exposure import Exposure, Moved
from pivotal.declarations.plan import Plan, Provenance, parse_plan
from pivotal.declarations.policy import ApprovalRequirement, ExposurePolicy, ThresholdPolicy
from pivotal.sagas.state import ApprovalStatus, Event, EventType, SagaStatus, apply


class Pay(BaseModel):
    amount: float


def moved(*amounts: float) -> Exposure:
    """What a plan of payments of ``amounts`` (in EUR) moves, as the engine counts it."""
    return Exposure(
        tuple(Moved(n, "pay", Decimal(str(a)), "EUR", ()) for n, a in enumerate(amounts))
    )


def plan_of(*amounts: float) -> Plan:
    steps = [{"name": "pay", "args": {"amount": a}} for a in amounts]
    return parse_plan({"catalogue": "c", "steps": steps})


def test_threshold_policy_asks_two_approvers_above_the_second_amount() -> None:
    policy = ThresholdPolicy(threshold=100, two_approvers_above=1000)
    assert policy("pay", Pay(amount=50), plan_of(50)) is None
    one = policy("pay", Pay(amount=500), plan_of(500))
    assert one is not None
    assert one.approvers == 1
    at = policy("pay", Pay(amount=1000), plan_of(1000))
    assert at is not None
    assert at.approvers == 1
    two = policy("pay", Pay(amount=1000.5), plan_of(1000.5))
    assert two is not None
    assert two.approvers == 2
    assert "two people must approve" in two.reason
    # without the setting, one approver however large
    big = ThresholdPolicy(threshold=100)("pay", Pay(amount=10**9), plan_of(10**9))
    assert big is not None
    assert big.approvers == 1


def test_exposure_policy_asks_two_approvers_above_the_second_total() -> None:
    policy = ExposurePolicy(threshold=100, two_approvers_above=300)
    assert policy("pay", Pay(amount=50), plan_of(50, 40), exposure=moved(50, 40)) is None
    one = policy("pay", Pay(amount=200), plan_of(200, 100), exposure=moved(200, 100))
    assert one is not None
    assert one.approvers == 1
    two = policy("pay", Pay(amount=200), plan_of(200, 101), exposure=moved(200, 101))
    assert two is not None
    assert two.approvers == 2
    big = ExposurePolicy(threshold=100)("pay", Pay(amount=1), plan_of(10**6), exposure=moved(10**6))
    assert big is not None


def test_a_requirement_needs_at_least_one_approver() -> None:
    assert ApprovalRequirement("r", 10).approvers == 1
    with pytest.raises(ValueError, match="at least one approver"):
        ApprovalRequirement("r", 10, approvers=0)
    with pytest.raises(TypeError):
        ApprovalRequirement("r", 10, approvers=True)


def _requested(required: int) -> list[Event]:
    submitted = Event(
        EventType.SAGA_SUBMITTED,
        at=0.0,
        seq=1,
        data={
            "saga_id": "s",
            "catalogue": "c",
            "plan_digest": "d",
            "provenance_ref": "p",
            "steps": [{"name": "pay", "kind": "pivot"}],
        },
    )
    requested = Event(
        EventType.APPROVAL_REQUESTED,
        at=1.0,
        step=0,
        seq=2,
        data={"reason": "big", "expires_at": 100.0, "required": required},
    )
    return [submitted, requested]


def test_state_approves_only_once_enough_distinct_approvers_granted() -> None:
    state = None
    for event in _requested(2):
        state = apply(state, event)
    assert state is not None
    assert state.approval is not None
    assert (state.approval.required, state.approval.approved_by) == (2, ())
    grant = Event(EventType.APPROVAL_GRANTED, at=2.0, step=0, data={"approver": "ana"})
    state = apply(state, grant)
    assert state.approval is not None
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert state.approval.status is ApprovalStatus.PENDING
    assert state.approval.approved_by == ("ana",)
    state = apply(state, grant)  # the same approver again adds no one
    assert state.approval is not None
    assert state.approval.approved_by == ("ana",)
    assert state.status is SagaStatus.AWAITING_APPROVAL
    state = apply(state, Event(EventType.APPROVAL_GRANTED, 3.0, 0, data={"approver": "bo"}))
    assert state.approval is not None
    assert state.status is SagaStatus.RUNNING
    assert state.approval.status is ApprovalStatus.APPROVED
    assert state.approval.approved_by == ("ana", "bo")
    assert (state.approval.approver, state.approval.decided_at) == ("bo", 3.0)


def test_an_old_request_without_required_needs_one_approver() -> None:
    state = None
    events = _requested(1)
    events[1] = Event(
        EventType.APPROVAL_REQUESTED, 1.0, 0, data={"reason": "big", "expires_at": 100.0}
    )
    for event in events:
        state = apply(state, event)
    state = apply(state, Event(EventType.APPROVAL_GRANTED, 2.0, 0, data={"approver": "ana"}))
    assert state.status is SagaStatus.RUNNING
    assert state.approval is not None
    assert state.approval.approved_by == ("ana",)


def test_digest_and_ref_are_unchanged_when_no_one_is_acted_for() -> None:
    plan = plan_of(10)
    # the digest of this plan before on_behalf_of existed
    legacy = Plan.model_validate(plan.model_dump())
    dumped = plan.model_dump(mode="json")
    assert "on_behalf_of" in dumped["provenance"]
    import hashlib
    import json

    del dumped["provenance"]["on_behalf_of"]
    del dumped["provenance"]["about"]  # added later still: left out while unset
    del dumped["provenance"]["rerun_of"]  # and later again
    del dumped["provenance"]["forked_from"]  # and again
    before = hashlib.sha256(
        json.dumps(dumped, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    assert plan.digest() == legacy.digest() == before
    prov = Provenance(actor_id="a")
    old_json = prov.model_dump_json(exclude={"on_behalf_of", "about", "rerun_of", "forked_from"})
    assert prov.ref() == "prov_" + hashlib.sha256(old_json.encode()).hexdigest()[:16]
    acted = plan.model_copy(
        update={"provenance": Provenance(actor_id="unknown", on_behalf_of="ana")}
    )
    assert acted.digest() != plan.digest()
    assert acted.provenance.ref() != plan.provenance.ref()
