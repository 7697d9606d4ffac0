"""Where a step's call stands, as a person reads it: decided from the ledger alone.

A report (``ctx.progress``) says how far a call got, not that it still runs: the worker
that made it may have stopped or crashed since. So the call is shown by what the ledger
proves, on the ledger's clock:

* **in flight**: the step (or its undo) is started and the saga's lease is live;
* **in doubt until** a time: no live holder, but the attempt may still land until its
  deadline (the step's ``doubt_until``);
* **ended, unrecorded**: no live holder and the attempt can no longer land: the call may
  have ended without its result being recorded (the next holder settles it). The ledger
  proves it over from the later of its holder's lease expiry and its deadline (``ended_by``).

``decide`` is the one decision (a table test covers it); ``call_of`` reads a step's record
for it, and ``progress.describe`` words it for the CLI, the API and the page alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pivotal.sagas.state import StepRecord, StepStatus, UndoStatus


class Lease(StrEnum):
    """The saga's lease on the ledger's clock."""

    LIVE = "live"  # held, and not expired
    EXPIRED = "expired"  # held by a worker that did not renew it in time
    NONE = "none"  # nobody holds it


class CallState(StrEnum):
    IN_FLIGHT = "in_flight"
    UNRECORDED = "ended_unrecorded"
    IN_DOUBT = "in_doubt"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where the call stands; ``running``: whether how long it has run may be shown (only
    of a call in flight that reported: its report says when it began)."""

    state: CallState
    running: bool


@dataclass(frozen=True, slots=True)
class Call:
    """The latest call of a step as the ledger records it: the undo's once it began."""

    status: StepStatus  # the undo's status mapped onto the action's words
    attempt: int
    doubt_until: float | None
    undo: bool


def lease_of(owner: str | None, expires_at: float | None, now: float) -> Lease:
    """The lease as ``Store.lease_of`` gives it, at ``now`` on the ledger's clock."""
    if owner is None:
        return Lease.NONE
    return Lease.LIVE if expires_at is not None and expires_at > now else Lease.EXPIRED


_UNDO = {
    UndoStatus.STARTED: StepStatus.STARTED,
    UndoStatus.RETRY_WAIT: StepStatus.RETRY_WAIT,
}


def call_of(step: StepRecord) -> Call:
    """The call of ``step`` a person asks about: its undo's once the undo began."""
    if step.undo_status is not UndoStatus.NONE:
        status = _UNDO.get(step.undo_status, StepStatus.SUCCEEDED)
        return Call(status, step.undo_attempts, step.undo_doubt_until, undo=True)
    return Call(step.status, step.attempts, step.doubt_until, undo=False)


def decide(status: StepStatus, lease: Lease, doubt_open: bool, reported: bool) -> Verdict | None:
    """Where a step's call stands (None: no call to speak of: not begun, or its outcome is
    recorded and no earlier attempt may still land).

    ``doubt_open``: the attempt's deadline (``doubt_until``) is still ahead on the ledger's
    clock; ``reported``: the attempt made a progress report."""
    if status is StepStatus.STARTED:
        if lease is Lease.LIVE:
            return Verdict(CallState.IN_FLIGHT, running=reported)
        state = CallState.IN_DOUBT if doubt_open else CallState.UNRECORDED
        return Verdict(state, running=False)
    if status in (StepStatus.RETRY_WAIT, StepStatus.UNKNOWN) and doubt_open:
        # an attempt that timed out or crashed may still take effect until its deadline
        return Verdict(CallState.IN_DOUBT, running=False)
    return None


def ended_by(expired_at: float | None, doubt_until: float | None) -> float | None:
    """When the ledger proves an unrecorded call over: once its holder's lease had expired
    (``expired_at``) and its deadline had passed (``doubt_until``), the later of the two it
    records; None when it records neither (a lease released, no deadline): it does not tell
    when the call ended."""
    known = [t for t in (expired_at, doubt_until) if t is not None]
    return max(known) if known else None
