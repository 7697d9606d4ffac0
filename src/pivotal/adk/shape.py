"""What a saga agent's stage may be, each turned into the stage the plan sees.

``Act`` and ``Decide`` stand for themselves. A ``Parallel``, or an ADK ``ParallelAgent``
whose sub-agents are acting stages (``Act(...).agent()``), is one parallel group of the
plan: Pivotal's engine runs its members concurrently, each with its own intent and key, and
compensation undoes them, newest outcome first, after every later stage and before every
earlier one. The ``ParallelAgent`` itself is never run: it only says which stages go
together.

Refused, each with the reason, because a plan's parallel group cannot express it:

- a model stage in a group: a verdict precedes or follows acting stages (it decides
  whether the saga goes on past it); racing them, it would decide nothing;
- a group in a group, or a ``SequentialAgent`` in one: a group holds calls, not
  sequences or groups (flatten it into one group, or put the order in the saga);
- a step that is not compensable (the pivot, or a retriable step after it): a group must
  be undoable as a whole, and the point of no return is one step in a known order;
- an empty group, and callbacks on the group or on a member: they would never run.
"""

from __future__ import annotations

from typing import Any

from google.adk.agents import BaseAgent, LlmAgent, ParallelAgent

from pivotal.adk.stages import Act, ActAgent, Decide, Parallel, Stage, StageError
from pivotal.declarations.catalogue import Catalogue, StepKind

_CALLBACKS = ("before_agent_callback", "after_agent_callback")


def stage_of(stage: Any, catalogue: Catalogue) -> Stage:
    """``stage`` as the plan sees it, or ``StageError`` saying why it cannot be one."""
    if isinstance(stage, Act | Decide):
        return stage
    if isinstance(stage, ActAgent):
        _no_callbacks(stage)
        return stage.act
    if isinstance(stage, Parallel):
        return _checked(stage, catalogue)
    if isinstance(stage, ParallelAgent):
        _no_callbacks(stage)
        members = [_member(stage.name, agent) for agent in stage.sub_agents]
        return _checked(Parallel(stage.name, members), catalogue)
    raise StageError(
        "a stage must be an Act, a Decide, or a Parallel (or an ADK ParallelAgent of "
        f"acting stages), not {stage!r}"
    )


def _member(group: str, agent: BaseAgent) -> Act:
    lead = f"the parallel stage {group} holds only acting stages (Act(...).agent()); "
    if isinstance(agent, ActAgent):
        _no_callbacks(agent)
        return agent.act
    if isinstance(agent, ParallelAgent):
        raise StageError(
            f"parallel stages do not nest: {agent.name} is inside {group}; a plan's parallel "
            "group holds calls, not groups: put their acting stages in one ParallelAgent"
        )
    if isinstance(agent, LlmAgent):
        raise StageError(
            lead + f"{agent.name} is a model stage: a verdict comes before or after acting "
            "stages, never beside them"
        )
    raise StageError(
        lead + f"{agent.name} is a {type(agent).__name__}: a group's members run "
        "concurrently, each one catalogue step"
    )


def _checked(group: Parallel, catalogue: Catalogue) -> Parallel:
    if not group.acts:
        raise StageError(f"the parallel stage {group.name} needs at least one acting stage")
    for act in group.acts:
        if not isinstance(act, Act):
            raise StageError(f"the parallel stage {group.name} holds only Act stages, not {act!r}")
        step = catalogue.get(act.step)  # an unknown step is the validator's to reject
        if step is not None and step.kind is not StepKind.COMPENSABLE:
            raise StageError(
                f"the parallel stage {group.name} holds {act.stage}, but {act.step} is a "
                f"{step.kind.value} step: a parallel group holds only compensable steps "
                "(the pivot and the steps after it run one at a time, in order)"
            )
    return group


def _no_callbacks(agent: BaseAgent) -> None:
    given = [name for name in _CALLBACKS if getattr(agent, name, None)]
    if given:
        raise StageError(
            f"{agent.name} has {' and '.join(given)}: Pivotal's engine runs its steps and "
            "never runs the agent itself, so they would never be called"
        )
