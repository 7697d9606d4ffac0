"""Ledger records as JSON for the API."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from pivotal.sagas.progress import Shown, as_json
from pivotal.sagas.state import Event, SagaState, SagaStatus
from pivotal.store.base import DeadLetter, StoredSaga


def outcome(state: SagaState) -> dict[str, Any]:
    """A saga's status after a submission or a decision."""
    return {
        "saga_id": state.saga_id,
        "status": state.status.value,
        "version": state.version,
        "reason": state.reason,
        "approval": asdict(state.approval) if state.approval else None,
    }


def saga(
    stored: StoredSaga,
    events: list[Event],
    progress: Mapping[int, Shown] | None = None,
    no_worker: str | None = None,
) -> dict[str, Any]:
    """Status, steps, the events timeline and provenance of one saga; ``progress``: where
    its calls stand (``pivotal.sagas.progress.live``); ``no_worker``: why it waits for a worker
    while none is alive (``pivotal.views.worker_wait.waiting``)."""
    state = stored.state
    return outcome(state) | {
        "catalogue": state.catalogue,
        "plan_digest": state.plan_digest,
        "created_at": state.created_at,
        "updated_at": state.updated_at,
        "provenance": stored.plan.provenance.model_dump(mode="json"),
        "provenance_ref": state.provenance_ref,  # what each event's provenance_ref resolves to
        "rationale": stored.plan.rationale,
        "plan": stored.plan.model_dump(mode="json"),
        "steps": [asdict(r) for r in state.steps],
        "progress": as_json(progress or {}),
        "no_worker": no_worker,
        "events": [asdict(e) | {"type": e.type.value} for e in events],
    }


def dead_letter(letter: DeadLetter) -> dict[str, Any]:
    return asdict(letter)


# -- the shapes the API answers with (its OpenAPI response schemas) ------------------------


class View(BaseModel):
    model_config = ConfigDict(extra="allow")


class Outcome(View):
    """A saga's status after a submission or a decision."""

    saga_id: str
    status: SagaStatus
    version: int
    reason: str | None
    approval: dict[str, Any] | None = Field(description="The pending or decided approval.")


class Submitted(Outcome):
    created: bool = Field(description="False when this saga id was recorded already.")


class SagaView(Outcome):
    """Status, steps, the events timeline, provenance and plan of one saga."""

    catalogue: str
    plan_digest: str
    created_at: float
    updated_at: float
    provenance: dict[str, Any]
    provenance_ref: str = Field(
        description="The provenance record's reference, which every event carries."
    )
    rationale: str
    plan: dict[str, Any]
    steps: list[dict[str, Any]]
    progress: dict[str, dict[str, Any]] = Field(
        description="By step index, where each call stands on the ledger's clock (state: "
        "in_flight, in_doubt until a time, or ended_unrecorded), what it last reported "
        "(ctx.progress) with its attempt, when it began (since) and reported (at), and a "
        "line to show."
    )
    no_worker: str | None = Field(
        default=None,
        description="Why the saga waits for a worker while none is alive (null: a worker is "
        "alive, or it waits for none).",
    )
    events: list[dict[str, Any]]


class Validated(View):
    valid: bool
    errors: list[dict[str, Any]] = Field(description="Each as ``PlanError.to_dict``.")


class CatalogueView(View):
    catalogue: str
    schema_: dict[str, Any] = Field(alias="schema", description="The plan's JSON Schema.")
    text: str
    steps: list[Any]


class SagaRow(View):
    saga_id: str
    catalogue: str
    status: SagaStatus
    reason: str | None
    created_at: float
    updated_at: float


class PendingRow(View):
    saga_id: str
    catalogue: str
    step: str
    step_index: int
    version: int | None
    provenance: dict[str, Any] | None


class DeadLetterRow(View):
    id: int
    saga_id: str
    step: int
    step_name: str
    undo_key: str
    error: str | None
    attempts: int
    status: Literal["open", "resolved"]
    created_at: float
    retries: int
    next_retry_at: float | None
    resolved_at: float | None
    resolution: str | None


class EscalationRow(View):
    id: int
    run: dict[str, Any]
    status: Literal["open", "resolved"]
    reason: str
    created_at: float
    resolved_at: float | None
    resolved_by: str | None
    resolution: str | None
    saga_id: str | None


class Retried(View):
    dead_letter_id: int
    status: Literal["open"]
    next_retry_at: float
    noted: bool = Field(
        description="Whether the saga notes who asked (false: it kept changing; the letter "
        "is due all the same)."
    )


class Resolved(View):
    dead_letter_id: int
    status: Literal["resolved"]
    by: str


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list, newest or oldest first as the list says."""

    items: list[T]
    limit: int
    offset: int
    next_offset: int | None = Field(description="The offset of the next page; null: none.")


class SagaPage(Page[SagaRow]):
    """One page of sagas; ``next_cursor`` starts the next (null: this is the last)."""

    next_cursor: str | None = Field(description="Pass as cursor for the next page.")


class EventLog(BaseModel):
    """A saga's event log, each event as ``sagas show`` has it, its texts redacted."""

    saga_id: str
    events: list[dict[str, Any]]
    provenance: dict[str, dict[str, Any]] = Field(
        description="By reference, the provenance record each event's provenance_ref names."
    )
