"""The stages of a saga agent, and the session-state keys it writes.

An ``Act`` is a catalogue step run by Pivotal's engine; a ``Decide`` is a model stage (an ADK
``LlmAgent``) that only decides; a ``Parallel`` (or an ADK ``ParallelAgent`` of acting stages,
``Act(...).agent()``) is a group of acting stages run concurrently. The session state is a
view of the ledger, written through event state deltas: ``comp:<stage>`` records,
``saga_status``, ``saga_reason`` and ``saga_reason_code`` (as ``pivotal.views.agent_view`` tells an
agent why: never the policy, a person's name or words, nor a step's error).
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.agents import BaseAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from pydantic import ConfigDict, Field

from pivotal.errors import PivotalError
from pivotal.sagas.state import SagaState, StepRecord, StepStatus, UndoStatus
from pivotal.views import agent_view
from pivotal.views.agent_view import Told

SAGA_ID = "pivotal_saga_id"
SAGA_STATUS = "saga_status"
SAGA_REASON = "saga_reason"
SAGA_REASON_CODE = "saga_reason_code"
SAGA_ABORT = "saga_abort"
APPROVAL = "saga_approval"
COMP_PREFIX = "comp:"
DECIDED_PREFIX = "decided:"
PROCEED = "proceed"  # the ``decided:<stage>`` value of a verdict that lets the saga go on
SKIPPED = "skipped: "  # how a ``decided:<stage>`` note of a verdict never given begins

FINAL_STATUSES = frozenset(
    {
        "completed",
        "compensated",
        "compensation_failed",
        "needs_human",
        "resolved",
        "rejected",
        "refused",  # the catalogue's rollout refused the plan: no saga
        "shadowed",  # the rollout kept the plan in shadow for a person: no saga
    }
)
"""Session statuses after which a new invocation starts a new saga."""

State = Mapping[str, Any]


class StageError(PivotalError):
    """A saga agent's stages are misconfigured, or a stage's user code failed."""

    code = "adk_stage_invalid"


@dataclass(frozen=True)
class Act:
    """An acting stage: the catalogue step ``step``, with arguments built from the session
    state by ``args`` (a deterministic function, called once, when the plan is built)."""

    step: str
    args: Callable[[State], Mapping[str, Any]]
    name: str | None = None  # the stage's name in ``comp:<name>`` (default: the step)

    @property
    def stage(self) -> str:
        return self.name or self.step

    def agent(self) -> ActAgent:
        """This stage as an ADK agent, to be a sub-agent of a ``ParallelAgent`` inside a
        saga agent (its name is the stage's)."""
        return ActAgent(name=self.stage, act=self)


class ActAgent(BaseAgent):
    """An acting stage in an ADK agent tree. It does nothing by itself: the saga agent it
    sits in has Pivotal's engine run its step. Run anywhere else, it refuses."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    act: Act = Field(exclude=True)

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        raise StageError(
            f"the acting stage {self.name} runs only inside a SagaAgent, which has Pivotal "
            "run its step durably"
        )
        yield  # pragma: no cover - an async generator that never yields


@dataclass(frozen=True, init=False)
class Parallel:
    """Acting stages run concurrently: one parallel group of the plan. Each member's undo
    may run in any order relative to the others', and after every later stage's and before
    every earlier stage's. The same as an ADK ``ParallelAgent`` of ``Act(...).agent()``
    sub-agents, without that class's deprecation in google-adk 2."""

    name: str
    acts: tuple[Act, ...]

    def __init__(self, name: str, acts: Sequence[Act]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "acts", tuple(acts))

    @property
    def stage(self) -> str:
        return self.name


DECIDE_TIMEOUT = 60.0
"""How long a model stage may take, in seconds, unless its agent or the stage says: about
what a person waits for a model's answer before giving up on it. While a model decides, the
agent holds the saga's lease and the exposure the plan reserves; a silent model gives both
back within this bound (its silence rolls the saga back). A stage whose model is known to
think longer (a reasoning model, a chain of tool calls) sets its own ``timeout``."""


def check_timeout(timeout: float, what: str) -> float:
    """``timeout`` when it is a number of seconds above 0 (and finite), else ``StageError``."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout < math.inf
    ):
        raise StageError(f"the timeout of {what} must be a number of seconds above 0: {timeout!r}")
    return float(timeout)


@dataclass(frozen=True)
class Decide:
    """A model stage: ``agent`` (an ``LlmAgent``) writes its verdict through its
    ``output_key``; then ``abort_if`` (deterministic, given the session state) returns the
    reason to roll back, or None. A stage may also set ``saga_abort`` itself (from a
    callback, through its state delta): a truthy value is the reason to roll back.

    The stage is bounded: a model that gives no verdict within ``timeout`` seconds (None:
    the saga agent's ``decide_timeout``) is stopped, and its silence rolls back, like a
    failing model stage: the saga agent holds the saga's lease while a model decides,
    and must not hold it for ever."""

    agent: BaseAgent
    abort_if: Callable[[State], str | None] | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None:
            check_timeout(self.timeout, f"model stage {self.stage}")

    @property
    def stage(self) -> str:
        return self.agent.name


Stage = Act | Decide | Parallel


def acts_of(units: Sequence[Stage]) -> list[Act]:
    """Every acting stage in plan order (a parallel group's members in theirs): the n-th
    is the plan's step n."""
    out: list[Act] = []
    for s in units:
        if isinstance(s, Act):
            out.append(s)
        elif isinstance(s, Parallel):
            out.extend(s.acts)
    return out


def leading_of(units: Sequence[Stage]) -> list[Decide]:
    """Model stages before the first acting stage: they may shape the plan."""
    out = []
    for s in units:
        if not isinstance(s, Decide):
            break
        out.append(s)
    return out


def gates_of(units: Sequence[Stage]) -> list[tuple[int, Decide]]:
    """Model stages after the first act, each with the plan index it must precede."""
    out: list[tuple[int, Decide]] = []
    acts = 0
    for s in units:
        if isinstance(s, Act):
            acts += 1
        elif isinstance(s, Parallel):
            acts += len(s.acts)
        elif acts:
            out.append((acts, s))
    return out


def abort_reason(stage: Decide, state: State) -> str | None:
    """Why the verdict rolls the saga back, or None; a failing check rolls back too."""
    flagged = state.get(SAGA_ABORT)
    if flagged:
        return str(flagged) if not isinstance(flagged, bool) else f"{stage.stage} set saga_abort"
    if stage.abort_if is None:
        return None
    try:
        reason = stage.abort_if(state)
    except Exception as exc:
        return f"the check after {stage.stage} failed ({type(exc).__name__}: {exc})"
    return str(reason) if reason else None


def veto_of(decided: Any) -> str | None:
    """The reason to roll back that a ``decided:<stage>`` value holds, or None: the stage
    has not decided, let the saga go on, or was skipped (the saga went past it)."""
    if not decided or decided == PROCEED:
        return None
    text = str(decided)
    return None if text.startswith(SKIPPED) else text


def comp_record(rec: StepRecord, saga_id: str) -> dict[str, Any]:
    """What the session shows about a compensable step that may have taken effect."""
    return {
        "step": rec.name,
        "index": rec.index,
        "key": f"{saga_id}:{rec.index}",
        "undo_key": f"{saga_id}:{rec.index}:undo",
        "result": rec.result,
        "undo": rec.undo_status.value,
    }


_MAY_HAVE_EFFECT = (StepStatus.SUCCEEDED, StepStatus.UNKNOWN)


def own_stops(units: Sequence[Stage]) -> Callable[[str], bool]:
    """Whether a saga was stopped by one of these model stages (``adk:<stage>``, as the
    agent writes its verdicts): the agent may read its own words back."""
    mine = frozenset(f"adk:{u.stage}" for u in units if isinstance(u, Decide))
    return mine.__contains__


def told(state: SagaState, units: Sequence[Stage]) -> Told | None:
    """Why the saga stands where it does, as an agent is told it (``pivotal.views.agent_view``):
    never a step's error, who decided or why, unless the agent's own model stage did."""
    return agent_view.told(state, own=own_stops(units))


def view_delta(
    state: SagaState, stage_of: Mapping[int, str], session: State, units: Sequence[Stage] = ()
) -> dict[str, Any]:
    """The state delta that brings the session's view up to the ledger's ``state``: a
    ``comp:<stage>`` record per compensable step that took (or may have taken) effect, its
    undo status once compensation ran, and the saga's status and reason as an agent is told
    them (``saga_reason``, ``saga_reason_code``: ``told``)."""
    delta: dict[str, Any] = {}
    for rec in state.steps:
        if rec.kind != "compensable" or rec.index not in stage_of:
            continue
        if rec.status not in _MAY_HAVE_EFFECT and rec.undo_status is UndoStatus.NONE:
            continue
        key = COMP_PREFIX + stage_of[rec.index]
        record = comp_record(rec, state.saga_id)
        if session.get(key) != record:
            delta[key] = record
    status = state.status.value
    if session.get(SAGA_STATUS) != status:
        delta[SAGA_STATUS] = status
    why = told(state, units)
    reason, code = (None, None) if why is None else (why.message, why.code.value)
    if session.get(SAGA_REASON) != reason:
        delta[SAGA_REASON] = reason
    if session.get(SAGA_REASON_CODE) != code:
        delta[SAGA_REASON_CODE] = code
    return delta
