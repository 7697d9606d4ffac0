"""Forking a finished saga: its plan, with some arguments changed, run as a new saga.

Every surface (the CLI, the HTTP API) reaches it through ``Orchestrator.fork``, which submits
the edited plan like any other: validated against today's facts, rolled out, and approved
again by the policy. The fork's provenance names the saga it came from, who forked it, why,
and every argument changed (``provenance.forked_from``); four-eyes counts the one who forked
it among those who may not approve it. A fork makes every effect of its plan anew, whatever
the first saga did.

An edit is ``STEP.ARGUMENT=VALUE`` (``parse_edit``): STEP is a call's flat index (0 for the
first call, as in idempotency keys) or the name of a step the plan calls once; VALUE is read
as JSON, and text that is not JSON is taken as a string (quote it to keep ``"123"`` a
string); a number for an argument the plan gives as text stays text (``amount=24.95`` for
``"49.90"`` is ``"24.95"``: money is never a float).

Which sagas may be forked (``refusal``): one that ended ``completed``, ``compensated``,
``compensation_failed`` or ``resolved``, with nothing of it still able to land
(``rerun.still_landing``). A saga still under way, or parked ``needs_human`` (resume or
resolve it first), is not: its own effects may still be made.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pivotal.declarations.plan import ArgChange, Fork, ParallelGroup, Plan, StepCall
from pivotal.declarations.plan_errors import ErrorCode, PlanError
from pivotal.errors import InvalidInput, PlanRejected, SagaConflict
from pivotal.orchestration.rerun import still_landing
from pivotal.people.principals import canonical_person
from pivotal.sagas.state import SagaState, SagaStatus

if TYPE_CHECKING:
    from pivotal.declarations.catalogue import Catalogue
    from pivotal.store.base import StoredSaga

FORKABLE = frozenset(
    {
        SagaStatus.COMPLETED,
        SagaStatus.COMPENSATED,
        SagaStatus.COMPENSATION_FAILED,
        SagaStatus.RESOLVED,
    }
)
EDIT_SYNTAX = "STEP.ARGUMENT=VALUE (STEP: a call's index from 0, or a step name called once)"
_EDIT = re.compile(r"^\s*(?P<step>[^.=\s]+)\.(?P<argument>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")


class SagaNotForkable(SagaConflict):
    """Only a finished saga, with nothing of it still able to land, is forked."""

    code = "saga_not_forkable"


@dataclass(frozen=True, slots=True)
class Edit:
    """One argument to change: ``step`` as given (an index or a name), the argument and its
    new value (parsed); ``text``, the value as written, when it was written as text."""

    step: str
    argument: str
    value: Any
    text: str | None = field(default=None, compare=False)

    def for_argument(self, was: Any) -> Any:
        """The new value of an argument that was ``was``: a number written as text for an
        argument the plan gave as text stays the text written (``amount=24.95`` for
        ``"49.90"`` is ``"24.95"``, never a float)."""
        number = isinstance(self.value, int | float) and not isinstance(self.value, bool)
        if isinstance(was, str) and number and self.text is not None:
            return self.text.strip()
        return self.value


def parse_edit(text: str) -> Edit:
    """``STEP.ARGUMENT=VALUE`` as an ``Edit``; ``InvalidInput`` naming the syntax when the
    text is not one."""
    found = _EDIT.match(text)
    if found is None:
        raise InvalidInput(f"edit {text[:200]!r} is not {EDIT_SYNTAX}, e.g. 2.amount=1500")
    raw = found["value"]
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return Edit(found["step"], found["argument"], value, raw)


def refusal(state: SagaState, now: float) -> str | None:
    """Why ``state`` may not be forked at ``now`` (the ledger's clock), or None when it may.
    Pure: the state and the time decide."""
    if state.status not in FORKABLE:
        then = (
            "resume or resolve it first"
            if state.status is SagaStatus.NEEDS_HUMAN
            else "wait until it ends"
        )
        return (
            f"saga {state.saga_id} is {state.status.value}: only a finished saga "
            f"({', '.join(sorted(s.value for s in FORKABLE))}) is forked, as its own effects "
            f"may still be made; {then}"
        )
    landing = still_landing(state, now)
    if not landing:
        return None
    return (
        f"saga {state.saga_id} is not forked yet: {'; '.join(landing)} "
        "(ask again once nothing of it can land)"
    )


def edited(plan: Plan, edits: list[Edit], catalogue: Catalogue) -> tuple[Plan, list[ArgChange]]:
    """``plan`` with ``edits`` applied, and what each changed. ``InvalidInput`` for no edits
    or one argument edited twice; ``PlanRejected`` with a validator's error for each edit
    that names no call, or an argument its step does not have (the values are checked when
    the plan is submitted)."""
    if not edits:
        raise InvalidInput(f"a fork changes at least one argument: give {EDIT_SYNTAX}")
    flats = plan.calls()
    calls = [f.call for f in flats]
    errors: list[PlanError] = []
    changes: dict[tuple[int, str], ArgChange] = {}
    for edit in edits:
        index = _index(edit.step, calls, errors)
        if index is None:
            continue
        call = calls[index]
        step = catalogue.get(call.name)
        fields = step.args_model.model_fields if step is not None else {}
        if step is not None and edit.argument not in fields:
            errors.append(
                PlanError(
                    ErrorCode.INVALID_ARGS,
                    f"{call.name} has no argument {edit.argument!r}; it takes "
                    + ", ".join(sorted(fields)),
                    index=index,
                    path=f"{flats[index].path}.args.{edit.argument}",
                    step=call.name,
                )
            )
            continue
        if (index, edit.argument) in changes:
            raise InvalidInput(f"argument {edit.argument} of call {index} is edited twice")
        was = call.args.get(edit.argument)
        changes[(index, edit.argument)] = ArgChange(
            step=index, name=call.name, argument=edit.argument, was=was, now=edit.for_argument(was)
        )
    if errors:
        raise PlanRejected(errors)
    for change in changes.values():
        call = calls[change.step]
        calls[change.step] = call.model_copy(
            update={"args": {**call.args, change.argument: change.now}}
        )
    return _rebuilt(plan, calls), list(changes.values())


def _index(step: str, calls: list[StepCall], errors: list[PlanError]) -> int | None:
    """The flat index ``step`` names (an index, or a name the plan calls once), or None
    with the reason added to ``errors``."""
    if step.isascii() and step.isdigit():
        if int(step) < len(calls):
            return int(step)
        why = f"the plan has no call {step}: its calls are 0 to {len(calls) - 1}"
        errors.append(PlanError(ErrorCode.UNKNOWN_STEP, why, path="steps"))
        return None
    found = [n for n, c in enumerate(calls) if c.name == step]
    if len(found) == 1:
        return found[0]
    listed = ", ".join(f"{n} {c.name}" for n, c in enumerate(calls))
    if found:
        why = f"the plan calls {step} {len(found)} times: name the call by its index ({listed})"
    else:
        why = f"the plan does not call {step!r}; its calls: {listed}"
    errors.append(PlanError(ErrorCode.UNKNOWN_STEP, why, path="steps", step=step[:200]))
    return None


def _rebuilt(plan: Plan, calls: list[StepCall]) -> Plan:
    """``plan`` with its calls, in flat order, replaced by ``calls``."""
    flat = iter(calls)
    steps: list[StepCall | ParallelGroup] = [
        ParallelGroup(parallel=[next(flat) for _ in item.parallel])
        if isinstance(item, ParallelGroup)
        else next(flat)
        for item in plan.steps
    ]
    return plan.model_copy(update={"steps": steps})


def fork_id(saga_id: str, changes: list[ArgChange], by: str) -> str:
    """The id of the fork of ``saga_id`` with ``changes`` asked by ``by``: the same request
    again (a second click, a retry) records it once; other edits, or another person, make
    another fork."""
    asked = [[c.step, c.argument, c.now] for c in sorted(changes, key=lambda c: c.step)]
    text = json.dumps([saga_id, canonical_person(by), asked], sort_keys=True, default=str)
    return f"fk_{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def fork_plan(
    stored: StoredSaga,
    edits: list[Edit],
    by: str,
    reason: str,
    catalogue: Catalogue,
    now: float,
) -> Plan:
    """The plan of ``stored`` with ``edits``, its provenance pointing back to it
    (``forked_from``); ``SagaNotForkable`` with ``refusal``'s reason when it may not be
    forked at ``now``."""
    refused = refusal(stored.state, now)
    if refused is not None:
        raise SagaNotForkable(refused)
    plan, changes = edited(stored.plan, edits, catalogue)
    fork = Fork(saga_id=stored.state.saga_id, by=by, reason=reason, changes=tuple(changes))
    provenance = plan.provenance.model_copy(update={"forked_from": fork, "rerun_of": None})
    return plan.model_copy(update={"provenance": provenance})
