"""A planner that replays fixed proposals: for demos, tests and dry runs of the loop."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pivotal.declarations.plan import ActorType
from pivotal.planning.base import PlannerInfo, PlannerTurn, Proposal
from pivotal.planning.errors import PlannerConfigError, PlannerError

SCRIPTED = PlannerInfo(
    actor_type=ActorType.AGENT, actor_id="scripted", model="scripted", prompt_version="scripted"
)

ScriptItem = Mapping[str, Any] | PlannerError


class ScriptedPlanner:
    """Answers attempt n of every request with the n-th item of its script; no model is
    called.

    An item is plan data (with an optional ``rationale``) or a ``PlannerError`` to raise.
    Its proposals are labelled ``scripted`` in provenance, so they are never mistaken for
    a model's. Every turn it receives is kept in ``turns``.
    """

    def __init__(self, script: Sequence[ScriptItem], *, info: PlannerInfo = SCRIPTED) -> None:
        if not script:
            raise PlannerConfigError("a scripted planner needs at least one proposal")
        self.script = tuple(script)
        self.info = info
        self.turns: list[PlannerTurn] = []

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedPlanner:
        """A script from a JSON file holding a list of plans."""
        try:
            items = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise PlannerConfigError(f"cannot read the script {path}: {exc}") from None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise PlannerConfigError(f"the script {path} must be a JSON list of plan objects")
        return cls(items)

    async def propose(self, turn: PlannerTurn) -> Proposal:
        self.turns.append(turn)
        if turn.attempt > len(self.script):
            raise PlannerError(
                f"the script has only {len(self.script)} proposal(s)", final=True, by=self.info
            )
        item = self.script[turn.attempt - 1]
        if isinstance(item, PlannerError):
            raise item
        rationale = item.get("rationale")
        return Proposal(
            plan=dict(item),
            rationale=rationale if isinstance(rationale, str) else "",
            by=self.info,
            raw=json.dumps(item, sort_keys=True, default=str),
        )
