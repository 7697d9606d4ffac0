"""Rules over a whole plan, declared on its catalogue and checked before anything runs.

A plan is more than its calls: a catalogue says which steps a plan must contain, which step
needs another before it, how often a step may appear, which arguments must agree across
steps, and which must equal what a trusted system (the app's ``facts``) says. Each rule
reports its own error code at the call and argument an agent must fix, and describes itself
in the text a planner is shown.

    fulfilment = Catalogue("fulfilment", rules=[
        Required("capture_payment"),
        RequiresEarlier("create_shipment", "capture_payment"),
        AtMost("capture_payment", 1),
        Agree("order_id"),
        Agree("amount", steps=("authorize_payment", "capture_payment")),
        FromFact("amount", steps=("authorize_payment", "capture_payment")),
    ])
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from pivotal.plan import Plan
from pivotal.plan_errors import ErrorCode, PlanError


@dataclass(frozen=True, slots=True)
class Call:
    """One call of a plan as rules see it."""

    index: int  # flat index, as in idempotency keys
    name: str
    args: Mapping[str, Any]  # as the plan wrote them
    path: str  # where in the plan JSON, e.g. "steps[2]"
    group: int | None  # position of its parallel group, if any

    def arg_path(self, name: str) -> str:
        return f"{self.path}.args.{name}"


@dataclass(frozen=True, slots=True)
class PlanView:
    """A plan's calls, its catalogue's name, and the trusted facts about it (None: the
    facts could not be had)."""

    catalogue: str
    calls: tuple[Call, ...]
    facts: Mapping[str, object] | None
    plan: Plan

    @classmethod
    def of(cls, plan: Plan, facts: Mapping[str, object] | None) -> PlanView:
        calls = tuple(
            Call(f.index, f.call.name, f.call.args, f.path, f.group) for f in plan.calls()
        )
        return cls(plan.catalogue, calls, facts, plan)

    def named(self, names: Iterable[str] | None) -> list[Call]:
        wanted = None if names is None else set(names)
        return [c for c in self.calls if wanted is None or c.name in wanted]


def same_value(a: object, b: object) -> bool:
    """Equal as the plan means them: numbers by value ("180" equals 180.00), else exactly."""
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return x == y
    return a == b


def _number(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _show(value: object) -> str:
    try:
        text = json.dumps(value, default=str)
    except ValueError:
        text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


class PlanRule(ABC):
    """A rule over a whole plan."""

    needs_facts = False  # whether ``check`` reads the trusted facts

    @abstractmethod
    def check(self, view: PlanView) -> list[PlanError]:
        """Every way ``view`` breaks the rule; empty when it holds."""

    @abstractmethod
    def describe(self) -> str:
        """The rule in one sentence, for a planner."""

    def mentions(self) -> set[str]:
        """The step names the rule mentions (checked against the catalogue)."""
        return set()


@dataclass(frozen=True)
class Required(PlanRule):
    """Every plan of this catalogue calls ``step``."""

    step: str

    def check(self, view: PlanView) -> list[PlanError]:
        if view.named([self.step]):
            return []
        return [
            PlanError(
                ErrorCode.MISSING_STEP,
                f"a {view.catalogue} plan must call {self.step}; add it",
                path="steps",
                step=self.step,
            )
        ]

    def describe(self) -> str:
        return f"every plan must call {self.step}"

    def mentions(self) -> set[str]:
        return {self.step}


@dataclass(frozen=True)
class RequiresEarlier(PlanRule):
    """``step`` may only be called after a call of ``earlier`` (not beside it in a parallel
    group)."""

    step: str
    earlier: str

    def check(self, view: PlanView) -> list[PlanError]:
        out, seen = [], False
        for call in view.calls:
            if call.name == self.step and not seen:
                out.append(
                    PlanError(
                        ErrorCode.MISSING_PREREQUISITE,
                        f"{self.step} needs {self.earlier} earlier in the plan; call "
                        f"{self.earlier} before it",
                        call.index,
                        call.path,
                        call.name,
                    )
                )
            if call.name == self.earlier:
                seen = True
        # a member of a parallel group does not come before its siblings
        return out + self._same_group(view)

    def _same_group(self, view: PlanView) -> list[PlanError]:
        groups = {c.group for c in view.calls if c.name == self.earlier and c.group is not None}
        return [
            PlanError(
                ErrorCode.MISSING_PREREQUISITE,
                f"{self.step} runs beside {self.earlier} in a parallel group; call it after",
                c.index,
                c.path,
                c.name,
            )
            for c in view.calls
            if c.name == self.step and c.group in groups
        ]

    def describe(self) -> str:
        return f"{self.step} may only come after {self.earlier}"

    def mentions(self) -> set[str]:
        return {self.step, self.earlier}


@dataclass(frozen=True)
class AtMost(PlanRule):
    """``step`` is called at most ``times`` times."""

    step: str
    times: int = 1

    def __post_init__(self) -> None:
        if self.times < 0:
            raise ValueError("AtMost needs times >= 0")

    def check(self, view: PlanView) -> list[PlanError]:
        extra = view.named([self.step])[self.times :]
        return [
            PlanError(
                ErrorCode.TOO_MANY_CALLS,
                f"{self.step} may be called at most {self._times()}; remove this call",
                c.index,
                c.path,
                c.name,
            )
            for c in extra
        ]

    def _times(self) -> str:
        return "once" if self.times == 1 else f"{self.times} times"

    def describe(self) -> str:
        return f"{self.step} at most {self._times()}"

    def mentions(self) -> set[str]:
        return {self.step}


@dataclass(frozen=True)
class Agree(PlanRule):
    """Every call that takes argument ``arg`` (among ``steps``, or all of them) passes the
    same value: one ``order_id`` for the whole plan, a capture equal to its authorisation."""

    arg: str
    steps: Sequence[str] | None = field(default=None, kw_only=True)

    def check(self, view: PlanView) -> list[PlanError]:
        carrying = [c for c in view.named(self.steps) if self.arg in c.args]
        if not carrying:
            return []
        first = carrying[0]
        return [
            PlanError(
                ErrorCode.ARGUMENTS_DISAGREE,
                f"{c.name}.{self.arg} is {_show(c.args[self.arg])} but {first.name} (step "
                f"{first.index}) has {_show(first.args[self.arg])}; {self._scope()} must use "
                "one value",
                c.index,
                c.arg_path(self.arg),
                c.name,
            )
            for c in carrying[1:]
            if not same_value(c.args[self.arg], first.args[self.arg])
        ]

    def _scope(self) -> str:
        return "every call" if self.steps is None else " and ".join(self.steps)

    def describe(self) -> str:
        return f"{self.arg} must be the same in {self._scope()}"

    def mentions(self) -> set[str]:
        return set(self.steps or ())


@dataclass(frozen=True)
class FromFact(PlanRule):
    """Argument ``arg`` of ``steps`` (or of every call that takes it) must equal the
    trusted fact ``fact`` (default: the argument's name) from the app's ``facts``. A plan
    for which the fact is not known is refused, unless ``required=False``: then the rule
    binds only the plans whose fact the trusted system has."""

    arg: str
    fact: str | None = None
    steps: Sequence[str] | None = field(default=None, kw_only=True)
    required: bool = field(default=True, kw_only=True)
    needs_facts = True

    @property
    def key(self) -> str:
        return self.fact or self.arg

    def check(self, view: PlanView) -> list[PlanError]:
        carrying = [c for c in view.named(self.steps) if self.arg in c.args]
        if not carrying:
            return []
        if view.facts is None or self.key not in view.facts:
            if not self.required:
                return []
            c = carrying[0]
            return [
                PlanError(
                    ErrorCode.FACT_UNAVAILABLE,
                    f"{c.name}.{self.arg} must equal the trusted fact {self.key!r}, which is "
                    "not known for this plan (check the ids the plan names)",
                    c.index,
                    c.arg_path(self.arg),
                    c.name,
                )
            ]
        truth = view.facts[self.key]
        return [
            PlanError(
                ErrorCode.FACT_MISMATCH,
                f"{c.name}.{self.arg} is {_show(c.args[self.arg])} but the trusted value "
                f"({self.key}) is {_show(truth)}; use {_show(truth)}",
                c.index,
                c.arg_path(self.arg),
                c.name,
            )
            for c in carrying
            if not same_value(c.args[self.arg], truth)
        ]

    def describe(self) -> str:
        where = "every call" if self.steps is None else " and ".join(self.steps)
        known = "" if self.required else " when the order system knows it"
        return f"{self.arg} in {where} must equal the trusted {self.key} of the order{known}"

    def mentions(self) -> set[str]:
        return set(self.steps or ())


PlanCheck = Callable[[Plan, Mapping[str, object] | None], Iterable[str] | str | None]
"""``check(plan, facts)`` returns what is wrong (a message or several), or None."""


@dataclass(frozen=True)
class Check(PlanRule):
    """Anything the rules above cannot say: ``check(plan, facts)`` returns the problems.
    A check that raises refuses the plan with ``plan_check_error``."""

    check_fn: PlanCheck
    description: str
    needs_facts = True

    def check(self, view: PlanView) -> list[PlanError]:
        name = getattr(self.check_fn, "__name__", "check")
        try:
            found = self.check_fn(view.plan, view.facts)
            problems = [found] if isinstance(found, str) else list(found or ())
        except Exception as exc:
            return [
                PlanError(
                    ErrorCode.PLAN_CHECK_ERROR,
                    f"the plan check {name} failed: {type(exc).__name__}: {exc}",
                    path="steps",
                )
            ]
        return [PlanError(ErrorCode.PLAN_CHECK_FAILED, str(p), path="steps") for p in problems if p]

    def describe(self) -> str:
        return self.description
