"""Approval rules: which pivots wait for a person, written in code."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, Protocol

from pydantic import BaseModel

from pivotal.identity import finite_decimal
from pivotal.kinds import StepKind
from pivotal.plan import ParallelGroup, Plan, StepCall

DAY = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class ApprovalRequirement:
    """A pivot must be approved before ``expires_in`` seconds pass, by ``approvers``
    distinct people (two for the largest amounts: four eyes on the approval itself)."""

    reason: str
    expires_in: float = DAY
    approvers: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.approvers, bool) or not isinstance(self.approvers, int):
            raise TypeError(f"approvers must be an int, not {type(self.approvers).__name__}")
        if self.approvers < 1:
            raise ValueError(f"an approval needs at least one approver, not {self.approvers}")


@dataclass(frozen=True, slots=True)
class Window:
    """Which other sagas count toward a plan's exposure: those whose plans name the same
    ``by`` (an order id, a customer: an argument declared as an entity) and that are still
    going, or ended within ``seconds``; compensated sagas moved nothing and do not count.
    When more than ``limit`` of them are found, they are not counted: a person decides."""

    by: str = "order_id"
    seconds: float = DAY
    limit: int = 200

    def __post_init__(self) -> None:
        if not self.by or self.seconds < 0 or self.limit < 1:
            raise ValueError("a window needs an argument name, seconds >= 0 and limit >= 1")


class ApprovalPolicy(Protocol):
    """Decides whether the pivot ``step`` called with ``args`` needs a person's approval.

    It is asked once, just before the point of no return (the pivot, else the first
    retriable step), with the whole plan: it may weigh what the plan moves as a whole, not
    only the pivot. A plan whose risk lies in steps it never reaches (a plan without a pivot)
    must be refused by a catalogue rule (``Required``), not by the policy. A policy may define
    ``never_fires(catalogue) -> str | None`` so that a catalogue on which it can never fire is
    refused when its app is built.

    Two optional attributes widen it. ``before``: step names before whose first call it is
    asked instead, when that call comes earlier than the point of no return (a charge that
    can be refunded, but should not be made unapproved). ``across``: a ``Window``; the
    policy is then called with ``prior=``, the plans of the other sagas it covers, so that
    one payment split over several sagas does not pass under the threshold.
    """

    def __call__(self, step: str, args: BaseModel, plan: Plan) -> ApprovalRequirement | None: ...


class StepLike(Protocol):
    """What a policy reads of a step (a ``pivotal.Step`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> StepKind: ...

    @property
    def args_model(self) -> type[BaseModel]: ...


class CatalogueLike(Protocol):
    """What a policy reads of a catalogue (a ``pivotal.Catalogue`` is one): its steps by
    name, and its approval policy."""

    @property
    def approval(self) -> ApprovalPolicy | None: ...

    def __iter__(self) -> Iterator[StepLike]: ...

    def __contains__(self, name: object) -> bool: ...

    def __getitem__(self, name: str) -> StepLike: ...


def _others(prior: Sequence[Plan], total: Decimal, by: Window | None) -> str:
    if not prior or by is None:
        return ""
    sagas = "saga" if len(prior) == 1 else "sagas"
    return f", with {total:f} in {len(prior)} other {sagas} for the same {by.by}"


def _takes(catalogue: CatalogueLike, steps: Iterable[str], field: str) -> list[str]:
    return [s for s in steps if s in catalogue and field in catalogue[s].args_model.model_fields]


def parsed(plan: Plan, catalogue: CatalogueLike) -> Plan:
    """``plan`` with each call's arguments as its step's model reads them, defaults filled
    in: what a plan moves is measured on this, never on the text a planner wrote (an amount
    left out counts as its default, not as nothing). A call the catalogue cannot parse (a
    step it lacks) keeps its arguments."""
    items: list[StepCall | ParallelGroup] = []
    for item in plan.steps:
        if isinstance(item, ParallelGroup):
            members = [_parsed_call(c, catalogue) for c in item.parallel]
            items.append(item.model_copy(update={"parallel": members}))
        else:
            items.append(_parsed_call(item, catalogue))
    return plan.model_copy(update={"steps": items})


def _parsed_call(call: StepCall, catalogue: CatalogueLike) -> StepCall:
    if call.name not in catalogue:
        return call
    parse = getattr(catalogue[call.name], "parse_args", None)
    try:
        args = parse(call.args) if callable(parse) else None
    except Exception:
        return call
    if not isinstance(args, BaseModel):
        return call
    return call.model_copy(update={"args": args.model_dump()})


def exposure_of(plan: Plan, field: str = "amount", counted: Iterable[str] | None = None) -> Decimal:
    """The total of ``field`` over the calls of ``plan`` (of the ``counted`` steps only, when
    given): what a plan exposes, as ``ExposurePolicy`` and ``Rollout`` both measure it. Give
    it the plan ``parsed`` by its catalogue: a plan as written lacks its defaults."""
    names = None if counted is None else frozenset(counted)
    total = Decimal(0)
    for flat in plan.calls():
        if names is not None and flat.call.name not in names:
            continue
        value = finite_decimal(flat.call.args.get(field))
        total += value if value is not None else 0
    return total


@dataclass(frozen=True)
class ThresholdPolicy:
    """Pivots whose ``field`` exceeds a threshold need approval; thresholds vary by tier.

    ``tier_of(args, plan)`` tells the customer tier from a trusted source (not from text the
    planner wrote); ``by_tier`` overrides ``threshold`` for known tiers. Above
    ``two_approvers_above`` two distinct people must approve.
    """

    field: str = "amount"
    threshold: float = 150.0
    by_tier: Mapping[str, float] = dataclasses.field(default_factory=dict)
    tier_of: Callable[[BaseModel, Plan], str | None] | None = None
    steps: frozenset[str] | None = None  # limit to these pivots; None means any pivot
    expires_in: float = DAY
    two_approvers_above: float | None = None  # above it, two distinct approvers
    across: Window | None = None  # other sagas' amounts at the same steps count too

    def never_fires(self, catalogue: CatalogueLike) -> str | None:
        pivots = [s.name for s in catalogue if s.kind is not StepKind.COMPENSABLE]
        if self.steps is not None:
            pivots = [p for p in pivots if p in self.steps]
        if not pivots:
            return f"no pivot or retriable step among {sorted(self.steps or [])}"
        if not _takes(catalogue, pivots, self.field):
            return f"no step it looks at ({', '.join(pivots)}) takes {self.field!r}"
        return None

    def __call__(
        self, step: str, args: BaseModel, plan: Plan, *, prior: Sequence[Plan] = ()
    ) -> ApprovalRequirement | None:
        if self.steps is not None and step not in self.steps:
            return None
        value = getattr(args, self.field, None)
        if not isinstance(value, int | float | Decimal) or isinstance(value, bool):
            return None
        earlier = sum((self._moved(p, step) for p in prior), Decimal(0))
        total = Decimal(str(value)) + earlier
        tier = self.tier_of(args, plan) if self.tier_of else None
        limit = self.by_tier.get(tier, self.threshold) if tier else self.threshold
        if total <= Decimal(str(limit)):
            return None
        who = f" for tier {tier!r}" if tier else ""
        others = _others(prior, earlier, self.across)
        reason = (
            f"{step} {self.field}={float(value):g}{others} exceeds the approval threshold "
            f"{limit:g}{who}"
        )
        two = self.two_approvers_above
        if two is not None and total > Decimal(str(two)):
            reason += f"; above {two:g} two people must approve"
            return ApprovalRequirement(reason, self.expires_in, approvers=2)
        return ApprovalRequirement(reason, self.expires_in)

    def _moved(self, plan: Plan, step: str) -> Decimal:
        """What another saga's plan moves at the steps this policy looks at."""
        return exposure_of(plan, self.field, self.steps if self.steps is not None else {step})


@dataclass(frozen=True)
class ExposurePolicy:
    """Approval by what the whole plan exposes, asked before its point of no return.

    A person approves when the total of ``field`` over the calls of ``counted`` steps (every
    call that takes ``field`` when None) exceeds the threshold for the customer's tier, or
    when the plan calls a step listed in ``always`` (a step a person must always see,
    wherever it stands in the plan). When the total exceeds ``two_approvers_above``, two
    distinct people must approve.
    """

    field: str = "amount"
    threshold: float | None = 150.0  # None: totals never require approval
    by_tier: Mapping[str, float] = dataclasses.field(default_factory=dict)
    tier_of: Callable[[BaseModel, Plan], str | None] | None = None
    counted: frozenset[str] | None = None
    always: frozenset[str] = frozenset()
    expires_in: float = DAY
    two_approvers_above: float | None = None  # a total above it needs two distinct approvers
    before: frozenset[str] = frozenset()  # asked before the first of these, if earlier
    across: Window | None = None  # other sagas' exposure counts too

    def never_fires(self, catalogue: CatalogueLike) -> str | None:
        unknown = sorted(a for a in self.always if a not in catalogue)
        if unknown:
            return f"'always' names steps the catalogue lacks: {', '.join(unknown)}"
        for name, steps in (("counted", self.counted or ()), ("before", self.before)):
            missing = sorted(c for c in steps if c not in catalogue)
            if missing:
                return f"{name!r} names steps the catalogue lacks: {', '.join(missing)}"
        if self.always or self.threshold is None:
            return None if self.always else "it has neither a threshold nor 'always'"
        counted = self.counted if self.counted is not None else {s.name for s in catalogue}
        if not _takes(catalogue, counted, self.field):
            return f"no step it counts takes {self.field!r}"
        return None

    def exposure(self, plan: Plan) -> Decimal:
        """The total of ``field`` over the counted calls of ``plan``."""
        return exposure_of(plan, self.field, self.counted)

    def __call__(
        self, step: str, args: BaseModel, plan: Plan, *, prior: Sequence[Plan] = ()
    ) -> ApprovalRequirement | None:
        called = {f.call.name for f in plan.calls()}
        reasons = [
            f"the plan calls {name}, which a person always approves"
            for name in sorted(self.always & called)
        ]
        earlier = sum((self.exposure(p) for p in prior), Decimal(0))
        total = self.exposure(plan) + earlier
        approvers = 1
        if self.threshold is not None:
            tier = self.tier_of(args, plan) if self.tier_of else None
            limit = self.by_tier.get(tier, self.threshold) if tier else self.threshold
            if total > Decimal(str(limit)):
                who = f" for tier {tier!r}" if tier else ""
                others = _others(prior, earlier, self.across)
                reasons.append(
                    f"the plan moves {self.field}={self.exposure(plan):f} in all{others}, "
                    f"above the approval threshold {limit:g}{who}"
                )
        two = self.two_approvers_above
        if two is not None and reasons and total > Decimal(str(two)):
            reasons.append(f"above {two:g} in all, two people must approve")
            approvers = 2
        if not reasons:
            return None
        return ApprovalRequirement("; ".join(reasons), self.expires_in, approvers=approvers)


RolloutAbove = Literal["shadow", "refuse"]


@dataclass(frozen=True)
class Rollout:
    """How far a catalogue trusts plans an agent proposed (``provenance.actor_type`` agent):
    those whose exposure is below ``execute_below`` are submitted as usual; the others are
    recorded in shadow (validated and kept as a shadow planning run, never run: ``above=
    "shadow"``, error code ``rollout_shadow``) or refused and recorded as refused
    (``"refuse"``, ``rollout_refused``). Plans of people and systems are not limited.

    The exposure is measured as the catalogue's approval policy measures it (``exposure_of``
    in both): an ``ExposurePolicy``'s total over its counted steps; a ``ThresholdPolicy``'s
    ``field`` over the pivots it looks at (its ``steps``, else every step that is not
    compensable); another policy's ``exposure(plan)`` when it has one; else the total of
    ``field`` over every call.
    """

    execute_below: Decimal
    above: RolloutAbove = "shadow"
    field: str = "amount"

    def __post_init__(self) -> None:
        limit = finite_decimal(self.execute_below)
        if limit is None or limit < 0:
            raise ValueError(f"execute_below must be a finite number >= 0: {self.execute_below!r}")
        object.__setattr__(self, "execute_below", limit)
        if self.above not in ("shadow", "refuse"):
            raise ValueError(f"above must be 'shadow' or 'refuse', not {self.above!r}")

    def exposure(self, plan: Plan, catalogue: CatalogueLike) -> Decimal:
        """What ``plan`` exposes, measured as ``catalogue``'s approval policy measures it, on
        its arguments as parsed (defaults filled in)."""
        plan = parsed(plan, catalogue)
        approval = catalogue.approval
        if isinstance(approval, ThresholdPolicy):
            pivots = {s.name for s in catalogue if s.kind is not StepKind.COMPENSABLE}
            steps = approval.steps if approval.steps is not None else pivots
            return exposure_of(plan, approval.field, steps)
        measure = getattr(approval, "exposure", None)  # ExposurePolicy, or one like it
        if callable(measure):
            return Decimal(measure(plan))
        return exposure_of(plan, self.field)

    def describe(self) -> str:
        return f"agent plans execute below {self.execute_below:f}; above: {self.above}"
