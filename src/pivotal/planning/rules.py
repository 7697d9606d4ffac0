"""A rule-based planner: fixed plan shapes chosen from a request's structured fields.

No model is involved and the request text is never read: a rule fires when the structured
fields it needs are present, and builds its plan from them alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pivotal.declarations.plan import ActorType
from pivotal.planning.base import PlannerInfo, PlannerTurn, PlanRequest, Proposal
from pivotal.planning.errors import NoRuleMatched

StepsBuilder = Callable[[PlanRequest], list[dict[str, Any]]]


@dataclass(frozen=True)
class Rule:
    """One plan shape for one catalogue.

    It fits a request for ``catalogue`` (or for no catalogue in particular) that carries
    every field in ``requires`` and whose ``intent`` field, when set, equals ``name``.
    """

    name: str
    catalogue: str
    requires: tuple[str, ...]
    build: StepsBuilder
    description: str = ""

    def missing(self, request: PlanRequest) -> list[str]:
        return [f for f in self.requires if request.get(f) in (None, "")]

    def fits(self, request: PlanRequest, catalogue: str) -> bool:
        intent = request.get("intent")
        return (
            self.catalogue == catalogue
            and (intent in (None, "") or intent == self.name)
            and not self.missing(request)
        )


class RulePlanner:
    """Proposes the plan of the first rule that fits; never asks a model."""

    def __init__(
        self, rules: Sequence[Rule], *, actor_id: str = "rules", version: str = "rules-1"
    ) -> None:
        self.rules = tuple(rules)
        self.info = PlannerInfo(
            actor_type=ActorType.SYSTEM, actor_id=actor_id, prompt_version=version
        )

    def choose(self, request: PlanRequest, catalogue: str) -> Rule | None:
        return next((r for r in self.rules if r.fits(request, catalogue)), None)

    async def propose(self, turn: PlannerTurn) -> Proposal:
        catalogue = turn.view.catalogue
        rule = self.choose(turn.request, catalogue)
        if rule is None:
            raise NoRuleMatched(self._why_not(turn.request, catalogue), final=True, by=self.info)
        used = ", ".join(f"{f}={turn.request.get(f)}" for f in rule.requires)
        rationale = (
            f"Rule {rule.name!r}: {rule.description or 'fixed plan shape'}. Built from the "
            f"structured fields ({used}); the request text was not interpreted."
        )
        plan = {"catalogue": catalogue, "steps": rule.build(turn.request)}
        return Proposal(plan=plan, rationale=rationale, by=self.info)

    def _why_not(self, request: PlanRequest, catalogue: str) -> str:
        reasons = []
        intent = request.get("intent")
        for rule in self.rules:
            if rule.catalogue != catalogue:
                continue
            if intent not in (None, "") and intent != rule.name:
                reasons.append(f"{rule.name!r} is not the intent {intent!r}")
            elif missing := rule.missing(request):
                reasons.append(f"{rule.name!r} needs {', '.join(missing)}")
        detail = "; ".join(reasons) or f"no rule is written for catalogue {catalogue!r}"
        return f"no rule fits this request: {detail}"
