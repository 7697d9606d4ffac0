"""``AdkPlanner``: a Pivotal ``Planner`` over an ADK ``LlmAgent``.

The user's agent keeps its model configuration (model, generation config, callbacks); for
each attempt it is cloned with Pivotal's instruction, the catalogue's rendered plan schema
as ``output_schema`` (ADK accepts a raw JSON Schema mapping) and an ``output_key``, and run
in a session of its own. The reply is only a proposal: the re-plan loop validates it, feeds
the validator's errors (codes and paths) into the next attempt, and escalates at the end.
"""

from __future__ import annotations

import json
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from pivotal.declarations.plan import ActorType
from pivotal.engine import describe
from pivotal.planning.base import PlannerInfo, PlannerTurn, Proposal
from pivotal.planning.errors import PlannerError, PlannerReplyMalformed
from pivotal.planning.prompt import INSTRUCTIONS, PROMPT_VERSION, feedback_message, request_message

OUTPUT_KEY = "pivotal_plan"
_APP = "pivotal_planner"
_USER = "pivotal"


class AdkPlanner:
    """Proposes plans with ``agent`` (an ``LlmAgent``); see the module docstring."""

    def __init__(self, agent: LlmAgent) -> None:
        self.agent = agent
        model = agent.model if isinstance(agent.model, str) else agent.model.model
        self.info = PlannerInfo(
            actor_type=ActorType.AGENT,
            actor_id=f"adk:{agent.name}",
            model=model or None,
            prompt_version=PROMPT_VERSION,
        )

    def instruction(self, turn: PlannerTurn) -> str:
        """Pivotal's planning rules and the catalogue, as the agent's instruction."""
        return f"{INSTRUCTIONS}\n{turn.view.text}"

    def message(self, turn: PlannerTurn) -> str:
        """The request (as quoted data) and the errors of every earlier attempt."""
        parts = [request_message(turn)["content"]]
        for attempt in turn.history:
            own = attempt.by.actor_id == self.info.actor_id
            if own:
                reply = attempt.raw_reply or (json.dumps(attempt.plan) if attempt.plan else "")
                parts.append(f"Your attempt {attempt.n} answered: {reply or '(nothing usable)'}")
            parts.append(
                feedback_message(attempt, turn.max_attempts - attempt.n, own=own)["content"]
            )
        return "\n\n".join(parts)

    async def propose(self, turn: PlannerTurn) -> Proposal:
        text = self.instruction(turn)

        def provide(_: ReadonlyContext) -> str:  # a provider: braces are not state templates
            return text

        agent = self.agent.clone(
            update={
                "instruction": provide,
                "output_schema": turn.view.schema,
                "output_key": OUTPUT_KEY,
            }
        )
        sessions = InMemorySessionService()
        runner = Runner(agent=agent, app_name=_APP, session_service=sessions)
        session = await sessions.create_session(app_name=_APP, user_id=_USER)
        message = types.Content(role="user", parts=[types.Part(text=self.message(turn))])
        raw: list[str] = []
        try:
            async for event in runner.run_async(
                user_id=_USER, session_id=session.id, new_message=message
            ):
                if event.author == agent.name and event.content and event.content.parts:
                    raw += [p.text for p in event.content.parts if p.text and not p.thought]
        except Exception as exc:
            raise PlannerError(
                f"the ADK agent {agent.name} failed: {describe(exc)}",
                raw="".join(raw) or None,
                by=self.info,
            ) from exc
        finally:
            await runner.close()
        done = await sessions.get_session(app_name=_APP, user_id=_USER, session_id=session.id)
        plan: Any = done.state.get(OUTPUT_KEY) if done is not None else None
        reply = "".join(raw) or None
        if not isinstance(plan, dict):
            raise PlannerReplyMalformed(
                f"the ADK agent {agent.name} gave no plan object (got {type(plan).__name__})",
                raw=reply,
                by=self.info,
            )
        rationale = plan.get("rationale")
        return Proposal(
            plan=plan,
            rationale=rationale if isinstance(rationale, str) else "",
            by=self.info,
            raw=reply,
        )
