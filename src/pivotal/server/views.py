"""Ledger records as JSON for the API."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pivotal.state import Event, SagaState
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


def saga(stored: StoredSaga, events: list[Event]) -> dict[str, Any]:
    """Status, steps, the events timeline and provenance of one saga."""
    state = stored.state
    return outcome(state) | {
        "catalogue": state.catalogue,
        "plan_digest": state.plan_digest,
        "created_at": state.created_at,
        "updated_at": state.updated_at,
        "provenance": stored.plan.provenance.model_dump(mode="json"),
        "rationale": stored.plan.rationale,
        "plan": stored.plan.model_dump(mode="json"),
        "steps": [asdict(r) for r in state.steps],
        "events": [asdict(e) | {"type": e.type.value} for e in events],
    }


def dead_letter(letter: DeadLetter) -> dict[str, Any]:
    return asdict(letter)
