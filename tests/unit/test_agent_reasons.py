"""Every reason the engine writes, as an agent is told it: a code and Pivotal's words, never
the words a person or a provider wrote."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pivotal.sagas.agent_reasons import Reason, told
from pivotal.sagas.state import (
    ApprovalRecord,
    ApprovalStatus,
    SagaState,
    SagaStatus,
    StepRecord,
    StepStatus,
)

SECRET = "Bearer sk_live_x; ann said no; threshold 150"


def saga(status: SagaStatus, reason: str | None, *steps: StepRecord) -> SagaState:
    return SagaState(
        saga_id="s",
        catalogue="c",
        plan_digest="d",
        provenance_ref="p",
        status=status,
        steps=steps
        or (
            StepRecord(0, "hold", "compensable", status=StepStatus.SUCCEEDED),
            StepRecord(1, "capture", "pivot"),
            StepRecord(2, "ship", "retriable"),
        ),
        created_at=0.0,
        updated_at=0.0,
        reason=reason,
    )


def step(index: int, name: str, kind: str, status: StepStatus) -> StepRecord:
    return StepRecord(index, name, kind, status=status, error=SECRET)


HOLD = step(0, "hold", "compensable", StepStatus.SUCCEEDED)
CAPTURE_OK = step(1, "capture", "pivot", StepStatus.SUCCEEDED)

CASES = [
    (saga(SagaStatus.COMPLETED, None), None),
    (saga(SagaStatus.RUNNING, None), None),
    (saga(SagaStatus.AWAITING_APPROVAL, SECRET), Reason.APPROVAL_PENDING),
    (saga(SagaStatus.RESOLVED, f"resolved by ann: {SECRET}"), Reason.RESOLVED_BY_A_PERSON),
    (
        saga(
            SagaStatus.COMPENSATED,
            SECRET,
            HOLD,
            step(1, "charge", "compensable", StepStatus.FAILED),
        ),
        Reason.STEP_FAILED,
    ),
    (
        saga(
            SagaStatus.COMPENSATING,
            SECRET,
            HOLD,
            step(1, "charge", "compensable", StepStatus.UNKNOWN),
        ),
        Reason.STEP_OUTCOME_UNKNOWN,
    ),
    (
        saga(SagaStatus.NEEDS_HUMAN, SECRET, HOLD, step(1, "capture", "pivot", StepStatus.UNKNOWN)),
        Reason.STEP_OUTCOME_UNKNOWN,
    ),
    (
        saga(
            SagaStatus.NEEDS_HUMAN,
            SECRET,
            HOLD,
            CAPTURE_OK,
            step(2, "ship", "retriable", StepStatus.FAILED),
        ),
        Reason.STEP_FAILED_AFTER_POINT_OF_NO_RETURN,
    ),
    (
        saga(SagaStatus.NEEDS_HUMAN, f"made no progress: {SECRET}"),
        Reason.NEEDS_HUMAN,
    ),
    (saga(SagaStatus.COMPENSATED, f"aborted by olga: {SECRET}"), Reason.STOPPED_BY_A_PERSON),
    (
        saga(SagaStatus.COMPENSATED, f"the trusted facts changed since ...: {SECRET}"),
        Reason.FACTS_CHANGED,
    ),
    (
        saga(SagaStatus.NEEDS_HUMAN, f"the plan could not be re-checked ...: {SECRET}"),
        Reason.FACTS_UNREADABLE,
    ),
    (
        saga(SagaStatus.COMPENSATED, f"capture was not begun: {SECRET}, and that time has passed"),
        Reason.TOO_LATE,
    ),
    (saga(SagaStatus.COMPENSATED, SECRET), Reason.STOPPED),
]


@pytest.mark.parametrize(("state", "code"), CASES, ids=[str(c) for _, c in CASES])
def test_each_reason_is_a_code_and_pivotals_words(state: SagaState, code: Reason | None) -> None:
    said = told(state)
    assert (said and said.code) == code
    if said is not None:
        for word in ("Bearer", "sk_live", "ann", "olga", "threshold", "150"):
            assert word not in said.message, word


@pytest.mark.parametrize("decided", [ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED])
def test_a_decision_is_told_without_who_or_why(decided: ApprovalStatus) -> None:
    record = ApprovalRecord(
        step=1,
        status=decided,
        reason="capture amount=180 exceeds the approval threshold 150",
        rationale="r",
        requested_at=0.0,
        expires_at=1.0,
        approver="ann",
        note="on our watch list",
        required=2,
    )
    state = replace(
        saga(SagaStatus.COMPENSATED, f"approval for capture {decided} by ann"), approval=record
    )
    said = told(state)
    assert said is not None
    expected = (
        Reason.APPROVAL_REJECTED if decided is ApprovalStatus.REJECTED else Reason.APPROVAL_EXPIRED
    )
    assert said.code is expected
    assert "capture" in said.message
    for word in ("ann", "watch", "150", "2"):
        assert word not in said.message, word


def test_the_agents_own_stop_is_read_back_and_no_one_elses() -> None:
    state = saga(SagaStatus.COMPENSATED, "aborted by adk:check: the order check said 'invalid'")
    own = told(state, own={"adk:check"}.__contains__)
    assert own is not None
    assert own.code is Reason.STOPPED_BY_THE_AGENT
    assert own.message == "aborted by adk:check: the order check said 'invalid'"
    other = told(state, own={"adk:plan"}.__contains__)
    assert other is not None
    assert other.code is Reason.STOPPED_BY_A_PERSON
    assert "invalid" not in other.message
