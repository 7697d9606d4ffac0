"""The catalogue: the steps that exist, defined in code."""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from pivotal.errors import CatalogueError
from pivotal.plan import DEFAULT_LIMITS, PlanLimits
from pivotal.retry import NO_RETRY, RetryPolicy, RetryPredicate

if TYPE_CHECKING:
    from pivotal.plan import Provenance
    from pivotal.policy import ApprovalPolicy
    from pivotal.rules import PlanRule


class StepKind(StrEnum):
    """Where a step may stand in a plan and how failure is handled."""

    COMPENSABLE = "compensable"  # has an undo; before the point of no return
    PIVOT = "pivot"  # the point of no return; at most one per plan
    RETRIABLE = "retriable"  # after the pivot; retried until it succeeds


KIND_ORDER: Mapping[StepKind, int] = {
    StepKind.COMPENSABLE: 0,
    StepKind.PIVOT: 1,
    StepKind.RETRIABLE: 2,
}


@dataclass(frozen=True, slots=True)
class StepContext:
    """What an action, undo or lookup is told about the call it serves."""

    saga_id: str
    index: int
    step: str
    key: str  # idempotency key of this call: "{saga}:{index}" or "{saga}:{index}:undo"
    action_key: str  # the forward action's key (an undo finds the effect with it)
    attempt: int
    provenance: Provenance | None = None


Action = Callable[[Any, StepContext], Awaitable[Any]]
Undo = Callable[[Any, Any, StepContext], Awaitable[str | None]]
"""``undo(args, result, ctx)``; it may return a note on what it did, kept on its event."""
Lookup = Callable[[Any, StepContext], Awaitable[Any]]
Precondition = Callable[[Any], "str | None"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def action_key(saga_id: str, index: int) -> str:
    return f"{saga_id}:{index}"


def undo_key(saga_id: str, index: int) -> str:
    return f"{saga_id}:{index}:undo"


@dataclass(frozen=True, slots=True)
class Step:
    """One catalogue entry.

    ``action(args, ctx)`` performs the effect and returns a JSON-able result (or a pydantic
    model). ``undo(args, result, ctx)`` reverses it; ``result`` is ``None`` when the action's
    outcome is unknown, so an undo must find the effect by ``ctx.action_key`` and treat
    "not found" as already undone. ``lookup(args, ctx)`` returns the recorded result of the
    effect made with ``ctx.key``, or ``None`` when there is none. ``precondition(args)`` is
    side-effect free and returns a reason when it does not hold.

    An exception from the action means "outcome unknown" unless it is ``Permanent``, an
    ``Abort``, or one of ``no_effect_on`` (exceptions the action raises only when it
    certainly took no effect); transient errors are retried with the same key.
    """

    name: str
    description: str
    kind: StepKind
    args_model: type[BaseModel]
    action: Action
    undo: Undo | None = None
    lookup: Lookup | None = None
    precondition: Precondition | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    undo_retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(max_attempts=5))
    dead_letter_retry: RetryPolicy = field(
        default_factory=lambda: RetryPolicy(max_attempts=8, base_delay=60.0, max_delay=3600.0)
    )
    timeout: float | None = None
    retryable: bool = True
    retry_on: RetryPredicate | None = None
    no_effect_on: tuple[type[BaseException], ...] = ()
    strict: bool = True  # no coercion of arguments: true is not 1, "180" is not 180

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise CatalogueError(f"step name {self.name!r} must be a non-empty identifier")
        if not (isinstance(self.args_model, type) and issubclass(self.args_model, BaseModel)):
            raise CatalogueError(f"step {self.name!r}: arguments must be a pydantic model")
        if self.kind is StepKind.COMPENSABLE and self.undo is None:
            raise CatalogueError(f"compensable step {self.name!r} has no undo")
        if self.kind is not StepKind.COMPENSABLE and self.undo is not None:
            raise CatalogueError(
                f"{self.kind.value} step {self.name!r} cannot have an undo: only compensable "
                "steps are undone"
            )
        if self.timeout is not None and self.timeout <= 0:
            raise CatalogueError(f"step {self.name!r}: timeout must be positive")

    @property
    def policy(self) -> RetryPolicy:
        """The retry policy in force for the forward action."""
        return self.retry if self.retryable else NO_RETRY

    def parse_args(self, raw: Mapping[str, Any]) -> BaseModel:
        """The arguments as the model reads them from JSON (strictly, unless the step was
        declared with ``strict=False``: then "180" may become 180)."""
        return self.args_model.model_validate_json(
            json.dumps(raw, default=str), strict=self.strict or None
        )


