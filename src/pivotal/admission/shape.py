"""The first stage of admission: a plan's shape against its catalogue, call by call. It
reads only the plan and the catalogue (and asks each step's precondition, the app's code,
when told to); it returns every error it found, with the calls and their arguments as
parsed for the stages after it."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ValidationError

from pivotal.declarations.catalogue import KIND_ORDER, Catalogue, StepKind
from pivotal.declarations.identity import NOT_CANONICAL
from pivotal.declarations.plan import FlatCall, Plan
from pivotal.declarations.plan_errors import ErrorCode, PlanError


class Checked(NamedTuple):
    """What validating a plan found, and what it computed on the way that a pass run at
    once can use instead of computing it again."""

    errors: list[PlanError]
    calls: list[FlatCall]  # the plan's calls in order (none: another catalogue)
    args: list[BaseModel | None]  # each call's arguments as parsed (None: did not parse)


def shape(plan: Plan, catalogue: Catalogue, *, preconditions: bool = True) -> Checked:
    """The first stage: the plan against its catalogue call by call (the catalogue it
    names, its size, each step known, its arguments parsed, at most one pivot, the kinds
    in order, parallel groups of compensable steps, each step's precondition when
    ``preconditions``), with the calls and their arguments as parsed."""
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
    errors.extend(plan.form_errors(catalogue.limits, calls))
    if len(calls) > catalogue.limits.max_steps:
        return Checked(errors, calls, parsed_args)  # nothing else of it is read

    highest: tuple[int, int, str] | None = None  # (kind rank, index, name) seen so far
    pivots: list[int] = []
    for flat in calls:
        name = flat.call.name
        step = catalogue.get(name)
        parsed_args.append(None)
        if step is None:
            code, message = catalogue.why_not_a_step(name)
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
    return Checked(errors, calls, parsed_args)


def _kind_at(rank: int) -> str:
    return next(kind.value for kind, r in KIND_ORDER.items() if r == rank)
