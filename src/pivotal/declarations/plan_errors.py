"""Errors a validator reports about a plan: stable codes and where in the plan they are."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """Stable codes a planner can branch on."""

    UNKNOWN_CATALOGUE = "unknown_catalogue"
    EMPTY_PLAN = "empty_plan"
    EMPTY_PARALLEL = "empty_parallel"
    UNKNOWN_STEP = "unknown_step"
    UNDO_NOT_CALLABLE = "undo_not_callable"
    INVALID_ARGS = "invalid_args"
    NOT_CANONICAL = "not_canonical"  # an entity's id in another spelling: use the one given
    MULTIPLE_PIVOTS = "multiple_pivots"
    KIND_ORDER = "kind_order"
    PARALLEL_NOT_COMPENSABLE = "parallel_not_compensable"
    PRECONDITION_FAILED = "precondition_failed"
    PRECONDITION_ERROR = "precondition_error"  # the precondition itself raised
    # size limits
    TOO_MANY_STEPS = "too_many_steps"
    RATIONALE_TOO_LONG = "rationale_too_long"
    ARGUMENT_TOO_LARGE = "argument_too_large"
    # the catalogue's rules over the whole plan
    MISSING_STEP = "missing_step"
    MISSING_PREREQUISITE = "missing_prerequisite"
    TOO_MANY_CALLS = "too_many_calls"
    ARGUMENTS_DISAGREE = "arguments_disagree"
    FACT_MISMATCH = "fact_mismatch"
    FACT_UNAVAILABLE = "fact_unavailable"
    FACTS_ERROR = "facts_error"  # the app's facts() raised
    REQUEST_MISMATCH = "request_mismatch"  # the plan acts on another order or customer
    ON_BEHALF_OF_REQUIRED = "on_behalf_of_required"  # name the person the plan is for
    PLAN_CHECK_FAILED = "plan_check_failed"
    PLAN_CHECK_ERROR = "plan_check_error"  # a plan-level check raised


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
