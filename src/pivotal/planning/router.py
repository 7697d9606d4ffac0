"""Rules first, a model for the remainder."""

from __future__ import annotations

from pivotal.declarations.plan import ActorType
from pivotal.planning.base import Planner, PlannerInfo, PlannerTurn, Proposal
from pivotal.planning.errors import NoRuleMatched
from pivotal.planning.rules import RulePlanner


class RouterPlanner:
    """Tries the rule table on the first attempt and sends only the remainder to a model.

    A request no rule fits goes to the model. So does a re-plan: a rule would only propose
    its rejected plan again, so the model gets the request with the validator's errors.
    Each proposal names its real author, so provenance tells rule plans from model plans.
    """

    def __init__(self, rules: RulePlanner, model: Planner) -> None:
        self.rules = rules
        self.model = model
        inner = model.info
        self.info = PlannerInfo(
            actor_type=ActorType.AGENT,
            actor_id=f"router({rules.info.actor_id},{inner.actor_id})",
            model=inner.model,
            prompt_version=inner.prompt_version,
        )

    async def propose(self, turn: PlannerTurn) -> Proposal:
        if turn.previous is None:
            try:
                return await self.rules.propose(turn)
            except NoRuleMatched:
                pass
        return await self.model.propose(turn)
