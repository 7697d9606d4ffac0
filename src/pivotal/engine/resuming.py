"""A person resumes a parked saga from a step: what becomes of each step, as the machine
decides it (``machine``'s rows for ``BEFORE_FROM``, ``AT_FROM`` and ``AFTER_FROM``).

Pure: the state before the saga was parked, the step, and the ledger's ``now`` decide.
``Orchestrator.resume`` records the answer in one ``saga_resumed`` event (its ``settled``
steps), or refuses with every reason and records nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pivotal.declarations.catalogue import StepKind
from pivotal.engine.journal import point_of_no_return
from pivotal.engine.machine import Do, Facts, Phase, Standing, decide
from pivotal.errors import InvalidInput, SagaConflict
from pivotal.sagas.state import SagaState, SagaStatus, StepRecord, StepStatus


class ResumeFromRefused(SagaConflict):
    """A parked saga goes on from a step only as the saga machine allows."""

    code = "resume_from_refused"


@dataclass(frozen=True, slots=True)
class FromStep:
    """What resuming from a step does: the steps the person settles by hand, or why not."""

    settled: tuple[int, ...]
    refused: tuple[str, ...]


def standing(r: StepRecord) -> Standing:
    """Where step ``r`` stands: succeeded, never run, provably without effect, or in doubt
    (an attempt may have taken effect: unknown, started, or any doubt window recorded)."""
    if r.status is StepStatus.SUCCEEDED:
        return Standing.SUCCEEDED
    if r.status in (StepStatus.UNKNOWN, StepStatus.STARTED) or r.doubt_until is not None:
        return Standing.IN_DOUBT
    if r.status is StepStatus.PENDING and r.attempts == 0:
        return Standing.NOT_RUN
    return Standing.NO_EFFECT


def _place(index: int, start: int) -> Phase:
    if index < start:
        return Phase.BEFORE_FROM
    return Phase.AT_FROM if index == start else Phase.AFTER_FROM


def resume_from(before: SagaState, start: int, now: float) -> FromStep:
    """Resuming ``before`` (the saga as it was when parked) from step ``start`` at ``now``:
    the machine's decision for every step, gathered."""
    pnr = point_of_no_return(before)
    settled: list[int] = []
    refused: dict[str, list[str]] = {}  # the reason, and the steps it is given for
    for r in before.steps:
        started_unbounded = r.status is StepStatus.STARTED and r.doubt_until is None
        facts = Facts(
            can_land=started_unbounded or (r.doubt_until is not None and now < r.doubt_until),
            compensable=r.kind == StepKind.COMPENSABLE.value,
            is_pivot=r.index == pnr,
            compensating=before.status is SagaStatus.COMPENSATING,
        )
        decision = decide(_place(r.index, start), standing(r), facts)
        if decision.do is Do.BY_HAND:
            settled.append(r.index)
        elif decision.do is Do.REFUSE:
            refused.setdefault(decision.row.why, []).append(f"{r.name} (step {r.index})")
    said = tuple(f"{', '.join(steps)}: {why}" for why, steps in refused.items())
    return FromStep(tuple(settled), said)


def step_named(state: SagaState, step: str) -> int:
    """The index of the step ``step`` names in ``state``: an index from 0, or the name of a
    step the saga calls once; ``InvalidInput`` naming the steps otherwise."""
    listed = ", ".join(f"{r.index} {r.name}" for r in state.steps)
    if step.isascii() and step.isdigit():
        if int(step) < len(state.steps):
            return int(step)
        raise InvalidInput(f"saga {state.saga_id} has no step {step}: its steps are {listed}")
    found = [r.index for r in state.steps if r.name == step]
    if len(found) == 1:
        return found[0]
    if found:
        raise InvalidInput(
            f"saga {state.saga_id} calls {step} {len(found)} times: name the step by its "
            f"index ({listed})"
        )
    raise InvalidInput(f"saga {state.saga_id} has no step {step[:200]!r}: its steps are {listed}")
