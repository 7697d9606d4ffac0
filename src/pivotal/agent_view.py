"""A saga as the agent that proposed it sees it, on every surface (the MCP tools and the
HTTP API alike): where it stands and why, never how Pivotal works on it.

An agent sees each step's name, kind, status and attempts, whether Pivotal took its effect
back, the saga's reason, and that it waits for a person. It never sees a step's results or
error texts, an undo's events, keys or notes, a provider's reply, or why a person must
decide (the approval threshold an agent could learn to stay under): that stays on the
approver's page.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from pivotal.redaction import redact
from pivotal.state import SagaStatus, UndoStatus
from pivotal.store.base import StoredSaga

WAITING = "waiting for a person's decision before the point of no return"


class StepView(BaseModel):
    index: int
    name: str
    kind: str
    status: str
    attempts: int
    reversed: bool = Field(description="Pivotal took this step's effect back.")


class SignOff(BaseModel):
    """The decision a person makes before the point of no return."""

    step: int
    step_name: str
    status: str
    reason: str = Field(description="Always the same words: why a person decides is theirs.")
    expires_at: float
    decided_at: float | None


class SagaView(BaseModel):
    """Where a saga stands."""

    saga_id: str
    catalogue: str
    status: SagaStatus
    finished: bool
    reason: str | None
    submitted_by: str
    steps: list[StepView]
    sign_off: SignOff | None
    created_at: float
    updated_at: float
    next: str


_NEXT = {
    SagaStatus.SUBMITTED: "A Pivotal worker will run it; read the saga again later.",
    SagaStatus.RUNNING: "It is running; read the saga again later.",
    SagaStatus.AWAITING_APPROVAL: (
        "It waits for a person's decision before its point of no return; nothing for you to "
        "do but read the saga again later."
    ),
    SagaStatus.COMPENSATING: "A step failed; Pivotal is taking the earlier steps back.",
    SagaStatus.COMPLETED: "It is done.",
    SagaStatus.COMPENSATED: "It did not complete; its effects were taken back. See reason.",
    SagaStatus.COMPENSATION_FAILED: "It did not complete and an operator was alerted.",
    SagaStatus.NEEDS_HUMAN: "It waits for an operator; nothing for you to do.",
    SagaStatus.RESOLVED: "An operator settled it.",
}


def next_step(status: SagaStatus) -> str:
    return _NEXT[status]


def agent_saga(stored: StoredSaga) -> SagaView:
    """``stored`` as its proposer may see it."""
    state = stored.state
    approval = state.approval
    sign_off = None
    if approval is not None:
        sign_off = SignOff(
            step=approval.step,
            step_name=state.steps[approval.step].name,
            status=approval.status.value,
            reason=WAITING,
            expires_at=approval.expires_at,
            decided_at=approval.decided_at,
        )
    return SagaView(
        saga_id=state.saga_id,
        catalogue=state.catalogue,
        status=state.status,
        finished=state.status.terminal,
        reason=None if state.reason is None else redact(state.reason),
        submitted_by=stored.plan.provenance.actor_id,
        steps=[
            StepView(
                index=r.index,
                name=r.name,
                kind=r.kind,
                status=r.status.value,
                attempts=r.attempts,
                reversed=r.undo_status is UndoStatus.DONE,
            )
            for r in state.steps
        ],
        sign_off=sign_off,
        created_at=state.created_at,
        updated_at=state.updated_at,
        next=next_step(state.status),
    )
