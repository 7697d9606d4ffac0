"""Drives a saga agent's saga in passes under one lease, pausing for its model stages.

Each pass runs until a forward step reached its outcome (so the session sees every outcome
as it happens), until the next model stage must decide, or until the saga ends or waits for
a person. The lease is held for the whole invocation, model stages included, so that no
worker runs the saga past a verdict that is still being given (from the saga's creation,
when the invocation created it). Each model stage is bounded (``Decide.timeout``, else the
agent's ``decide_timeout``): a silent model rolls back, and never keeps the lease for ever.
Every pass checks the lease before each intent and each call, as ``Orchestrator.execute``
does: a process paused past its lease calls nothing once it is continued.

A verdict that rolls back is written to the ledger before anything else is done: a write
that meets a version conflict (a decision recorded meanwhile) is tried again, reloaded and
checked again, a few times; if it still cannot be written the invocation stops, never
driving the saga past it. A verdict the session holds and the ledger does not (the process
died between the two) is written the same way by the next invocation.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable

from google.adk.events import Event

from pivotal.adk import stages as S
from pivotal.adk.invocation import Invocation
from pivotal.adk.stages import Decide
from pivotal.engine import RunOptions, describe
from pivotal.errors import InvalidInput, LeaseLost, VersionConflict
from pivotal.hooks import Point
from pivotal.sagas.lease import Lease
from pivotal.sagas.state import SagaState, SagaStatus, StepStatus
from pivotal.views.agent_view import WAITING

_FORWARD = (SagaStatus.SUBMITTED, SagaStatus.RUNNING)
_ROLLING_BACK = (
    SagaStatus.COMPENSATING,
    SagaStatus.COMPENSATED,
    SagaStatus.COMPENSATION_FAILED,
)
VETO_TRIES = 5  # writes of one verdict, each after reloading, before the invocation stops


class _Stop:
    """The hook and the stop test of one pass: stop after any forward step's effect, and
    never begin a step at or past ``boundary`` (a model stage decides first)."""

    def __init__(self, invocation: Invocation, boundary: int | None) -> None:
        self.outer = invocation.orchestrator.hook
        self.boundary = boundary
        self.reached = False

    def hook(self, point: Point, index: int) -> Awaitable[None] | None:
        if point is Point.AFTER_EFFECT:
            self.reached = True
        # a hook that pauses the process returns what to await: the pass awaits it
        return None if self.outer is None else self.outer(point, index)

    def pause_before(self, index: int) -> bool:
        return self.boundary is not None and index >= self.boundary

    def should_stop(self) -> bool:
        return self.reached


class AgentDrive:
    """One invocation's drive of one saga: engine passes (``Driver``) between model stages."""

    def __init__(self, invocation: Invocation, saga_id: str) -> None:
        self.invocation = invocation
        self.orch = invocation.orchestrator
        self.ctx = invocation.ctx
        self.saga_id = saga_id
        self.stage_of = {n: act.stage for n, act in enumerate(invocation.acts)}

    def _view(self, state: SagaState, text: str = "") -> Event | None:
        units = self.invocation.units
        delta = S.view_delta(state, self.stage_of, self.ctx.session.state, units)
        if state.status is SagaStatus.AWAITING_APPROVAL and state.approval is not None:
            a = state.approval  # why a person decides, and who, is theirs (``agent_view``)
            approval = {
                "step": state.steps[a.step].name,
                "reason": WAITING,
                "expires_at": a.expires_at,
            }
            if self.ctx.session.state.get(S.APPROVAL) != approval:
                delta[S.APPROVAL] = approval
        if not delta and not text:
            return None
        return self.invocation.event(delta, text)

    def _pending_gate(self, state: SagaState) -> tuple[int, Decide] | None:
        """The next model stage that has not decided, with the step it must precede."""
        if state.status not in _FORWARD:
            return None
        for boundary, stage in self.invocation.gates():
            if self.ctx.session.state.get(S.DECIDED_PREFIX + stage.stage) is None:
                return boundary, stage
        return None

    def _skipped(self, state: SagaState) -> list[Event]:
        """Model stages the saga went past without their verdict (a worker recovered it
        while the agent was down): the ledger is the truth, and the session says so."""
        out = []
        for boundary, stage in self.invocation.gates():
            key = S.DECIDED_PREFIX + stage.stage
            if self.ctx.session.state.get(key) is None and _begun(state, boundary):
                note = f"{S.SKIPPED}the saga passed step {boundary} before {stage.stage} decided"
                out.append(self.invocation.event({key: note}, note))
        return out

    async def run(
        self, lease: Lease | None = None, first: Event | None = None
    ) -> AsyncGenerator[Event, None]:
        """Drive the saga under ``lease`` (one taken with its creation), or under one taken
        now; ``first`` is told once it is held."""
        held = self.orch.lease(self.saga_id) if lease is None else self.orch.leases.holding(lease)
        try:
            async with held as lease:
                if first is not None:
                    yield first
                async for event in self._loop(lease):
                    yield event
        except LeaseLost as exc:
            state = (await self.orch.get(self.saga_id)).state
            reason = f"{exc}: it goes on there; run the agent again to see its outcome"
            yield self.invocation.event(
                {S.SAGA_STATUS: state.status.value, S.SAGA_REASON: reason}, reason
            )

    async def _loop(self, lease: Lease) -> AsyncGenerator[Event, None]:
        written: set[str] = set()  # model stages whose veto this invocation tried to write
        while True:
            state = (await self.orch.get(self.saga_id)).state
            if state.status.terminal or state.status is SagaStatus.AWAITING_APPROVAL:
                for note in self._skipped(state):
                    yield note
                told = S.told(state, self.invocation.units)
                said = None if told is None else told.message
                text = final_text(self.saga_id, state.status.value, said)
                event = self._view(state, text)
                if event is not None:
                    yield event
                return
            event = self._view(state)
            if event is not None:
                yield event
            skipped = self._skipped(state)
            if skipped:
                for note in skipped:
                    yield note
                continue
            veto = self._pending_veto(state, written)
            if veto is not None:  # before anything else: the ledger must hold it first
                written.add(veto[0])
                why, halt = await self._veto(lease, *veto)
                if why is not None:
                    yield self.invocation.event({S.SAGA_REASON: why}, why)
                if halt:
                    return
                continue
            gate = self._pending_gate(state)
            if gate is not None and _reached(state, gate[0]):
                async for event in self.invocation.decide(gate[1]):
                    yield event
                continue
            stop = _Stop(self.invocation, gate[0] if gate else None)
            options = self.orch.leased(  # the lease checked before every call
                lease,
                RunOptions(
                    owner=self.orch.owner,
                    hook=stop.hook,
                    should_stop=stop.should_stop,
                    pause_before=stop.pause_before,
                ),
                release=True,
            )
            after = await self.orch.leases.guard(
                lease, self.orch.drive(self.saga_id, lease.epoch, options)
            )
            if after.version == state.version and not after.status.terminal:
                reason = f"saga {self.saga_id} made no progress in this pass; a worker goes on"
                yield self.invocation.event({S.SAGA_REASON: reason}, reason)
                return

    def _pending_veto(self, state: SagaState, written: set[str]) -> tuple[str, str] | None:
        """The first model stage whose verdict rolls back while the ledger's saga still goes
        forward (the verdict was just given, or its write was lost to a crash or to a
        conflict), with its reason; none already tried in this invocation."""
        if state.status not in _FORWARD:
            return None
        for stage in self.invocation.units:
            if isinstance(stage, Decide) and stage.stage not in written:
                reason = S.veto_of(self.ctx.session.state.get(S.DECIDED_PREFIX + stage.stage))
                if reason is not None:
                    return stage.stage, reason
        return None

    async def _veto(self, lease: Lease, stage: str, reason: str) -> tuple[str | None, bool]:
        """Write the verdict of ``stage`` to the ledger under ``lease``: (a note when it was
        not written, whether the invocation must stop). ``Orchestrator.abort`` reads the
        saga, checks it can still be rolled back and writes, fenced by its version; a
        conflict (a decision recorded meanwhile) is met by doing all three again, at most
        ``VETO_TRIES`` times, and then by stopping without driving the saga past it."""
        for _ in range(VETO_TRIES):
            if lease.lost:
                raise LeaseLost(f"lease on saga {self.saga_id} was taken over")
            try:
                await self.orch.abort(self.saga_id, f"adk:{stage}", reason)
                return None, False
            except VersionConflict:
                continue
            except InvalidInput as exc:
                state = (await self.orch.get(self.saga_id)).state
                if state.status in _ROLLING_BACK:  # rolled back meanwhile: nothing to add
                    return None, False
                # it moved past the point of no return meanwhile
                return f"the verdict of {stage} came too late: {describe(exc)}", False
        note = (
            f"the verdict of {stage} could not be recorded: saga {self.saga_id} changed "
            f"under it {VETO_TRIES} times in a row; it is not driven past the verdict, and "
            "the next run of the agent in this session writes it"
        )
        return note, True


def _begun(state: SagaState, boundary: int) -> bool:
    """Whether a step at or after ``boundary`` has begun."""
    return any(r.status is not StepStatus.PENDING for r in state.steps[boundary:])


def _reached(state: SagaState, boundary: int) -> bool:
    """Every step before ``boundary`` took effect."""
    return all(r.status is StepStatus.SUCCEEDED for r in state.steps[:boundary])


def final_text(saga_id: str, status: str, reason: str | None) -> str:
    """The text of the event that ends an invocation."""
    return f"saga {saga_id} {status}" + (f": {reason}" if reason else "")
