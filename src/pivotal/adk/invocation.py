"""One invocation of a saga agent: what the agent (``pivotal.adk.agent``) and the driver of
its saga (``pivotal.adk.drive``) both work with, so that neither imports the other.

The invocation knows the agent's stages, writes the agent's events (the session state is
changed only through their state deltas) and runs its model stages.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event, EventActions
from google.genai import types

from pivotal.adk import stages as S
from pivotal.adk.stages import Act, Decide, Stage
from pivotal.engine import describe
from pivotal.orchestration.orchestrator import Orchestrator


@dataclass(frozen=True)
class Invocation:
    """One run of a saga agent (``author``, its name) with ``ctx``, over its ``units``."""

    orchestrator: Orchestrator
    author: str
    ctx: InvocationContext
    units: tuple[Stage, ...]
    decide_timeout: float = S.DECIDE_TIMEOUT  # for a model stage that sets none

    @property
    def acts(self) -> list[Act]:
        return S.acts_of(self.units)

    def gates(self) -> list[tuple[int, Decide]]:
        return S.gates_of(self.units)

    def event(self, delta: Mapping[str, Any], text: str = "") -> Event:
        """An event of the agent changing the session state by ``delta``, saying ``text``."""
        content = types.Content(role="model", parts=[types.Part(text=text)]) if text else None
        return Event(
            invocation_id=self.ctx.invocation_id,
            author=self.author,
            branch=self.ctx.branch,
            content=content,
            actions=EventActions(state_delta=dict(delta)),
        )

    async def decide(self, stage: Decide) -> AsyncGenerator[Event, None]:
        """Run a model stage, forward its events, then record its verdict. A stage that
        fails, or gives no verdict within its timeout (it is then stopped), rolls back."""
        bound = self.decide_timeout if stage.timeout is None else stage.timeout
        deadline = asyncio.get_running_loop().time() + bound
        failed: str | None = None
        try:
            async with aclosing(stage.agent.run_async(self.ctx)) as events:
                while (event := await _next(events, deadline)) is not None:
                    yield event  # outside the bound: the runner's time is not the model's
        except _Silent:
            failed = f"model stage {stage.stage} gave no verdict within {bound:g}s"
        except Exception as exc:  # a model stage that fails cannot approve anything
            failed = f"model stage {stage.stage} failed: {describe(exc)}"
        reason = failed or S.abort_reason(stage, self.ctx.session.state)
        delta: dict[str, Any] = {S.DECIDED_PREFIX + stage.stage: reason or S.PROCEED}
        if reason:
            delta[S.SAGA_ABORT] = reason
        yield self.event(delta)


class _Silent(Exception):
    """A model stage gave no verdict in time."""


async def _next(events: AsyncGenerator[Event, None], deadline: float) -> Event | None:
    """The model stage's next event, None after its last; ``_Silent`` once the event
    loop's clock reaches ``deadline`` (the stage is cancelled where it waits)."""
    try:
        async with asyncio.timeout_at(deadline) as bound:
            return await anext(events)
    except StopAsyncIteration:
        return None
    except TimeoutError:
        if bound.expired():
            raise _Silent from None
        raise
