"""What a refused approval says: the same approver twice on an approval that needs two is
told they already approved and that a second, different person must; a decision that
comes after the approval was decided says it was decided already, and by whom."""

from __future__ import annotations

import pytest

from pivotal import ApprovalError, FourEyesError, SagaStatus
from pivotal.declarations.policy import ThresholdPolicy
from pivotal.orchestration import four_eyes

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


@pytest.fixture
async def two_needed(app, orchestrator, fulfilment_plan):
    """Order 4471 for 180: above 160 it needs two approvers before the capture."""
    app.catalogue("fulfilment").approval = ThresholdPolicy(
        threshold=150, two_approvers_above=160, steps=frozenset({"capture_payment"})
    )
    state = await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state


async def test_the_same_approver_twice_is_told_a_second_person_must(
    two_needed, orchestrator
) -> None:
    await orchestrator.approve("big", "maria", run=False)
    with pytest.raises(FourEyesError) as refused:
        await orchestrator.approve("big", "Maria ", run=False)
    message = refused.value.message
    assert message.startswith("Maria  already approved saga big")
    assert "needs 2 distinct approvers" in message
    assert "a second, different person must approve it" in message
    assert "submitted" not in message  # not mistaken for the submitter's refusal


async def test_a_decided_approval_says_who_decided_it(two_needed, orchestrator) -> None:
    await orchestrator.approve("big", "maria", run=False)
    await orchestrator.approve("big", "jon", run=False)
    stored = await orchestrator.get("big")
    late = four_eyes.already_decided(stored)
    assert late is not None
    assert late.startswith("saga big was already decided: the approval of capture_payment")
    assert "approved by maria and jon at " in late
    assert "nothing was recorded" in late
    assert "another person" not in late
    assert "must approve" not in late


async def test_a_rejected_approval_names_who_rejected_it(two_needed, orchestrator) -> None:
    await orchestrator.reject("big", "jon", "too much", run=False)
    late = four_eyes.already_decided(await orchestrator.get("big"))
    assert late is not None
    assert "the approval of capture_payment was rejected by jon" in late


async def test_a_pending_approval_is_not_decided(two_needed, orchestrator) -> None:
    assert four_eyes.already_decided(await orchestrator.get("big")) is None
    await orchestrator.approve("big", "maria", run=False)  # one of two: still pending
    assert four_eyes.already_decided(await orchestrator.get("big")) is None


async def test_the_orchestrator_still_refuses_a_late_decision(two_needed, orchestrator) -> None:
    """The refusal itself is unchanged (ApprovalError, nothing recorded): the surfaces
    reword it with ``already_decided``."""
    await orchestrator.approve("big", "maria", run=False)
    await orchestrator.approve("big", "jon", run=False)
    before = await orchestrator.get("big")
    with pytest.raises(ApprovalError):
        await orchestrator.approve("big", "jon", run=False)
    assert (await orchestrator.get("big")).state == before.state
