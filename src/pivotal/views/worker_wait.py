"""A saga that waits for a worker, while none is alive: said where a person waits (the
saga's page and the approver's landing page, ``sagas show`` and its ``--watch``), with what
to run. Everything is decided on the ledger's clock:

* ``alive``: the workers whose heartbeat is recent and who did not say they stopped
  (``WorkerInfo.state``);
* ``waits_for``: why a saga needs a worker now, as a worker's claim sees it (going, due and
  with no live lease): it was submitted and nobody claimed it, a retry (of a step or of an
  undo) is due, its holder's lease ended with a call unrecorded, or it is ready to go on
  (approved, resumed); or a dead letter's retry of it is due;
* ``no_worker``: that reason, while no worker is alive (``sentence`` words it, with the
  command that starts one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pivotal.moments import moment
from pivotal.sagas.call_state import Lease, call_of, lease_of
from pivotal.sagas.state import SagaState, SagaStatus, StepStatus, UndoStatus
from pivotal.store.base import WorkerInfo

if TYPE_CHECKING:
    from pivotal.store.base import Store

RUN = "pivotal --db URL worker"  # the command, as a page words it (it knows no URL)
WORKERS_READ = 100  # the latest heartbeats read: the alive ones come first


def alive(workers: Iterable[WorkerInfo], now: float) -> list[str]:
    """The names of the workers alive at ``now``, on the ledger's clock."""
    return [w.name for w in workers if w.state(now) == "alive"]


def waits_for(
    state: SagaState, now: float, lease: Lease, letters_due: Sequence[float] = ()
) -> str | None:
    """Why the saga needs a worker at ``now`` (None: it does not, or not yet);
    ``letters_due``: when each of its open dead letters fell due."""
    if lease is not Lease.LIVE and state.status in _ACTIVE:
        wake = state.wake_at
        if state.status is SagaStatus.SUBMITTED:
            return f"submitted at {moment(state.created_at)}, it was never claimed"
        if wake is not None and wake <= now:
            return _retry_due(state, now)
        if wake is None:
            for rec in state.steps:
                if call_of(rec).status is StepStatus.STARTED:
                    return f"the call of {rec.name} (step {rec.index}) has no live holder"
            return "it is ready to go on, and no worker holds it"
    if letters_due:
        return f"a dead letter's retry was due at {moment(min(letters_due))}"
    return None


def _retry_due(state: SagaState, now: float) -> str:
    """The first retry of the saga that is due at ``now``."""
    for rec in state.steps:
        if rec.status is StepStatus.RETRY_WAIT and _due(rec.next_attempt_at, now):
            due = moment(rec.next_attempt_at or now)
            return f"the retry of {rec.name} (step {rec.index}) was due at {due}"
        if rec.undo_status is UndoStatus.RETRY_WAIT and _due(rec.undo_next_attempt_at, now):
            due = moment(rec.undo_next_attempt_at or now)
            return f"the retry of {rec.name}'s undo (step {rec.index}) was due at {due}"
    return "a retry is due"


_ACTIVE = (SagaStatus.SUBMITTED, SagaStatus.RUNNING, SagaStatus.COMPENSATING)
_PARKED = (SagaStatus.AWAITING_APPROVAL, SagaStatus.NEEDS_HUMAN)


def _due(at: float | None, now: float) -> bool:
    return at is not None and at <= now


def no_worker(reason: str | None, workers_alive: Sequence[str]) -> str | None:
    """Why the saga waits for a worker when none is alive to move it (None: a worker is
    alive, or the saga waits for none)."""
    return None if workers_alive else reason


def sentence(reason: str, run: str = RUN) -> str:
    """What a person waiting on the saga reads: why it waits, and what to run."""
    return f"No worker is alive to run this saga ({reason}): start one with `{run}`."


async def waiting(store: Store, state: SagaState, now: float) -> str | None:
    """``no_worker`` for the saga as the ledger has it at ``now`` (its time)."""
    letters = await store.dead_letters("open", due_by=now)
    due = [d.next_retry_at or now for d in letters if d.saga_id == state.saga_id]
    if not due and (state.status.terminal or state.status in _PARKED):
        return None
    found = await store.lease_of(state.saga_id)
    lease = lease_of(found[0], found[2], now) if found is not None else Lease.NONE
    reason = waits_for(state, now, lease, due)
    if reason is None:
        return None
    return no_worker(reason, alive(await store.list_workers(now, WORKERS_READ), now))
