"""What an operator does to a saga, the same on every surface (the CLI, the HTTP API, the
pages): abort it before its point of no return, and read its event log as JSON. Running the
plan of a compensated saga again is ``pivotal.orchestration.rerun`` (through
``Orchestrator.rerun``).

Each surface only maps the errors here to its answer: ``SagaNotAbortable`` (the API's 409),
``InvalidInput`` for a reason that is empty, too long or holds a control character (422),
``SagaNotFound`` (404).

``abort`` records the verdict only: a worker (or the pass that holds the saga's lease) runs
the undos, as ``resume`` leaves the running to a worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from pivotal.errors import InvalidInput, SagaConflict, SagaNotFound
from pivotal.orchestration.decisions import abort_refusal
from pivotal.orchestration.fork import Edit
from pivotal.orchestration.fork import refusal as fork_refusal
from pivotal.orchestration.rerun import refusal
from pivotal.people.principals import names_someone
from pivotal.redaction import redact
from pivotal.sagas import saga_ids
from pivotal.sagas.state import Event, SagaState
from pivotal.terminal import printable

if TYPE_CHECKING:
    from pivotal.orchestration.orchestrator import Orchestrator
    from pivotal.store.base import Store, StoredSaga

MAX_REASON = 4000  # characters of a reason, as every other reason an operator gives
_KEPT = frozenset("\n\t")  # a reason may span lines (a textarea); nothing else invisible


class SagaNotAbortable(SagaConflict):
    """The saga is past its point of no return, waiting for an approval, or over."""

    code = "saga_not_abortable"


def reason_of(given: str, what: str) -> str:
    """``given`` without surrounding blanks; ``InvalidInput`` when nothing is left, when it
    is longer than ``MAX_REASON`` or holds a control character (other than a newline or a
    tab), a bidi control or another character a terminal would not show as it is."""
    reason = given.strip()
    if not reason:
        raise InvalidInput(f"{what} needs a reason")
    if len(reason) > MAX_REASON:
        raise InvalidInput(f"{what}: a reason has at most {MAX_REASON} characters")
    bad = sorted({printable(c) for c in reason if c not in _KEPT and printable(c) != c})
    if bad:
        raise InvalidInput(f"{what}: the reason holds control characters ({', '.join(bad)})")
    return reason


async def abort(
    orchestrator: Orchestrator, saga_id: str, by: str, reason: str, *, search: str | None = None
) -> SagaState:
    """Record that ``by`` aborted the saga, and why (and ``search``, the query of the search
    that selected it, when one act aborted many): it starts compensating and a worker runs
    the undos. ``SagaNotAbortable`` (with the orchestrator's reason) when it cannot be."""
    why = reason_of(reason, "aborting a saga")
    if not names_someone(by):
        raise InvalidInput("aborting a saga needs who aborted it")
    await orchestrator.get(saga_id)  # SagaNotFound first
    try:
        return await orchestrator.abort(saga_id, by, why, run=False, search=search)
    except InvalidInput as exc:  # the reason is good: it is the saga's state that refuses
        raise SagaNotAbortable(exc.message) from None


async def fork(
    orchestrator: Orchestrator, saga_id: str, edits: list[Edit], by: str, reason: str
) -> SagaState:
    """Fork the saga (``Orchestrator.fork``) for ``by``, with a reason that says something
    (``reason_of``): recorded on both sagas."""
    why = reason_of(reason, "forking a saga")
    return await orchestrator.fork(saga_id, edits, by, why)


def offered(state: SagaState, now: float) -> dict[str, bool]:
    """Which of these actions a page offers for the saga at ``now`` (the ledger's clock):
    ``abort`` when ``pivotal.orchestration.decisions.abort_refusal`` has no objection,
    ``rerun`` when ``pivotal.orchestration.rerun.refusal`` has no objection, ``fork`` when
    ``pivotal.orchestration.fork.refusal`` has none. Only a hint for the buttons: the orchestrator
    decides when one is pressed."""
    return {
        "abort": abort_refusal(state) is None,
        "rerun": refusal(state, now) is None,
        "fork": fork_refusal(state, now) is None,
    }


def events_document(stored: StoredSaga, events: Sequence[Event]) -> dict[str, Any]:
    """What every surface gives for a saga's events: ``{"saga_id", "events",
    "provenance"}``; each event's ``provenance_ref`` is a key of ``provenance``, the record
    of who proposed the plan, in which run, from what."""
    state = stored.state
    record = stored.plan.provenance.model_dump(mode="json")
    return {
        "saga_id": state.saga_id,
        "events": events_json(events),
        "provenance": {state.provenance_ref: record},
    }


async def events_of(store: Store, saga_id: str) -> dict[str, Any]:
    """``events_document`` of the saga in ``store``; ``SagaNotFound`` when there is none."""
    stored = await store.load(saga_id)
    if stored is None:
        raise SagaNotFound(saga_ids.missing(saga_id[:200]))
    return events_document(stored, await store.events(saga_id))


def redacted(events: Sequence[Event]) -> list[Event]:
    """The events with every text in their data passed through ``redaction.redact`` (a
    step's error may quote a URL with a password, or a ``token=...``)."""
    return [replace(e, data=_redacted(dict(e.data))) for e in events]


def shown(stored: StoredSaga, events: Sequence[Event]) -> tuple[StoredSaga, list[Event]]:
    """The saga and its events as every surface shows them to a person (``sagas show``,
    ``GET /v1/sagas/{id}``, the saga's page and its pictures): each step's result and
    errors, the saga's reason, its approval's texts, its last error and the events'
    data passed through ``redaction.redact``."""
    state = stored.state
    steps = tuple(
        replace(
            r,
            result=_redacted(r.result),
            error=_text(r.error),
            undo_error=_text(r.undo_error),
        )
        for r in state.steps
    )
    approval = state.approval
    if approval is not None:
        approval = replace(approval, reason=redact(approval.reason), note=_text(approval.note))
    state = replace(state, steps=steps, reason=_text(state.reason), approval=approval)
    kept = replace(stored, state=state, last_error=_text(stored.last_error))
    return kept, redacted(events)


def _text(value: str | None) -> str | None:
    return None if value is None else redact(value)


def events_json(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The event log as JSON (each event as ``sagas show --json`` has it), ``redacted``."""
    return [asdict(e) | {"type": e.type.value} for e in redacted(events)]


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v) for v in value]
    return value
