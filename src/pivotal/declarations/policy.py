"""Approval rules: which pivots wait for a person, written in code."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, Protocol

from pydantic import BaseModel

from pivotal.declarations.exposure import (
    NO_RATES,
    Exposure,
    Moved,
    Moves,
    Rates,
    check_currency,
    moved_by,
)
from pivotal.declarations.identity import ArgKind, finite_decimal, identity_of, kind_of
from pivotal.declarations.plan import Plan
from pivotal.kinds import StepKind

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
    """Which other sagas count toward a plan's exposure: what the ledger holds reserved
    for the subject the plan names as ``by`` (an order id, a customer: an argument its
    value-moving steps declare in ``Moves(per=...)``), by sagas of any catalogue still
    going or ended within ``seconds``. A reservation is released only by what reversed it
    (see ``pivotal.declarations.exposure``). When more than ``limit`` reservations are found, they
    are not counted: a person decides."""

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
    refused when its app is built, and ``undeclared(catalogue) -> str | None`` so that one
    naming what the catalogue's steps do not declare is refused too.

    Two optional attributes widen it. ``before``: step names before whose first call it is
    asked instead, when that call comes earlier than the point of no return (a charge that
    can be refunded, but should not be made unapproved). ``across``: a ``Window`` or None;
    a policy that has the attribute is called with ``exposure=``, an
    ``exposure.Exposure``: the value the plan moves as its steps declare it (``Moves``),
    parsed and defaulted, and, with a window, what the ledger holds reserved for the same
    subjects by other sagas, whatever their catalogue.
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

    @property
    def moves(self) -> Moves | None: ...


class CatalogueLike(Protocol):
    """What a policy reads of a catalogue (a ``pivotal.Catalogue`` is one): its steps by
    name, and its approval policy."""

    @property
    def approval(self) -> ApprovalPolicy | None: ...

    def __iter__(self) -> Iterator[StepLike]: ...

    def __contains__(self, name: object) -> bool: ...

    def __getitem__(self, name: str) -> StepLike: ...


def _others(exposure: Exposure, earlier: Decimal, by: Window | None) -> str:
    n = exposure.other_sagas
    if not n or by is None:
        return ""
    sagas = "saga" if n == 1 else "sagas"
    return f", with {earlier:f} in {n} other {sagas} for the same {by.by}"


def _takes(catalogue: CatalogueLike, steps: Iterable[str], field: str) -> list[str]:
    return [s for s in steps if s in catalogue and field in catalogue[s].args_model.model_fields]


def _in_scope(catalogue: CatalogueLike, steps: Iterable[str] | None) -> list[StepLike]:
    names = None if steps is None else frozenset(steps)
    return [s for s in catalogue if names is None or s.name in names]


def undeclared(
    catalogue: CatalogueLike,
    scope: list[StepLike],
    field: str,
    across: Window | None,
    what: str,
) -> str | None:
    """Why ``what`` names arguments the steps it counts do not declare (None: it does not):
    money ``field`` that no step in ``scope`` declares moving (``moves=Moves(...)``), a step
    in scope that takes money as ``field`` without declaring it, a window over an argument
    that is no declared subject of a step in scope (or no entity at all)."""
    declaring = [s for s in scope if s.moves is not None]
    for s in scope:
        if s.moves is None and kind_of(s.args_model.model_fields.get(field)) is ArgKind.MONEY:
            return (
                f"{what} counts step {s.name!r}, whose {field!r} is money it does not declare "
                f"moving: declare it with moves=Moves({field!r}, ...)"
            )
    if not any(s.moves is not None and s.moves.amount == field for s in declaring):
        return (
            f"{what} counts {field!r}, which no step it counts declares as the money it "
            "moves (moves=Moves(...))"
        )
    if across is not None:
        subjects = {p for s in declaring if s.moves is not None for p in s.moves.subjects}
        if across.by not in subjects:
            entity = any(
                identity_of(s.args_model.model_fields.get(across.by)) is not None for s in catalogue
            )
            kind = "an entity argument" if entity else "not an entity argument"
            return (
                f"{what}'s window counts per {across.by!r} ({kind}), which no step it counts "
                "declares as a subject it moves value for (Moves(per=...)): it would count "
                "nothing"
            )
    return None


@dataclass(frozen=True)
class ThresholdPolicy:
    """Pivots whose value exceeds a threshold need approval; thresholds vary by tier.

    The value is what the pivot declares it moves (``Moves`` with the money argument
    ``field``), converted into ``currency`` by the app's rates, plus, with ``across``, what
    other sagas hold reserved for the same subject. ``tier_of(args, plan)`` tells the
    customer tier from a trusted source (not from text the planner wrote); ``by_tier``
    overrides ``threshold`` for known tiers. Above ``two_approvers_above`` two distinct
    people must approve.
    """

    field: str = "amount"
    threshold: float = 150.0
    by_tier: Mapping[str, float] = dataclasses.field(default_factory=dict)
    tier_of: Callable[[BaseModel, Plan], str | None] | None = None
    steps: frozenset[str] | None = None  # limit to these pivots; None means any pivot
    expires_in: float = DAY
    two_approvers_above: float | None = None  # above it, two distinct approvers
    across: Window | None = None  # what other sagas reserved for the subject counts too
    currency: str = "EUR"  # what the thresholds are in

    def __post_init__(self) -> None:
        check_currency(self.currency, "ThresholdPolicy")

    def _looked_at(self, catalogue: CatalogueLike) -> list[str]:
        pivots = [s.name for s in catalogue if s.kind is not StepKind.COMPENSABLE]
        return [p for p in pivots if self.steps is None or p in self.steps]

    def never_fires(self, catalogue: CatalogueLike) -> str | None:
        pivots = self._looked_at(catalogue)
        if not pivots:
            return f"no pivot or retriable step among {sorted(self.steps or [])}"
        if not _takes(catalogue, pivots, self.field):
            return f"no step it looks at ({', '.join(pivots)}) takes {self.field!r}"
        return None

    def undeclared(self, catalogue: CatalogueLike) -> str | None:
        scope = _in_scope(catalogue, self._looked_at(catalogue))
        return undeclared(catalogue, scope, self.field, self.across, "the approval policy")

    def __call__(
        self, step: str, args: BaseModel, plan: Plan, *, exposure: Exposure | None = None
    ) -> ApprovalRequirement | None:
        if self.steps is not None and step not in self.steps:
            return None
        if exposure is None:  # asked directly: the step's own parsed value, in our currency
            value = finite_decimal(getattr(args, self.field, None))
            if value is None:
                return None
            exposure = Exposure(moved=(Moved(0, step, value, self.currency, ()),))
        if not any(m.step == step for m in exposure.moved):
            if finite_decimal(getattr(args, self.field, None)) is None:
                return None  # the step moves nothing
            return ApprovalRequirement(  # money it does not declare is never counted as 0
                f"{step} takes {self.field} without declaring the value it moves: a person "
                "must decide",
                self.expires_in,
            )
        mine = exposure.own(self.currency, {step})
        earlier = exposure.others(self.currency)
        total = mine + earlier
        tier = self.tier_of(args, plan) if self.tier_of else None
        limit = self.by_tier.get(tier, self.threshold) if tier else self.threshold
        if total <= Decimal(str(limit)):
            return None
        who = f" for tier {tier!r}" if tier else ""
        others = _others(exposure, earlier, self.across)
        reason = (
            f"{step} {self.field}={float(mine):g}{others} exceeds the approval threshold "
            f"{limit:g}{who}"
        )
        two = self.two_approvers_above
        if two is not None and total > Decimal(str(two)):
            reason += f"; above {two:g} two people must approve"
            return ApprovalRequirement(reason, self.expires_in, approvers=2)
        return ApprovalRequirement(reason, self.expires_in)


@dataclass(frozen=True)
class ExposurePolicy:
    """Approval by what the whole plan exposes, asked before its point of no return.

    A person approves when the value the ``counted`` steps declare they move (every step
    declaring ``moves`` when None), converted into ``currency``, plus with ``across`` what
    other sagas hold reserved for the same subject, exceeds the threshold for the
    customer's tier; or when the plan calls a step listed in ``always`` (a step a person
    must always see, wherever it stands in the plan). When the total exceeds
    ``two_approvers_above``, two distinct people must approve.
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
    across: Window | None = None  # what other sagas reserved for the subject counts too
    currency: str = "EUR"  # what the thresholds are in

    def __post_init__(self) -> None:
        check_currency(self.currency, "ExposurePolicy")

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

    def undeclared(self, catalogue: CatalogueLike) -> str | None:
        if self.threshold is None:
            return None
        scope = _in_scope(catalogue, self.counted)
        return undeclared(catalogue, scope, self.field, self.across, "the approval policy")

    def __call__(
        self, step: str, args: BaseModel, plan: Plan, *, exposure: Exposure | None = None
    ) -> ApprovalRequirement | None:
        if exposure is None:  # never a silent 0: the engine always says what is moved
            raise TypeError("an ExposurePolicy weighs what the plan moves: pass exposure=")
        called = {f.call.name for f in plan.calls()}
        reasons = [
            f"the plan calls {name}, which a person always approves"
            for name in sorted(self.always & called)
        ]
        total = Decimal(0)
        approvers = 1
        if self.threshold is not None:
            mine = exposure.own(self.currency, self.counted)
            earlier = exposure.others(self.currency)
            total = mine + earlier
            tier = self.tier_of(args, plan) if self.tier_of else None
            limit = self.by_tier.get(tier, self.threshold) if tier else self.threshold
            if total > Decimal(str(limit)):
                who = f" for tier {tier!r}" if tier else ""
                others = _others(exposure, earlier, self.across)
                reasons.append(
                    f"the plan moves {self.field}={mine:f} in all{others}, "
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

    The exposure is the value the plan's steps declare they move (``Moves``), parsed and
    defaulted, at the steps the catalogue's approval policy counts (an ``ExposurePolicy``'s
    ``counted``, a ``ThresholdPolicy``'s pivots; every declaring step otherwise), in
    ``currency`` (else the approval policy's, else EUR), plus what other sagas hold reserved
    in the ledger for the same subjects over ``across`` (else the approval policy's window).
    An amount that cannot be converted is never counted as 0: the plan is held back.
    """

    execute_below: Decimal
    above: RolloutAbove = "shadow"
    field: str = "amount"
    currency: str | None = None
    across: Window | None = None

    def __post_init__(self) -> None:
        limit = finite_decimal(self.execute_below)
        if limit is None or limit < 0:
            raise ValueError(f"execute_below must be a finite number >= 0: {self.execute_below!r}")
        object.__setattr__(self, "execute_below", limit)
        if self.above not in ("shadow", "refuse"):
            raise ValueError(f"above must be 'shadow' or 'refuse', not {self.above!r}")
        if self.currency is not None:
            check_currency(self.currency, "Rollout")

    def currency_for(self, catalogue: CatalogueLike) -> str:
        found = self.currency or getattr(catalogue.approval, "currency", None)
        return found if isinstance(found, str) else "EUR"

    def window_for(self, catalogue: CatalogueLike) -> Window | None:
        found = self.across or getattr(catalogue.approval, "across", None)
        return found if isinstance(found, Window) else None

    def counted_steps(self, catalogue: CatalogueLike) -> frozenset[str] | None:
        """The steps whose value it counts, as the approval policy counts them."""
        approval = catalogue.approval
        if isinstance(approval, ThresholdPolicy):
            pivots = frozenset(s.name for s in catalogue if s.kind is not StepKind.COMPENSABLE)
            return approval.steps if approval.steps is not None else pivots
        if isinstance(approval, ExposurePolicy):
            return approval.counted
        return None

    def undeclared(self, catalogue: CatalogueLike) -> str | None:
        scope = _in_scope(catalogue, self.counted_steps(catalogue))
        return undeclared(catalogue, scope, self.field, self.window_for(catalogue), "the rollout")

    def measure(self, exposure: Exposure, catalogue: CatalogueLike) -> Decimal:
        """What a plan exposes with what others reserved (``NoRate``: cannot be counted)."""
        currency = self.currency_for(catalogue)
        steps = self.counted_steps(catalogue)
        return exposure.own(currency, steps) + exposure.others(currency)

    def exposure(self, plan: Plan, catalogue: CatalogueLike, rates: Rates = NO_RATES) -> Decimal:
        """What ``plan`` alone exposes: its declared value, parsed and defaulted."""
        moved = tuple(moved_by(plan.calls(), catalogue))
        return self.measure(Exposure(moved, (), rates), catalogue)

    def describe(self) -> str:
        return f"agent plans execute below {self.execute_below:f}; above: {self.above}"
