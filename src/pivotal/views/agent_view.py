"""What an agent is told, on every surface that answers one: the HTTP API's agent routes,
the MCP tools, the engine's outbox announcements (addressed to the agent that asked), the
rollout's answers, the planning loop and the ADK session. Agents are told outcomes, never
the policy.

An agent sees a saga's status, each step's name, kind, status and attempts, whether Pivotal
took its effect back, and why it ended as a ``Reason`` code with a short message of Pivotal's
own words (``told``), naming at most a step. It never sees a step's results or error texts (a
provider's reply may carry a credential), an undo's events, keys or notes, an approval
record (who approved or rejected, their note, how many people must approve), the approval
threshold or a tier's limit, the rollout's limit (a size an agent could learn to split a
plan under), nor who stopped or settled a saga and why. People read all of it on their own
pages and routes; the ledger keeps every word.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from pivotal.sagas.agent_reasons import WAITING as WAITING
from pivotal.sagas.agent_reasons import Reason as Reason
from pivotal.sagas.agent_reasons import Told as Told
from pivotal.sagas.agent_reasons import announced as announced
from pivotal.sagas.agent_reasons import kept_in_shadow as kept_in_shadow
from pivotal.sagas.agent_reasons import refused_by_rollout as refused_by_rollout
from pivotal.sagas.agent_reasons import told as told
from pivotal.sagas.state import SagaState, SagaStatus, UndoStatus
from pivotal.store.base import StoredSaga
from pivotal.views.catalogue_view import CatalogueDescription, describe_catalogue

if TYPE_CHECKING:
    from pivotal.declarations.catalogue import Catalogue


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
    reason: str | None = Field(description="Why, in Pivotal's words (see reason_code).")
    reason_code: Reason | None = Field(description="Why, as a stable code.")
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


def sign_off(state: SagaState) -> SignOff | None:
    """The person's decision ``state`` waits for, or had: its step, status and times."""
    approval = state.approval
    if approval is None:
        return None
    return SignOff(
        step=approval.step,
        step_name=state.steps[approval.step].name,
        status=approval.status.value,
        reason=WAITING,
        expires_at=approval.expires_at,
        decided_at=approval.decided_at,
    )


def agent_saga(stored: StoredSaga, *, own: Callable[[str], bool] | None = None) -> SagaView:
    """``stored`` as its proposer may see it (``own``: as in ``told``)."""
    state = stored.state
    why = told(state, own=own)
    return SagaView(
        saga_id=state.saga_id,
        catalogue=state.catalogue,
        status=state.status,
        finished=state.status.terminal,
        reason=None if why is None else why.message,
        reason_code=None if why is None else why.code,
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
        sign_off=sign_off(state),
        created_at=state.created_at,
        updated_at=state.updated_at,
        next=next_step(state.status),
    )


def agent_outcome(state: SagaState) -> dict[str, Any]:
    """A saga's status after an agent submitted (or sent again) its plan: the HTTP API's
    answer, shaped as people's (``server.views.outcome``) without the approval record."""
    why = told(state)
    shown = sign_off(state)
    return {
        "saga_id": state.saga_id,
        "status": state.status.value,
        "version": state.version,
        "reason": None if why is None else why.message,
        "reason_code": None if why is None else why.code.value,
        "approval": None if shown is None else shown.model_dump(mode="json"),
    }


# -- catalogues -------------------------------------------------------------------------------

APPROVAL_WORDS = (
    "a person may have to approve the point of no return before it runs; the saga then "
    "waits (awaiting_approval)"
)
NO_APPROVAL_WORDS = "no step waits for a person"
ROLLOUT_WORDS = (
    "an agent's plan may be kept in shadow for a person's review (rollout_shadow) or refused "
    "(rollout_refused) instead of running"
)
NO_ROLLOUT_WORDS = "an agent's valid plan runs as submitted"


def agent_catalogue(catalogue: Catalogue) -> CatalogueDescription:
    """``catalogue`` described for an agent: its steps, their argument schemas and its plan
    rules (what a valid plan must be), with its approval policy and rollout said only to
    exist, never their thresholds, tiers or limits."""
    described = describe_catalogue(catalogue)
    return replace(
        described,
        approval=APPROVAL_WORDS if catalogue.approval is not None else NO_APPROVAL_WORDS,
        rollout=ROLLOUT_WORDS if catalogue.rollout is not None else NO_ROLLOUT_WORDS,
    )
