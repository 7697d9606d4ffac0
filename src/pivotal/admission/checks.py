"""The stages of admission that read a plan after its shape (``shape``): the names it
gives, then the catalogue's rules with the trusted facts and the request's subject. Each
reads only what it is given (the plan, the catalogue, the app's ``facts`` source) and
returns what it found; ``checked`` runs the stages in order, shape first: the one
validator every surface uses (``pivotal.admission.validation``, ``pivotal.admission.admit``).
The app's own code they call (its facts, the steps' preconditions, its rules) runs on a
thread of its own, bounded in time (``on_facts_thread``), so that a callback that hangs
never stalls the event loop of a server or a worker."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from pivotal.admission.shape import Checked, shape
from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.identity import canonical_text, same
from pivotal.declarations.plan import Plan
from pivotal.declarations.plan_errors import ErrorCode, PlanError
from pivotal.declarations.plan_view import PlanView, show

FactSource = Callable[[Mapping[str, object]], Mapping[str, object]]
"""The app's ``facts(context)``: what trusted systems know about a plan's subject."""


# The app's facts callback is user code on the engine's path: it runs on a thread of its
# own, a daemon (one that never answers must not keep the process from exiting), and at
# most a few at once, so that callbacks that hang cannot take every thread.
_FACTS_THREADS = threading.BoundedSemaphore(4)


T = TypeVar("T")


class FactsUnanswered(Exception):
    """The facts callback did not answer in time, or no thread was free to ask it."""


async def on_facts_thread(ask: Callable[[], T], limit: float) -> T:
    """``ask()`` (the app's code: its facts, a precondition) on a facts thread, bounded by
    ``limit`` seconds in all, waiting for a free thread included; ``FactsUnanswered`` when
    it did not answer in time, or when earlier calls kept every thread that long. What
    ``ask`` raises is raised here. The thread of a call given up on is left to end on its
    own."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    pause = 0.001
    while not _FACTS_THREADS.acquire(blocking=False):  # each busy thread ends on its own
        left = deadline - loop.time()
        if left <= 0:
            raise FactsUnanswered(
                f"earlier calls of the trusted facts have not answered: no thread was free "
                f"within {limit:g}s"
            )
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
    answer: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            found: T = ask()
        except BaseException as exc:  # given to the caller, never lost with the thread
            outcome: Callable[[], None] = functools.partial(_failed, answer, exc)
        else:
            outcome = functools.partial(_answer, answer, found)
        finally:
            _FACTS_THREADS.release()
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(outcome)

    threading.Thread(target=run, name="pivotal-facts", daemon=True).start()
    try:
        return await asyncio.wait_for(answer, max(deadline - loop.time(), 0.0))
    except TimeoutError:
        raise FactsUnanswered(f"the trusted facts did not answer within {limit:g}s") from None


def _answer(answer: asyncio.Future[T], found: T) -> None:
    if not answer.done():  # not given up on
        answer.set_result(found)


def _failed(answer: asyncio.Future[Any], error: BaseException) -> None:
    if not answer.done():
        answer.set_exception(error)


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
    if plan.provenance.on_behalf_of is None or plan.provenance.names_whom():
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
