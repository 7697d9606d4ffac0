"""A person settles a step by hand (a dead letter's undo, or every step of a parked saga):
what the machine allows (``machine``'s rows for ``RESOLVING``). Nothing that may still land
is settled by hand: what lands after the person's word would be made, or undone, twice.

Pure: the state and the ledger's ``now`` decide; the caller refuses with every reason and
records nothing (``MayStillLand``).
"""

from __future__ import annotations

from collections.abc import Iterable

from pivotal.engine.machine import Do, Facts, Phase, Tick, decide
from pivotal.errors import SagaConflict
from pivotal.moments import moment
from pivotal.sagas.state import SagaState, StepRecord, StepStatus, UndoStatus


class MayStillLand(SagaConflict):
    """Nothing is settled by hand while an attempt of it may still land: ask again once
    the moment the refusal names has passed."""

    code = "may_still_land"


def _open(until: float | None, now: float) -> bool:
    return until is not None and now < until


def refusal(r: StepRecord, now: float) -> str | None:
    """Why step ``r`` cannot be settled by hand at ``now``, naming until when; else None."""
    # a call begun in a ledger that recorded no deadline may run for ever: never by hand
    started = r.status is StepStatus.STARTED and r.doubt_until is None
    undoing = r.undo_status is UndoStatus.STARTED and r.undo_doubt_until is None
    facts = Facts(
        can_land=started or _open(r.doubt_until, now),
        undo_can_land=undoing or _open(r.undo_doubt_until, now),
    )
    decision = decide(Phase.RESOLVING, Tick.NOW, facts)
    if decision.do is Do.BY_HAND:
        return None
    until = r.undo_doubt_until if facts.undo_can_land else r.doubt_until
    when = f"; it cannot land after {moment(until)}" if until is not None else ""
    return f"{r.name} (step {r.index}): {decision.row.why}{when}"


def refusals(state: SagaState, steps: Iterable[int], now: float) -> list[str]:
    """Every reason the steps ``steps`` of ``state`` cannot be settled by hand at ``now``."""
    return [why for i in steps if (why := refusal(state.steps[i], now)) is not None]


def check(state: SagaState, steps: Iterable[int], now: float, what: str) -> None:
    """``MayStillLand`` with every reason, unless ``steps`` may all be settled by hand
    (``what``: what the person asked to settle, for the message)."""
    found = refusals(state, steps, now)
    if found:
        raise MayStillLand(
            f"saga {state.saga_id}: {what} is not settled by hand now: {'; '.join(found)}: "
            "ask again then. Nothing was recorded"
        )
