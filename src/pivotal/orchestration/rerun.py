"""Running the plan of a compensated saga again, as a new saga: when it may, and as what.

Every surface (the CLI, the HTTP API, the pages) reaches it through ``Orchestrator.rerun``,
and the pages offer it on the same rule. A re-run makes every effect of the plan anew, so it
is refused while anything of the first saga may still land or stayed in place
(``refusal``):

- the saga ended other than ``compensated``;
- an undo restored only part of what was there (``undo_partial``): the rest stays;
- an undo is dead-lettered, or has not ended;
- an attempt of a step, or of its undo, may still take effect (its ``doubt_until`` /
  ``undo_doubt_until`` has not passed on the ledger's clock): asking again later may do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pivotal.declarations.plan import Plan, Rerun
from pivotal.errors import SagaConflict
from pivotal.sagas.state import SagaState, SagaStatus, StepRecord, UndoStatus

if TYPE_CHECKING:
    from pivotal.store.base import StoredSaga

RERUNNABLE = SagaStatus.COMPENSATED  # the one status whose plan may run again
_UNDO_UNENDED = (UndoStatus.STARTED, UndoStatus.RETRY_WAIT)


class SagaNotRerunnable(SagaConflict):
    """Only a saga that ended ``compensated``, with nothing of it left in place or still
    able to land, runs its plan again."""

    code = "saga_not_rerunnable"


def refusal(state: SagaState, now: float) -> str | None:
    """Why the plan of ``state`` may not run again at ``now`` (the ledger's clock), or
    None when it may. Pure: the state and the time decide."""
    if state.status is not RERUNNABLE:
        return (
            f"saga {state.saga_id} is {state.status.value}: only a compensated saga runs its "
            "plan again (a completed or running one would do the work twice; after "
            "compensation_failed or resolved, what is still in place is a person's to settle)"
        )
    reasons = [
        *_listed(
            "undone only in part",
            (r for r in state.steps if r.undo_status is UndoStatus.PARTIAL),
            "what its undo could not restore stays",
        ),
        *_listed(
            "undo dead-lettered, not resolved",
            (r for r in state.steps if r.undo_status is UndoStatus.DEAD_LETTERED),
            "a person settles it first",
        ),
        *still_landing(state, now),
    ]
    if not reasons:
        return None
    return (
        f"saga {state.saga_id} does not run its plan again: {'; '.join(reasons)} "
        "(a new saga would do all of its work a second time)"
    )


def still_landing(state: SagaState, now: float) -> list[str]:
    """What of ``state`` may still take effect at ``now`` (the ledger's clock), one phrase
    each: an undo that has not ended, an attempt of a step or of its undo whose doubt window
    is open. Empty when nothing may land any more."""
    return [
        *_listed(
            "undo not ended",
            (r for r in state.steps if r.undo_status in _UNDO_UNENDED),
            "it may still run",
        ),
        *(
            f"{_name(r)} may still take effect for {r.doubt_until - now:.1f} s"
            for r in state.steps
            if r.doubt_until is not None and now < r.doubt_until
        ),
        *(
            f"the undo of {_name(r)} may still take effect for {r.undo_doubt_until - now:.1f} s"
            for r in state.steps
            if r.undo_doubt_until is not None and now < r.undo_doubt_until
        ),
    ]


def _listed(what: str, steps: Iterable[StepRecord], why: str) -> list[str]:
    names = ", ".join(_name(r) for r in steps)
    return [f"{what}: {names} ({why})"] if names else []


def _name(r: StepRecord) -> str:
    return f"{r.name} (step {r.index})"


def rerun_id(saga_id: str) -> str:
    """The id of the saga that runs ``saga_id``'s plan again: one per saga, so that asking
    twice (a second click) records it once."""
    return f"rr_{hashlib.sha256(saga_id.encode()).hexdigest()[:32]}"


def rerun_plan(stored: StoredSaga, by: str, now: float, reason: str = "") -> Plan:
    """The plan of ``stored`` again, its provenance pointing back to it (``rerun_of``, with
    who asked and ``reason`` when given); ``SagaNotRerunnable``, with ``refusal``'s reason,
    when it may not run again at ``now``."""
    state = stored.state
    refused = refusal(state, now)
    if refused is not None:
        raise SagaNotRerunnable(refused)
    why = reason.strip() or None
    provenance = stored.plan.provenance.model_copy(
        update={"rerun_of": Rerun(saga_id=state.saga_id, by=by, reason=why)}
    )
    return stored.plan.model_copy(update={"provenance": provenance})
