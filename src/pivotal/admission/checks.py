"""The stages of admission that read a plan after its shape (``shape``): the names it
gives, then the catalogue's rules with the trusted facts and the request's subject. Each
reads only what it is given (the plan, the catalogue, the app's ``facts`` source) and
returns what it found; ``checked`` runs the stages in order, shape first: the one
validator every surface uses (``pivotal.validation``, ``pivotal.admission.admit``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import BaseModel

from pivotal.admission.shape import Checked, shape
from pivotal.bounded import FactsUnanswered, on_facts_thread
from pivotal.catalogue import Catalogue
from pivotal.identity import canonical_text, same
from pivotal.plan import Plan
from pivotal.plan_errors import ErrorCode, PlanError
from pivotal.plan_view import PlanView, show
from pivotal.principals import canonical_person

FactSource = Callable[[Mapping[str, object]], Mapping[str, object]]
"""The app's ``facts(context)``: what trusted systems know about a plan's subject."""


def checked(
    plan: Plan,
    catalogue: Catalogue,
    *,
    preconditions: bool = True,
    facts: FactSource | None = None,
) -> Checked:
    """The stages that read the plan, in order: its shape, the names it gives, then, once
    every call is right, the catalogue's rules and the request's subject with the trusted
    ``facts``. Every error found, with the calls and their arguments as parsed."""
    found = shape(plan, catalogue, preconditions=preconditions)
    if plan.catalogue != catalogue.name or len(found.calls) > catalogue.limits.max_steps:
        return found  # nothing else of it is read
    errors = found.errors + names(plan)
    if not errors and (catalogue.rules or plan.provenance.about):
        errors.extend(check_rules(plan, catalogue, facts))
    return found._replace(errors=errors)


async def checked_bounded(
    plan: Plan,
    catalogue: Catalogue,
    *,
    preconditions: bool = True,
    facts: FactSource | None = None,
) -> Checked:
    """``checked``, the one way every surface validates a plan (a submission, the API's,
    MCP's and the CLI's ``validate``, a planner's attempt): the app's code it calls (its
    ``facts``, the steps' preconditions, its own rules) runs on a facts thread, bounded like
    a call of a step without a timeout of its own (the catalogue's ``default_timeout``), so
    a callback
    that hangs never stalls the caller's event loop (a server, a worker). A plan that could
    not be checked in time is refused (``FACTS_ERROR``), never taken for valid."""
    if not catalogue.asks_app:  # Pivotal's own rules only: nothing to bound
        return checked(plan, catalogue, preconditions=preconditions, facts=facts)
    try:
        return await on_facts_thread(
            lambda: checked(plan, catalogue, preconditions=preconditions, facts=facts),
            catalogue.default_timeout,
        )
    except FactsUnanswered as exc:
        why = f"the plan could not be checked against the app's facts and preconditions: {exc}"
        return Checked([PlanError(ErrorCode.FACTS_ERROR, why, path="steps")], [], [])


def names(plan: Plan) -> list[PlanError]:
    """The names four-eyes will compare: a plan that gives ``on_behalf_of`` as a name that
    folds to nothing (blanks, a soft hyphen, characters that draw as nothing) names no
    one, and is refused wherever a plan is checked, required or not."""
    named = plan.provenance.on_behalf_of
    if named is None or canonical_person(named):
        return []
    return [
        PlanError(
            ErrorCode.ON_BEHALF_OF_REQUIRED,
            "provenance.on_behalf_of names no one (it is only blanks or characters "
            "that show as nothing): give the name of the person the plan is for, or "
            "leave it out",
            path="provenance.on_behalf_of",
        )
    ]


def check_rules(
    plan: Plan, catalogue: Catalogue, facts: FactSource | None = None
) -> list[PlanError]:
    """The catalogue's rules over the whole plan, and the subject of the request it serves
    (``plan.provenance.about``). ``facts`` is asked about what the calls name (once when
    they all name one order), if a rule needs it; when it raises, the rules that need facts
    report them unavailable."""
    view = PlanView.of(plan, None, models=models(catalogue))
    wanted = bool(view.about) or any(rule.needs_facts for rule in catalogue.rules)
    source = _Facts(facts) if facts is not None and wanted else None
    if source is not None:
        view = PlanView(
            view.catalogue,
            view.calls,
            source(view.context),
            plan,
            view.about,
            view.context,
            source,
        )
    errors: list[PlanError] = []
    for rule in catalogue.rules:
        try:
            errors.extend(rule.check(view))
        except Exception as exc:  # a rule of the catalogue's own making raised
            errors.append(
                PlanError(
                    ErrorCode.PLAN_CHECK_ERROR,
                    f"the rule '{rule.describe()}' failed: {type(exc).__name__}: {exc}",
                    path="steps",
                )
            )
    errors.extend(subject_errors(view))
    return (source.errors if source is not None else []) + errors


def subject_errors(view: PlanView) -> list[PlanError]:
    """What breaks the request's subject (``provenance.about``): a call naming another
    entity, or facts saying the entity is someone else's."""
    out: list[PlanError] = []
    for name, wanted in view.about.items():
        told: set[int] = set()  # the facts already compared (calls share them)
        for c in view.calls:
            if c.takes(name):
                if not same(c.value(name), wanted, c.field(name)):
                    out.append(
                        PlanError(
                            ErrorCode.REQUEST_MISMATCH,
                            f"{c.name}.{name} is {c.written(name)} but the request is "
                            f"about {name} {show(wanted)}; act only on what the request is "
                            "about",
                            c.index,
                            c.arg_path(name),
                            c.name,
                        )
                    )
                continue
            known = view.facts_for(c)
            if known is None or id(known) in told:
                continue
            told.add(id(known))
            truth = known.get(name)
            if truth is not None and not _same_subject(truth, wanted):
                out.append(
                    PlanError(
                        ErrorCode.REQUEST_MISMATCH,
                        f"what {c.name} acts on has {name} {show(truth)}, but the request "
                        f"is about {name} {show(wanted)}: this plan serves another request",
                        c.index,
                        c.path,
                        c.name,
                    )
                )
    return out


def _same_subject(a: object, b: object) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return canonical_text(a) == canonical_text(b)
    return same(a, b)


MAX_FACT_LOOKUPS = 16  # distinct subjects asked about per plan; more are not looked up


class _Facts:
    """The app's facts, asked once per context and contained: what raises is reported
    once (``facts_error``) and is no facts."""

    def __init__(self, source: FactSource) -> None:
        self.source = source
        self.known: dict[tuple[tuple[str, str], ...], Mapping[str, object] | None] = {}
        self.errors: list[PlanError] = []

    def __call__(self, context: Mapping[str, object]) -> Mapping[str, object] | None:
        key = tuple(sorted((k, repr(v)) for k, v in context.items()))
        if key in self.known:
            return self.known[key]
        if len(self.known) >= MAX_FACT_LOOKUPS:
            return None  # a plan naming this many subjects learns nothing more
        try:
            found: Mapping[str, object] | None = dict(self.source(context))
        except Exception as exc:
            found = None
            if not self.errors:
                self.errors.append(
                    PlanError(
                        ErrorCode.FACTS_ERROR,
                        f"the trusted facts for this plan could not be read: "
                        f"{type(exc).__name__}: {exc}",
                        path="steps",
                    )
                )
        self.known[key] = found
        return found


def models(catalogue: Catalogue | None) -> dict[str, type[BaseModel]]:
    if catalogue is None:
        return {}
    return {s.name: s.args_model for s in catalogue}
