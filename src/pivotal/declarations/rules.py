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

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from pivotal.declarations.identity import finite_decimal, same
from pivotal.declarations.plan import Plan
from pivotal.declarations.plan_errors import ErrorCode, PlanError
from pivotal.declarations.plan_view import Call, PlanView, show

__all__ = [
    "Agree",
    "AtMost",
    "Call",
    "Check",
    "Free",
    "FromFact",
    "FromFactRows",
    "OnBehalfOfAbove",
    "PlanRule",
    "PlanView",
    "Required",
    "RequiresEarlier",
    "same_value",
]


def same_value(a: object, b: object) -> bool:
    """Equal as the plan means them when nothing says the argument's type: numbers by
    value (180 equals 180.00), text exactly ("04471" is not "4471")."""
    return same(a, b)


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

    def binds(self, step: str, arg: str) -> bool:
        """Whether the rule says what argument ``arg`` of ``step`` may be: equal to a
        trusted fact, the same across steps, or free within its schema."""
        return False


def _covers(steps: Sequence[str] | None, step: str) -> bool:
    return steps is None or step in steps


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
    same value: one ``order_id`` for the whole plan, a capture equal to its authorisation.
    Values are compared as the argument's type reads them (an entity by its one spelling,
    an amount by its value)."""

    arg: str
    steps: Sequence[str] | None = field(default=None, kw_only=True)

    def check(self, view: PlanView) -> list[PlanError]:
        carrying = [c for c in view.named(self.steps) if c.takes(self.arg)]
        if not carrying:
            return []
        first = carrying[0]
        return [
            PlanError(
                ErrorCode.ARGUMENTS_DISAGREE,
                f"{c.name}.{self.arg} is {c.written(self.arg)} but {first.name} (step "
                f"{first.index}) has {first.written(self.arg)}; {self._scope()} must use "
                "one value",
                c.index,
                c.arg_path(self.arg),
                c.name,
            )
            for c in carrying[1:]
            if c.key(self.arg) != first.key(self.arg)
        ]

    def _scope(self) -> str:
        return "every call" if self.steps is None else " and ".join(self.steps)

    def describe(self) -> str:
        return f"{self.arg} must be the same in {self._scope()}"

    def mentions(self) -> set[str]:
        return set(self.steps or ())

    def binds(self, step: str, arg: str) -> bool:
        return arg == self.arg and _covers(self.steps, step)


@dataclass(frozen=True)
class Free(PlanRule):
    """Argument ``arg`` of ``steps`` (or of every step that takes it) is the planner's to
    choose within its schema: said so, so that a catalogue that wants every argument of
    money or identity bound (``Catalogue(unbound="refuse")``) knows it was meant."""

    arg: str
    steps: Sequence[str] | None = field(default=None, kw_only=True)
    why: str = field(default="", kw_only=True)

    def check(self, view: PlanView) -> list[PlanError]:
        return []

    def describe(self) -> str:
        where = "any step" if self.steps is None else " and ".join(self.steps)
        why = f" ({self.why})" if self.why else ""
        return f"{self.arg} in {where} is yours to choose within its schema{why}"

    def mentions(self) -> set[str]:
        return set(self.steps or ())

    def binds(self, step: str, arg: str) -> bool:
        return arg == self.arg and _covers(self.steps, step)


@dataclass(frozen=True)
class FromFact(PlanRule):
    """Argument ``arg`` of ``steps`` (or of every call that takes it) must equal the
    trusted fact ``fact`` (default: the argument's name) from the app's ``facts`` about
    what that call names. A plan for which the fact is not known is refused, unless
    ``required=False``: then the rule binds only the plans whose fact the trusted system
    has."""

    arg: str
    fact: str | None = None
    steps: Sequence[str] | None = field(default=None, kw_only=True)
    required: bool = field(default=True, kw_only=True)
    needs_facts = True

    @property
    def key(self) -> str:
        return self.fact or self.arg

    def check(self, view: PlanView) -> list[PlanError]:
        out: list[PlanError] = []
        for c in view.named(self.steps):
            if not c.takes(self.arg):
                continue
            known = view.facts_for(c)
            if known is None or self.key not in known:
                if self.required:
                    out.append(self._unknown(c))
                continue
            truth = known[self.key]
            if not same(c.value(self.arg), truth, c.field(self.arg)):
                out.append(
                    PlanError(
                        ErrorCode.FACT_MISMATCH,
                        f"{c.name}.{self.arg} is {c.written(self.arg)} but the trusted "
                        f"value ({self.key}) is {show(truth)}; use {show(truth)}",
                        c.index,
                        c.arg_path(self.arg),
                        c.name,
                    )
                )
        return out

    def _unknown(self, c: Call) -> PlanError:
        return PlanError(
            ErrorCode.FACT_UNAVAILABLE,
            f"{c.name}.{self.arg} must equal the trusted fact {self.key!r}, which is not "
            "known for what this call names (check the ids the plan names)",
            c.index,
            c.arg_path(self.arg),
            c.name,
        )

    def describe(self) -> str:
        where = "every call" if self.steps is None else " and ".join(self.steps)
        known = "" if self.required else " when the order system knows it"
        return f"{self.arg} in {where} must equal the trusted {self.key} of the order{known}"

    def mentions(self) -> set[str]:
        return set(self.steps or ())

    def binds(self, step: str, arg: str) -> bool:
        return arg == self.arg and _covers(self.steps, step)


@dataclass(frozen=True)
class FromFactRows(PlanRule):
    """Each call of ``step`` is one row of the trusted list ``fact`` (an order's lines):
    its ``fields`` equal that row's, no row is called twice, and (``every``) every row is
    called. Each argument is compared as its type reads it."""

    step: str
    fields: Sequence[str]
    fact: str = "lines"
    every: bool = field(default=True, kw_only=True)
    needs_facts = True

    def check(self, view: PlanView) -> list[PlanError]:
        calls = view.named([self.step])
        if not calls:
            return []
        out: list[PlanError] = []
        used: dict[int, Call] = {}  # row position -> the call that took it
        for c in calls:
            rows = _rows((view.facts_for(c) or {}).get(self.fact))
            if rows is None:
                out.append(self._unknown(c))
                continue
            match = next((n for n, row in enumerate(rows) if self._fits(c, row)), None)
            if match is None:
                out.append(self._not_a_row(c, rows))
            elif match in used:
                first = used[match]
                out.append(
                    PlanError(
                        ErrorCode.TOO_MANY_CALLS,
                        f"{self.step} (step {c.index}) takes the same {self.fact} row as step "
                        f"{first.index} ({self._shown(c)}); call it once per row",
                        c.index,
                        c.path,
                        c.name,
                    )
                )
            else:
                used[match] = c
        rows = _rows((view.facts_for(calls[0]) or {}).get(self.fact))
        if self.every and rows is not None and not out:
            for n, row in enumerate(rows):
                if n not in used:
                    out.append(
                        PlanError(
                            ErrorCode.MISSING_STEP,
                            f"the trusted {self.fact} include {self._shown(row)}, which no "
                            f"{self.step} call takes; add a call for it",
                            path="steps",
                            step=self.step,
                        )
                    )
        return out

    def _fits(self, c: Call, row: Mapping[str, object]) -> bool:
        return all(
            c.takes(name) and name in row and same(c.value(name), row[name], c.field(name))
            for name in self.fields
        )

    def _shown(self, values: Mapping[str, object] | Call) -> str:
        get = values.value if isinstance(values, Call) else values.get
        return ", ".join(f"{f}={show(get(f))}" for f in self.fields)

    def _unknown(self, c: Call) -> PlanError:
        return PlanError(
            ErrorCode.FACT_UNAVAILABLE,
            f"{self.step} must be one of the trusted {self.fact!r}, which are not known for "
            "what this call names (check the ids the plan names)",
            c.index,
            c.path,
            c.name,
        )

    def _not_a_row(self, c: Call, rows: list[Mapping[str, object]]) -> PlanError:
        known = "; ".join(self._shown(r) for r in rows[:5]) or "none"
        return PlanError(
            ErrorCode.FACT_MISMATCH,
            f"{self.step} has {self._shown(c)}, which is none of the trusted "
            f"{self.fact} ({known}); use one of them",
            c.index,
            c.path,
            c.name,
        )

    def describe(self) -> str:
        every = "; every one of them must be called" if self.every else ""
        return (
            f"each {self.step} call must be one of the trusted {self.fact} of the order "
            f"(the same {' and '.join(self.fields)}), each at most once{every}"
        )

    def mentions(self) -> set[str]:
        return {self.step}

    def binds(self, step: str, arg: str) -> bool:
        return step == self.step and arg in self.fields


@dataclass(frozen=True)
class OnBehalfOfAbove(PlanRule):
    """A plan with a call (among ``steps``, or any) whose ``field`` is above ``amount`` must
    name the person it is for (``provenance.on_behalf_of``), who then cannot approve it
    (four-eyes). Each call is compared on its own: an authorisation and its capture are one
    payment, not two."""

    amount: Decimal | int | float | str
    steps: Sequence[str] | None = field(default=None, kw_only=True)
    field: str = field(default="amount", kw_only=True)  # last: it shadows ``field`` here

    def __post_init__(self) -> None:
        if finite_decimal(self.amount) is None:
            raise ValueError(f"OnBehalfOfAbove needs a finite amount, not {self.amount!r}")

    def check(self, view: PlanView) -> list[PlanError]:
        limit = finite_decimal(self.amount)
        assert limit is not None
        above = [
            c for c in view.named(self.steps) if (finite_decimal(c.value(self.field)) or 0) > limit
        ]
        if not above or view.plan.provenance.names_whom():
            return []
        c = above[0]
        return [
            PlanError(
                ErrorCode.ON_BEHALF_OF_REQUIRED,
                f"{c.name}.{self.field} is {c.written(self.field)}, above {limit:f}: the plan "
                "must name the person it is for in provenance.on_behalf_of",
                path="provenance.on_behalf_of",
            )
        ]

    def describe(self) -> str:
        where = "any call" if self.steps is None else " or ".join(self.steps)
        return (
            f"a plan whose {where} has {self.field} above {finite_decimal(self.amount):f} "
            "must name the person it is for (provenance.on_behalf_of)"
        )

    def mentions(self) -> set[str]:
        return set(self.steps or ())


def _rows(value: object) -> list[Mapping[str, object]] | None:
    if not isinstance(value, list | tuple) or not all(isinstance(r, Mapping) for r in value):
        return None
    return list(value)


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
