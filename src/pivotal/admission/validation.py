"""The validator: every error in a proposed plan, before anything takes effect (the stages
of ``pivotal.admission.shape`` and ``pivotal.admission.checks``), and the re-check of a
running saga's plan against fresh facts."""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from pivotal.admission.checks import (
    FactSource,
    FactsUnanswered,
    check_rules,
    checked,
    checked_bounded,
    models,
    on_facts_thread,
)
from pivotal.admission.shape import Checked
from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.plan import Plan
from pivotal.declarations.plan_errors import ErrorCode, PlanError
from pivotal.declarations.plan_view import PlanView
from pivotal.declarations.plan_view import plan_context as _context_of

__all__ = [
    "Checked",
    "ErrorCode",
    "FactSource",
    "FactsUnanswered",
    "PlanError",
    "Recheck",
    "Rechecked",
    "check_rules",
    "checked",
    "checked_bounded",
    "on_facts_thread",
    "plan_context",
    "recheck",
    "recheck_bounded",
    "validate",
    "validate_bounded",
]


def validate(
    plan: Plan,
    catalogue: Catalogue,
    *,
    preconditions: bool = True,
    facts: FactSource | None = None,
) -> list[PlanError]:
    """Return every error in ``plan`` against ``catalogue``; an empty list means valid.

    Rules: the plan names this catalogue; it stays within the catalogue's size limits; it has
    at least one call; every name exists; the arguments satisfy the step's model; at most one
    pivot; kinds appear in the order compensable, pivot, retriable; parallel groups hold only
    compensable calls; when ``preconditions`` is true, every step's precondition holds now;
    then, once every call is right, the catalogue's rules over the whole plan hold, with
    ``facts`` (the app's trusted facts, asked with what the plan's calls agree on, e.g. its
    ``order_id``) for the rules that need them.
    """
    return checked(plan, catalogue, preconditions=preconditions, facts=facts).errors


class Recheck(StrEnum):
    """What validating a running saga's plan again against fresh facts found."""

    HOLDS = "holds"  # it validates as it did at submission
    CHANGED = "changed"  # it no longer does: the facts (or the catalogue) changed
    CANNOT_TELL = "cannot_tell"  # the facts could not be read, or a rule raised


class Rechecked(NamedTuple):
    verdict: Recheck
    errors: list[PlanError]

    def describe(self) -> str:
        """The errors, each with its code and where in the plan, for a reason or a refusal."""
        return "; ".join(f"[{e.code.value}] {e.where()}: {e.message}" for e in self.errors)


# what says nothing about the plan, only that it could not be checked
_BLIND = frozenset({ErrorCode.FACTS_ERROR, ErrorCode.PLAN_CHECK_ERROR})


def recheck(plan: Plan, catalogue: Catalogue, facts: FactSource | None) -> Rechecked:
    """Validate a running saga's plan again, as submission did (the same ``checked``), with
    fresh ``facts``: before its point of no return, after a wait, before an approval is
    recorded. Step preconditions are not asked (those of steps that ran describe the world
    before them; the next step's own is asked by the engine just before it runs).

    Facts that cannot be read (``facts`` raised) make every rule that needs them blind:
    that is ``CANNOT_TELL``, never a pass; so is a rule that raised, unless another error
    proves the plan changed."""
    try:
        errors = checked(plan, catalogue, preconditions=False, facts=facts).errors
    except Exception as exc:  # the validator itself raised (an argument model's code)
        error = PlanError(
            ErrorCode.PLAN_CHECK_ERROR,
            f"the plan could not be validated: {type(exc).__name__}: {exc}",
            path="steps",
        )
        return Rechecked(Recheck.CANNOT_TELL, [error])
    if not errors:
        return Rechecked(Recheck.HOLDS, [])
    if any(e.code is ErrorCode.FACTS_ERROR for e in errors):
        return Rechecked(Recheck.CANNOT_TELL, [e for e in errors if e.code in _BLIND])
    if all(e.code in _BLIND for e in errors):
        return Rechecked(Recheck.CANNOT_TELL, errors)
    return Rechecked(Recheck.CHANGED, [e for e in errors if e.code not in _BLIND])


async def validate_bounded(
    plan: Plan,
    catalogue: Catalogue,
    *,
    preconditions: bool = True,
    facts: FactSource | None = None,
) -> list[PlanError]:
    """``validate`` as ``checked_bounded`` runs it."""
    found = await checked_bounded(plan, catalogue, preconditions=preconditions, facts=facts)
    return found.errors


async def recheck_bounded(plan: Plan, catalogue: Catalogue, facts: FactSource | None) -> Rechecked:
    """``recheck`` with the app's ``facts`` asked on a thread and bounded like a call of a
    step without a timeout of its own (the catalogue's ``default_timeout``). Facts that do
    not answer in time are ``CANNOT_TELL`` (a person is asked), never a pass; the callback's
    thread is left to end on its own, and no later re-check waits for it. A plan whose
    re-check asks none of the app's code (no rule of its catalogue reads facts, and it names
    no subject) is re-checked at once, on the caller's thread."""
    if facts is None:
        return recheck(plan, catalogue, None)
    if not plan.provenance.about and not any(rule.needs_facts for rule in catalogue.rules):
        return recheck(plan, catalogue, facts)  # ``check_rules`` asks no facts of it
    try:
        return await on_facts_thread(
            lambda: recheck(plan, catalogue, facts), catalogue.default_timeout
        )
    except FactsUnanswered as exc:
        return _blind(str(exc))


def _blind(why: str) -> Rechecked:
    return Rechecked(Recheck.CANNOT_TELL, [PlanError(ErrorCode.FACTS_ERROR, why, path="steps")])


def plan_context(plan: Plan, catalogue: Catalogue | None = None) -> dict[str, object]:
    """The scalar arguments every call that carries them agrees on (the plan's order id),
    compared as ``catalogue``'s argument types read them: what the app's ``facts`` are
    asked with."""
    return _context_of(PlanView.of(plan, None, models=models(catalogue)).calls)
