"""Whether a scheduled retry is overdue: its time came on the ledger's clock and it is still
waiting, so nothing (no worker, no sweep) has picked it up. ``sagas show`` and the saga's
page mark such a step, or such an undo, so a person sees that the work stalled."""

from __future__ import annotations

from pivotal.moments import age
from pivotal.sagas.state import StepRecord, StepStatus, UndoStatus

__all__ = ["late", "overdue", "step_overdue", "undo_overdue"]


def late(due: float | None, waiting: bool, now: float | None) -> float | None:
    """Seconds a retry due at ``due`` is late by ``now`` (the ledger's clock), while it is
    still ``waiting``; None when it is not late (not due yet, not waiting, no time known)."""
    if due is None or now is None or not waiting or now <= due:
        return None
    return now - due


def overdue(due: float | None, waiting: bool, now: float | None) -> str | None:
    """``overdue 2m 5s`` when a retry due at ``due`` is late (``late``); else None."""
    seconds = late(due, waiting, now)
    return None if seconds is None else f"overdue {age(seconds)}"


def step_overdue(r: StepRecord, now: float | None) -> str | None:
    """``overdue 2m 5s`` when the step's next attempt is late; else None."""
    return overdue(r.next_attempt_at, r.status is StepStatus.RETRY_WAIT, now)


def undo_overdue(r: StepRecord, now: float | None) -> str | None:
    """``overdue 2m 5s`` when the next attempt of the step's undo (or the sweep's retry of
    its dead letter) is late; else None."""
    waiting = r.undo_status in (UndoStatus.RETRY_WAIT, UndoStatus.DEAD_LETTERED)
    return overdue(r.undo_next_attempt_at, waiting, now)
