"""The validator: every error in a proposed plan, before anything takes effect."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import json
import threading
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

from pivotal.catalogue import KIND_ORDER, Catalogue, StepKind
from pivotal.four_eyes import names_no_one
from pivotal.identity import NOT_CANONICAL
from pivotal.plan import FlatCall, ParallelGroup, Plan, PlanLimits
from pivotal.plan_errors import ErrorCode, PlanError
from pivotal.plan_view import PlanView
from pivotal.plan_view import plan_context as _context_of
from pivotal.rules import subject_errors

__all__ = [
    "ErrorCode",
    "FactSource",
    "PlanError",
    "Recheck",
    "Rechecked",
    "check_rules",
    "plan_context",
    "FactsUnanswered",
    "on_facts_thread",
    "recheck",
    "recheck_bounded",
    "validate",
]

FactSource = Callable[[Mapping[str, object]], Mapping[str, object]]
"""The app's ``facts(context)``: what trusted systems know about a plan's subject."""


def _unknown_step(catalogue: Catalogue, name: str) -> tuple[ErrorCode, str]:
    undo_names = {getattr(s.undo, "__name__", "") for s in catalogue if s.undo is not None}
    if name in undo_names:
        return (
            ErrorCode.UNDO_NOT_CALLABLE,
            f"{name!r} is a compensation; compensations are run by the orchestrator and "
            "cannot be planned. Remove this step.",
        )
    known = sorted(s.name for s in catalogue)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (
        ErrorCode.UNKNOWN_STEP,
        f"{name!r} is not in catalogue {catalogue.name!r}.{hint} Available steps: "
        + ", ".join(known),
    )


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


class Checked(NamedTuple):
    """What validating a plan found, and what it computed on the way that a pass run at
    once can use instead of computing it again."""

    errors: list[PlanError]
    calls: list[FlatCall]  # the plan's calls in order (none: another catalogue)
    args: list[BaseModel | None]  # each call's arguments as parsed (None: did not parse)


def checked(
    plan: Plan,
    catalogue: Catalogue,
    *,
    preconditions: bool = True,
    facts: FactSource | None = None,
) -> Checked:
    """``validate``, with the plan's calls and their parsed arguments."""
    parsed_args: list[BaseModel | None] = []
    errors: list[PlanError] = []
    calls: list[FlatCall] = []
    if plan.catalogue != catalogue.name:
        errors.append(
            PlanError(
                ErrorCode.UNKNOWN_CATALOGUE,
                f"plan names catalogue {plan.catalogue!r} but is checked against "
                f"{catalogue.name!r}",
                path="catalogue",
            )
        )
        return Checked(errors, calls, parsed_args)
    calls = plan.calls()
    errors.extend(_limits(plan, catalogue.limits, calls))
    if len(calls) > catalogue.limits.max_steps:
        return Checked(errors, calls, parsed_args)  # nothing else of it is read
    if not calls:
        errors.append(PlanError(ErrorCode.EMPTY_PLAN, "the plan has no steps", path="steps"))
    errors.extend(_empty_groups(plan))

    highest: tuple[int, int, str] | None = None  # (kind rank, index, name) seen so far
    pivots: list[int] = []
    for flat in calls:
        name = flat.call.name
        step = catalogue.get(name)
        parsed_args.append(None)
        if step is None:
            code, message = _unknown_step(catalogue, name)
            errors.append(PlanError(code, message, flat.index, f"{flat.path}.name", name))
            continue
        args_ok = True
        try:
            parsed = parsed_args[-1] = step.parse_args(flat.call.args)
        except ValidationError as exc:
            args_ok = False
            for err in exc.errors(include_url=False):
                loc = ".".join(str(p) for p in err["loc"])
                path = f"{flat.path}.args" + (f".{loc}" if loc else "")
                canonical = err["type"] == NOT_CANONICAL
                errors.append(
                    PlanError(
                        ErrorCode.NOT_CANONICAL if canonical else ErrorCode.INVALID_ARGS,
                        f"{name}: {loc or 'args'}: {err['msg']}",
                        flat.index,
                        path,
                        name,
                    )
                )
        except Exception as exc:  # the argument model's own code raised
            args_ok = False
            errors.append(
                PlanError(
                    ErrorCode.INVALID_ARGS,
                    f"{name}: the arguments could not be checked: {type(exc).__name__}: {exc}",
                    flat.index,
                    f"{flat.path}.args",
                    name,
                )
            )
        if flat.group is not None and step.kind is not StepKind.COMPENSABLE:
            errors.append(
                PlanError(
                    ErrorCode.PARALLEL_NOT_COMPENSABLE,
                    f"{name} is a {step.kind.value} step; a parallel group may hold only "
                    "compensable steps",
                    flat.index,
                    flat.path,
                    name,
                )
            )
        if step.kind is StepKind.PIVOT:
            pivots.append(flat.index)
            if len(pivots) > 1:
                errors.append(
                    PlanError(
                        ErrorCode.MULTIPLE_PIVOTS,
                        f"{name} is a second pivot (the first is step {pivots[0]}); a plan may "
                        "have at most one point of no return",
                        flat.index,
                        flat.path,
                        name,
                    )
                )
        rank = KIND_ORDER[step.kind]
        if highest is not None and rank < highest[0]:
            errors.append(
                PlanError(
                    ErrorCode.KIND_ORDER,
                    f"{name} is {step.kind.value} but comes after the {_kind_at(highest[0])} "
                    f"step {highest[2]} (step {highest[1]}); order steps as compensable, then "
                    "the pivot, then retriable, so that everything before the point of no "
                    "return can be undone",
                    flat.index,
                    flat.path,
                    name,
                )
            )
        elif highest is None or rank > highest[0]:
            highest = (rank, flat.index, name)
        if preconditions and args_ok and step.precondition is not None:
            try:
                reason = step.precondition(parsed)
            except Exception as exc:
                errors.append(
                    PlanError(
                        ErrorCode.PRECONDITION_ERROR,
                        f"{name}: the precondition could not be checked: "
                        f"{type(exc).__name__}: {exc}",
                        flat.index,
                        flat.path,
                        name,
                    )
                )
                continue
            if reason:
                errors.append(
                    PlanError(
                        ErrorCode.PRECONDITION_FAILED,
                        f"{name}: precondition does not hold: {reason}",
                        flat.index,
                        flat.path,
                        name,
                    )
                )
    if names_no_one(plan):  # given, but as blanks or invisible characters: no person
        errors.append(
            PlanError(
                ErrorCode.ON_BEHALF_OF_REQUIRED,
                "provenance.on_behalf_of names no one (it is only blanks or characters "
                "that show as nothing): give the name of the person the plan is for, or "
                "leave it out",
                path="provenance.on_behalf_of",
            )
        )
    # each call first, then the plan as a whole and the request it serves
    if not errors and (catalogue.rules or plan.provenance.about):
        errors.extend(check_rules(plan, catalogue, facts))
    return Checked(errors, calls, parsed_args)


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
    return _context_of(PlanView.of(plan, None, models=_models(catalogue)).calls)


