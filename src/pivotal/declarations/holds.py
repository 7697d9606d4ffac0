"""Holds that lapse on their own: deferral, the cheapest compensation.

A card authorisation, a stock reservation with an expiry, a provisional booking: the
provider undoes such a hold by itself after a time. A plan that holds first and makes the
irreversible call last (capture, not charge) fails by doing nothing: what it held lapses.
A compensable step says so with ``lapses_after`` (seconds after its effect is made). Then:

* its undo, once the hold has certainly lapsed, is recorded as ``undo_lapsed`` without a
  call (there is nothing left to reverse, and a provider may refuse to void what expired);
* the point of no return is begun only while every hold before it is certainly in place
  for the whole of its call; otherwise the saga compensates before it, saying which hold;
* an approval of the pivot is asked for no longer than those holds cover it: the request
  expires when the first of them could lapse, and an approval given later is refused.

Times are bounded both ways by what the ledger knows: a hold was made no earlier than its
step's first attempt began (``effect_from``), and no later than its last outcome or the
moment its last attempt could still land (``made_by``). "In place" counts from the first,
"lapsed" from the second plus the catalogue's ``doubt_grace`` (clocks disagree): between
the two nothing is assumed, and the undo is called.
"""

from __future__ import annotations

from dataclasses import dataclass

from pivotal.declarations.catalogue import Catalogue, Step, StepKind
from pivotal.moments import moment
from pivotal.sagas.state import SagaState, StepRecord, StepStatus

# a hold may exist once its step has begun an attempt
_MAY_EXIST = (StepStatus.STARTED, StepStatus.RETRY_WAIT, StepStatus.SUCCEEDED, StepStatus.UNKNOWN)


@dataclass(frozen=True, slots=True)
class Hold:
    """One hold a plan has made, and until when it is certainly in place."""

    index: int
    name: str
    held_until: float  # its first attempt's start plus its lapse: it may lapse from here on

    def describe(self) -> str:
        return f"the hold {self.name} (step {self.index}) may lapse from {moment(self.held_until)}"


def lapsed_since(step: Step, rec: StepRecord, grace: float) -> float | None:
    """From when the hold made by ``rec`` has certainly lapsed (None: the step is no hold,
    or never began): the latest moment it may have been made, plus its lapse and ``grace``."""
    made_by = rec.made_by
    if step.lapses_after is None or made_by is None:
        return None
    return made_by + step.lapses_after + grace


def holds_before(state: SagaState, catalogue: Catalogue, index: int) -> list[Hold]:
    """The holds that may be in place before step ``index``, the first to lapse first."""
    found: list[Hold] = []
    for rec in state.steps[:index]:
        step = catalogue.get(rec.name)
        if (
            step is None
            or step.kind is not StepKind.COMPENSABLE
            or step.lapses_after is None
            or rec.status not in _MAY_EXIST
            or rec.effect_from is None
        ):
            continue
        found.append(Hold(rec.index, rec.name, rec.effect_from + step.lapses_after))
    return sorted(found, key=lambda h: (h.held_until, h.index))


@dataclass(frozen=True, slots=True)
class Cover:
    """Until when step ``index`` may begin with every hold before it in place for the whole
    of its call (``begin_by``), and the hold that sets that bound."""

    index: int
    begin_by: float
    hold: Hold

    def describe(self, step: str) -> str:
        return (
            f"{self.hold.describe()}: {step} (step {self.index}) must begin by "
            f"{moment(self.begin_by)} to end while it holds"
        )


def cover(state: SagaState, catalogue: Catalogue, index: int) -> Cover | None:
    """The bound the holds before step ``index`` set on its start (None: no hold)."""
    holds = holds_before(state, catalogue, index)
    if not holds:
        return None
    step = catalogue[state.steps[index].name]
    call = catalogue.timeout_of(step) + catalogue.doubt_grace
    return Cover(index, holds[0].held_until - call, holds[0])


def expiry_cause(state: SagaState, catalogue: Catalogue) -> str:
    """What an expired approval's reason adds when the holds its step needs set the expiry
    (an empty string when they did not)."""
    approval = state.approval
    if approval is None:
        return ""
    bound = cover(state, catalogue, approval.step)
    if bound is None or bound.begin_by > approval.expires_at:
        return ""
    return f"; it could not outlast the holds: {bound.hold.describe()}"
