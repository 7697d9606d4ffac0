"""Approval rules: which pivots wait for a person, written in code."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from pydantic import BaseModel

from pivotal.plan import Plan

DAY = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class ApprovalRequirement:
    """A pivot must be approved by a person before ``expires_in`` seconds pass."""

    reason: str
    expires_in: float = DAY


class ApprovalPolicy(Protocol):
    """Decides whether the pivot ``step`` called with ``args`` needs a person's approval."""

    def __call__(self, step: str, args: BaseModel, plan: Plan) -> ApprovalRequirement | None: ...


@dataclass(frozen=True)
class ThresholdPolicy:
    """Pivots whose ``field`` exceeds a threshold need approval; thresholds vary by tier.

    ``tier_of(args, plan)`` tells the customer tier from a trusted source (not from text the
    planner wrote); ``by_tier`` overrides ``threshold`` for known tiers.
    """

    field: str = "amount"
    threshold: float = 150.0
    by_tier: Mapping[str, float] = dataclasses.field(default_factory=dict)
    tier_of: Callable[[BaseModel, Plan], str | None] | None = None
    steps: frozenset[str] | None = None  # limit to these pivots; None means any pivot
    expires_in: float = DAY

    def __call__(self, step: str, args: BaseModel, plan: Plan) -> ApprovalRequirement | None:
        if self.steps is not None and step not in self.steps:
            return None
        value = getattr(args, self.field, None)
        if not isinstance(value, int | float | Decimal) or isinstance(value, bool):
            return None
        tier = self.tier_of(args, plan) if self.tier_of else None
        limit = self.by_tier.get(tier, self.threshold) if tier else self.threshold
        if float(value) <= limit:
            return None
        who = f" for tier {tier!r}" if tier else ""
        return ApprovalRequirement(
            f"{step} {self.field}={float(value):g} exceeds the approval threshold {limit:g}{who}",
            self.expires_in,
        )