def _models(catalogue: Catalogue | None) -> dict[str, type[BaseModel]]:
    if catalogue is None:
        return {}
    return {s.name: s.args_model for s in catalogue}


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


def check_rules(
    plan: Plan, catalogue: Catalogue, facts: FactSource | None = None
) -> list[PlanError]:
    """The catalogue's rules over the whole plan, and the subject of the request it serves
    (``plan.provenance.about``). ``facts`` is asked about what the calls name (once when
    they all name one order), if a rule needs it; when it raises, the rules that need facts
    report them unavailable."""
    view = PlanView.of(plan, None, models=_models(catalogue))
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


def _limits(plan: Plan, limits: PlanLimits, calls: list[FlatCall]) -> list[PlanError]:
    out: list[PlanError] = []
    if len(calls) > limits.max_steps:
        out.append(
            PlanError(
                ErrorCode.TOO_MANY_STEPS,
                f"the plan has {len(calls)} calls; at most {limits.max_steps} are allowed",
                path="steps",
            )
        )
        return out
    if len(plan.rationale) > limits.max_rationale:
        out.append(
            PlanError(
                ErrorCode.RATIONALE_TOO_LONG,
                f"the rationale has {len(plan.rationale)} characters; at most "
                f"{limits.max_rationale} are allowed",
                path="rationale",
            )
        )
    for flat in calls:
        for name, value in flat.call.args.items():
            if _surely_fits(value, limits.max_argument):
                continue
            size = len(json.dumps(value, default=str))
            if size > limits.max_argument:
                out.append(
                    PlanError(
                        ErrorCode.ARGUMENT_TOO_LARGE,
                        f"{flat.call.name}.{name} is {size} characters of JSON; at most "
                        f"{limits.max_argument} are allowed",
                        flat.index,
                        f"{flat.path}.args.{name}",
                        flat.call.name,
                    )
                )
    return out


def _surely_fits(value: object, limit: int) -> bool:
    """True when ``value``'s JSON is certainly within ``limit`` characters without encoding
    it: a bool, None, a float, an int of fewer than 20 digits, or a string short enough
    that even escaping every character (12 each: a surrogate pair, \\uXXXX\\uXXXX) and its
    quotes would fit."""
    if value is None or isinstance(value, bool | float):
        return limit >= 24  # the longest float repr, e.g. -1.2345678901234567e-308
    if isinstance(value, int):
        return -(10**19) < value < 10**19 and limit >= 20
    if isinstance(value, str):
        return 12 * len(value) + 2 <= limit
    return False


def _kind_at(rank: int) -> str:
    return next(kind.value for kind, r in KIND_ORDER.items() if r == rank)


def _empty_groups(plan: Plan) -> list[PlanError]:
    return [
        PlanError(
            ErrorCode.EMPTY_PARALLEL,
            "a parallel group needs at least one call",
            path=f"steps[{position}].parallel",
        )
        for position, item in enumerate(plan.steps)
        if isinstance(item, ParallelGroup) and not item.parallel
    ]