def _args_model_of(fn: Callable[..., Any]) -> type[BaseModel]:
    params = list(inspect.signature(fn).parameters)
    hints = typing.get_type_hints(fn)
    model = hints.get(params[0]) if params else None
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model
    raise CatalogueError(
        f"{fn.__name__}: annotate the first parameter with a pydantic model or pass args="
    )


class Catalogue:
    """A named set of steps a planner may choose from."""

    def __init__(
        self,
        name: str,
        description: str = "",
        *,
        approval: ApprovalPolicy | None = None,
        rules: Iterable[PlanRule] = (),
        limits: PlanLimits | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.approval = approval
        self.rules: list[PlanRule] = list(rules)
        self.limits = limits or DEFAULT_LIMITS
        self._steps: dict[str, Step] = {}

    def rule(self, *rules: PlanRule) -> None:
        """Add rules over the whole plan (see ``pivotal.rules``)."""
        self.rules.extend(rules)

    def check(self) -> None:
        """Refuse a finished catalogue whose rules name steps it lacks, or whose approval
        policy can never fire on it. An ``App`` checks each of its catalogues."""
        for rule in self.rules:
            unknown = sorted(rule.mentions() - set(self._steps))
            if unknown:
                raise CatalogueError(
                    f"catalogue {self.name!r}: the rule '{rule.describe()}' names steps it "
                    f"does not have: {', '.join(unknown)}"
                )
        never = getattr(self.approval, "never_fires", None)
        reason = never(self) if callable(never) else None
        if reason:
            raise CatalogueError(
                f"catalogue {self.name!r}: its approval policy can never fire: {reason}"
            )

    def add(self, step: Step) -> Step:
        if step.name in self._steps:
            raise CatalogueError(f"catalogue {self.name!r} already has a step {step.name!r}")
        self._steps[step.name] = step
        return step

    def step(
        self,
        kind: StepKind,
        *,
        name: str | None = None,
        description: str | None = None,
        args: type[BaseModel] | None = None,
        undo: Undo | None = None,
        lookup: Lookup | None = None,
        precondition: Precondition | None = None,
        retry: RetryPolicy | None = None,
        undo_retry: RetryPolicy | None = None,
        dead_letter_retry: RetryPolicy | None = None,
        timeout: float | None = None,
        retryable: bool = True,
        retry_on: RetryPredicate | None = None,
        no_effect_on: tuple[type[BaseException], ...] = (),
        strict: bool = True,
    ) -> Callable[[F], F]:
        """Decorator declaring ``fn`` as the action of a new step; returns ``fn`` unchanged."""

        def register(fn: F) -> F:
            extra: dict[str, Any] = {}
            if retry is not None:
                extra["retry"] = retry
            if undo_retry is not None:
                extra["undo_retry"] = undo_retry
            if dead_letter_retry is not None:
                extra["dead_letter_retry"] = dead_letter_retry
            self.add(
                Step(
                    name=name or fn.__name__,
                    description=(description or inspect.getdoc(fn) or "").strip(),
                    kind=kind,
                    args_model=args or _args_model_of(fn),
                    action=fn,
                    undo=undo,
                    lookup=lookup,
                    precondition=precondition,
                    timeout=timeout,
                    retryable=retryable,
                    retry_on=retry_on,
                    no_effect_on=no_effect_on,
                    strict=strict,
                    **extra,
                )
            )
            return fn

        return register

    def compensable(self, *, undo: Undo, **options: Any) -> Callable[[F], F]:
        """Declare a step that can be undone by ``undo(args, result, ctx)``."""
        return self.step(StepKind.COMPENSABLE, undo=undo, **options)

    def pivot(self, **options: Any) -> Callable[[F], F]:
        """Declare the point-of-no-return step."""
        return self.step(StepKind.PIVOT, **options)

    def retriable(self, **options: Any) -> Callable[[F], F]:
        """Declare a step that runs after the pivot and is retried until it succeeds."""
        return self.step(StepKind.RETRIABLE, **options)

    def get(self, name: str) -> Step | None:
        return self._steps.get(name)

    def __getitem__(self, name: str) -> Step:
        return self._steps[name]

    def __contains__(self, name: object) -> bool:
        return name in self._steps

    def __iter__(self) -> Iterator[Step]:
        return iter(self._steps.values())

    def __len__(self) -> int:
        return len(self._steps)

    def __repr__(self) -> str:
        return f"Catalogue({self.name!r}, steps={list(self._steps)})"
