"""The validator: every error in a proposed plan, before anything takes effect."""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from pivotal.catalogue import KIND_ORDER, Catalogue, StepKind
from pivotal.plan import ParallelGroup, Plan


class ErrorCode(StrEnum):
    """Stable codes a planner can branch on."""

    UNKNOWN_CATALOGUE = "unknown_catalogue"
    EMPTY_PLAN = "empty_plan"
    EMPTY_PARALLEL = "empty_parallel"
    UNKNOWN_STEP = "unknown_step"
    UNDO_NOT_CALLABLE = "undo_not_callable"
    INVALID_ARGS = "invalid_args"
    MULTIPLE_PIVOTS = "multiple_pivots"
    KIND_ORDER = "kind_order"
    PARALLEL_NOT_COMPENSABLE = "parallel_not_compensable"
    PRECONDITION_FAILED = "precondition_failed"
    PRECONDITION_ERROR = "precondition_error"  # the precondition itself raised


@dataclass(frozen=True, slots=True)
class PlanError:
    """One reason a plan was rejected."""

    code: ErrorCode
    message: str
    index: int | None = None  # flat call index, as in idempotency keys
    path: str | None = None  # where in the plan JSON, e.g. "steps[1].args.amount"
    step: str | None = None

    def where(self) -> str:
        return self.path or (f"step {self.index}" if self.index is not None else "plan")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["code"] = self.code.value
        return out


def _unknown_step(catalogue: Catalogue, name: str, undo_names: set[str]) -> tuple[ErrorCode, str]:
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


def validate(plan: Plan, catalogue: Catalogue, *, preconditions: bool = True) -> list[PlanError]:
    """Return every error in ``plan`` against ``catalogue``; an empty list means valid.

    Rules: the plan names this catalogue; it has at least one call; every name exists; the
    arguments satisfy the step's model; at most one pivot; kinds appear in the order
    compensable, pivot, retriable; parallel groups hold only compensable calls; and, when
    ``preconditions`` is true, every step's precondition holds now.
    """
    errors: list[PlanError] = []
    if plan.catalogue != catalogue.name:
        errors.append(
            PlanError(
                ErrorCode.UNKNOWN_CATALOGUE,
                f"plan names catalogue {plan.catalogue!r} but is checked against "
                f"{catalogue.name!r}",
                path="catalogue",
            )
        )
        return errors
    calls = plan.calls()
    if not calls:
        errors.append(PlanError(ErrorCode.EMPTY_PLAN, "the plan has no steps", path="steps"))
    errors.extend(_empty_groups(plan))

    undo_names = {getattr(s.undo, "__name__", "") for s in catalogue if s.undo is not None}
    highest: tuple[int, int, str] | None = None  # (kind rank, index, name) seen so far
    pivots: list[int] = []
    for flat in calls:
        name = flat.call.name
        step = catalogue.get(name)
        if step is None:
            code, message = _unknown_step(catalogue, name, undo_names)
            errors.append(PlanError(code, message, flat.index, f"{flat.path}.name", name))
            continue
        args_ok = True
        try:
            parsed = step.parse_args(flat.call.args)
        except ValidationError as exc:
            args_ok = False
            for err in exc.errors(include_url=False):
                loc = ".".join(str(p) for p in err["loc"])
                path = f"{flat.path}.args" + (f".{loc}" if loc else "")
                errors.append(
                    PlanError(
                        ErrorCode.INVALID_ARGS,
                        f"{name}: {loc or 'args'}: {err['msg']}",
                        flat.index,
                        path,
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
    return errors


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
