"""``SagaAgent``: an ADK agent that runs its stages as one durable Pivotal saga.

Acting stages are catalogue steps run by Pivotal's engine (intent before effect, keys
``{saga_id}:{index}``, retries and timeouts by the step's policy). Model stages only decide.
The ledger is the truth; the session state is a view of it written through event state
deltas, never by mutating the session.

The plan rule: every acting stage's arguments are built, and the whole plan is validated and
submitted, when the first acting stage is reached. Model stages before it may therefore
shape the plan (an ``LlmAgent`` writing the order through ``output_key``); model stages after
it only give verdicts, which the agent turns into a rollback (``Orchestrator.abort``) or lets
the saga go on. Nothing takes effect before the whole plan validates.

A parallel stage (``Parallel``, or an ADK ``ParallelAgent`` of ``Act(...).agent()``
sub-agents) is one parallel group of the plan: its members run concurrently, each durable
like any step, and compensation undoes them in either order, after every later stage and
before every earlier one (``pivotal.adk.shape`` says what a group may not hold, and why).

A verdict is never lost between the session and the ledger. One given before the first act
is recorded with the submission itself (``Orchestrator.submit_aborted``: the saga is created
compensating), so neither a crash nor a worker claiming the new saga can run it. Without
one, the saga is created leased to the agent (``Orchestrator.submit_leased``), so no worker
claims it while a later model stage has yet to decide. One given later is written under the
agent's lease and retried on a version conflict; and a verdict the session holds that the
ledger does not (the process died in between) is written by the next invocation, for as
long as the saga can still be rolled back.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from google.adk.agents import BaseAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from pydantic import ConfigDict, Field, PrivateAttr

from pivotal.adk import stages as S
from pivotal.adk.drive import AgentDrive
from pivotal.adk.invocation import Invocation
from pivotal.adk.shape import stage_of
from pivotal.adk.stages import Act, Decide, Parallel, Stage, StageError
from pivotal.declarations.plan import ActorType, ParallelGroup, Plan, Provenance, StepCall
from pivotal.engine import describe
from pivotal.errors import PlanRejected, RolloutRefused, RolloutShadowed
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.sagas.lease import Lease
from pivotal.sagas.state import SagaState


def _call(act: Act, state: Mapping[str, Any]) -> StepCall:
    try:
        args = dict(act.args(state))
    except Exception as exc:
        raise StageError(
            f"the arguments of stage {act.stage} could not be built: {describe(exc)}"
        ) from exc
    return StepCall(name=act.step, args=args)


def saga_id_for(session_id: str, invocation_id: str) -> str:
    """The saga id of an ADK invocation: a digest of the session and invocation ids (the
    step keys ``{saga_id}:{index}`` follow from it)."""
    digest = hashlib.sha256(f"{session_id}\x00{invocation_id}".encode()).hexdigest()
    return f"adk-{digest[:24]}"


class SagaAgent(BaseAgent):
    """Runs ``stages`` in order as one Pivotal saga of the catalogue ``catalogue``; the
    members of a parallel stage run concurrently, as one parallel group.

    On a failure, or a verdict that rolls back, before the point of no return the engine
    compensates newest first; ``saga_status`` (``completed``, ``compensated``,
    ``compensation_failed``, ``needs_human``) and ``saga_reason`` end in the session state,
    with a ``comp:<stage>`` record for every step that took effect. At the approval gate the
    invocation ends with ``saga_status: awaiting_approval``; once a person decided (CLI or
    API), running the agent again in the same session continues the same saga. If the
    process dies, a Pivotal worker or a new invocation in the session finishes it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    orchestrator: Orchestrator = Field(exclude=True)
    catalogue: str
    stages: list[Any] = Field(default_factory=list, exclude=True)
    rationale: str = ""
    # seconds a model stage may take, unless it sets its own ``timeout``: its silence
    # then rolls back (the agent holds the saga's lease while a model decides)
    decide_timeout: float = Field(default=S.DECIDE_TIMEOUT, strict=True)

    _units: list[Stage] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any, /) -> None:
        catalogue = self.orchestrator.app.catalogue(self.catalogue)  # unknown: fail now
        self.decide_timeout = S.check_timeout(self.decide_timeout, f"the agent {self.name}")
        self._units = [stage_of(s, catalogue) for s in self.stages]
        if not self.acts:
            raise StageError("a saga agent needs at least one Act stage")
        names = [s.stage for s in self._units]
        names += [a.stage for s in self._units if isinstance(s, Parallel) for a in s.acts]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise StageError(f"stage names must be unique: {', '.join(twice)}")
        # the ADK tree: model stages, and ADK parallel agents (never run as such: the
        # engine runs their members as one parallel group)
        self.sub_agents = [
            s.agent if isinstance(s, Decide) else s
            for s in self.stages
            if isinstance(s, Decide | BaseAgent)
        ]
        super().model_post_init(context)

    # -- the stages ---------------------------------------------------------------------

    @property
    def units(self) -> list[Stage]:
        """The stages as the plan sees them: ``Act``, ``Decide`` and ``Parallel``."""
        return list(self._units)

    @property
    def acts(self) -> list[Act]:
        """Every acting stage in plan order (a parallel group's members in theirs): the
        n-th is the plan's step n."""
        return S.acts_of(self._units)

    def leading(self) -> list[Decide]:
        """Model stages before the first acting stage: they may shape the plan."""
        return S.leading_of(self._units)

    def gates(self) -> list[tuple[int, Decide]]:
        """Model stages after the first act, each with the plan index it must precede."""
        return S.gates_of(self._units)

    def plan(self, state: Mapping[str, Any], session_id: str) -> Plan:
        """The acting stages as one plan, arguments built from ``state``; a parallel stage
        is a parallel group."""
        steps: list[StepCall | ParallelGroup] = []
        for s in self._units:
            if isinstance(s, Act):
                steps.append(_call(s, state))
            elif isinstance(s, Parallel):
                steps.append(ParallelGroup(parallel=[_call(a, state) for a in s.acts]))
        provenance = Provenance(
            actor_type=ActorType.AGENT, actor_id=f"adk:{self.name}", source_document_id=session_id
        )
        return Plan(
            catalogue=self.catalogue,
            steps=steps,
            rationale=self.rationale,
            provenance=provenance,
        )

    # -- the run ------------------------------------------------------------------------

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        invocation = Invocation(
            self.orchestrator, self.name, ctx, tuple(self._units), self.decide_timeout
        )
        state = ctx.session.state
        saga_id = state.get(S.SAGA_ID)
        if not isinstance(saga_id, str) or state.get(S.SAGA_STATUS) in S.FINAL_STATUSES:
            saga_id = saga_id_for(ctx.session.id, ctx.invocation_id)
            stale = [k for k in state if k.startswith((S.COMP_PREFIX, S.DECIDED_PREFIX))]
            fresh: dict[str, Any] = dict.fromkeys(stale)
            fresh |= {
                S.SAGA_ID: saga_id,
                S.SAGA_STATUS: "planning",
                S.SAGA_REASON: None,
                S.SAGA_REASON_CODE: None,
                S.SAGA_ABORT: None,
                S.APPROVAL: None,
            }
            yield invocation.event(fresh)
        lease: Lease | None = None
        first: Event | None = None
        if await self.orchestrator.store.load(saga_id) is None:
            async for event in self._leading(invocation):
                yield event
            try:
                submitted, lease = await self._submit(ctx, saga_id)
            except (PlanRejected, StageError) as exc:
                rejected = {  # the validator's errors are the planner's to read
                    S.SAGA_STATUS: "rejected",
                    S.SAGA_REASON: str(exc),
                    S.SAGA_REASON_CODE: exc.code,
                }
                yield invocation.event(rejected, f"not started: {exc}")
                return
            except (RolloutRefused, RolloutShadowed) as exc:  # held back: a person decides
                status = "shadowed" if isinstance(exc, RolloutShadowed) else "refused"
                held = {S.SAGA_STATUS: status, S.SAGA_REASON: str(exc)}
                yield invocation.event(held, f"not started: {exc}")
                return
            # told once the lease is held: nothing may come between its creation and that
            first = invocation.event({S.SAGA_STATUS: submitted.status.value})
        driver = AgentDrive(invocation, saga_id)
        async for event in driver.run(lease, first):
            yield event

    async def _leading(self, invocation: Invocation) -> AsyncGenerator[Event, None]:
        """Run the model stages before the first act, up to the first that rolls back."""
        for stage in self.leading():
            decided = S.DECIDED_PREFIX + stage.stage
            if invocation.ctx.session.state.get(decided) is None:  # None: cleared for a new saga
                async for event in invocation.decide(stage):
                    yield event
            if S.veto_of(invocation.ctx.session.state.get(decided)) is not None:
                return

    async def _submit(self, ctx: InvocationContext, saga_id: str) -> tuple[SagaState, Lease | None]:
        """Submit the whole plan once the model stages before the first act decided.

        When one of them rolled back, the saga is created aborted, in the same transaction:
        at no moment can anything run it. Otherwise it is created leased to this process,
        so no worker can claim it, and run a step past a model stage that has yet to
        decide, before this invocation's lease ends or lapses; the lease (None when the
        saga is not this process's) is for the caller to hold."""
        verdict: tuple[str, str] | None = None  # (stage, reason) of a rollback
        for stage in self.leading():
            reason = S.veto_of(ctx.session.state.get(S.DECIDED_PREFIX + stage.stage))
            if reason is not None:
                verdict = (stage.stage, reason)
                break
        plan = self.plan(ctx.session.state, ctx.session.id)
        if verdict is None:
            return await self.orchestrator.submit_leased(plan, saga_id=saga_id)
        by, reason = verdict
        aborted = await self.orchestrator.submit_aborted(
            plan, saga_id=saga_id, by=f"adk:{by}", reason=reason
        )
        return aborted, None


__all__ = ["SagaAgent", "Stage", "saga_id_for"]
