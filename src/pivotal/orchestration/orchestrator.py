"""The orchestrator: submit validated plans, run sagas, take a person's acts.

``Orchestrator`` is built in floors, a module each (``pivotal.orchestration``): running a
saga under its lease, recording new ones through admission, dead letters, a person's
decisions before the point of no return; and here, what a person does with a saga at rest
or parked: resume it, settle it by hand, re-run or fork it."""

from __future__ import annotations

from typing import Any

from pivotal.clock import synced
from pivotal.declarations.catalogue import StepKind
from pivotal.engine import by_hand
from pivotal.engine.resuming import ResumeFromRefused, resume_from, step_named
from pivotal.errors import InvalidInput, SagaConflict, SagaNotFound, SagaNotParked, VersionConflict
from pivotal.orchestration.decisions import Decisions
from pivotal.orchestration.fork import Edit, fork_id, fork_plan
from pivotal.orchestration.letters import LettersDue
from pivotal.orchestration.rerun import rerun_id, rerun_plan
from pivotal.people.principals import names_someone
from pivotal.sagas import saga_ids
from pivotal.sagas.state import Event, EventType, SagaState, SagaStatus, StepStatus, replay
from pivotal.store.base import StoredSaga

__all__ = ["LettersDue", "Orchestrator"]


class Orchestrator(Decisions):
    """Executes validated plans durably against a ledger.

    ``run`` executes a saga in this process until it ends or waits for a person; workers
    use the same engine.
    """

    # -- sagas parked for a person -----------------------------------------------------

    async def resume(
        self,
        saga_id: str,
        by: str,
        reason: str,
        *,
        run: bool = False,
        from_step: str | None = None,
    ) -> SagaState:
        """A person fixed what parked a ``needs_human`` saga: it goes on from where it
        stopped, with the same idempotency keys. Steps that failed or stayed in doubt past
        the point of no return are tried again with a fresh retry budget; a poison saga goes
        back to what it was doing. With ``run`` it goes on in this process, else a worker
        picks it up.

        With ``from_step`` (an index from 0, or a step's name) the person declares that the
        steps before it that had not succeeded were settled outside, by them: those are
        recorded settled (in the ``saga_resumed`` event: ``settled``, ``from``), and the
        saga goes on at that step. The saga machine decides what may be
        (``engine.resuming``): ``ResumeFromRefused``, with every reason and nothing
        recorded, when a step in doubt would be called again, a step that may still land or
        one before the point of no return would be settled by hand, the point of no return
        would be passed without running, or the saga was compensating."""
        await synced(self.clock)  # times below are the ledger's
        stored = await self._parked(saga_id, by, reason)
        events = await self.store.events(saga_id)
        last = max(n for n, e in enumerate(events) if e.type is EventType.SAGA_NEEDS_HUMAN)
        before = replay(events[:last])
        again = []
        if before.status is not SagaStatus.COMPENSATING:
            again = [
                r.index
                for r in before.steps
                if r.kind != StepKind.COMPENSABLE.value
                and r.status in (StepStatus.FAILED, StepStatus.UNKNOWN)
            ]
        handed: dict[str, Any] = {}  # resumed from a step: where, and what was settled
        if from_step is not None:
            start = step_named(before, from_step)
            found = resume_from(before, start, self.clock.now())
            if found.refused:
                raise ResumeFromRefused(
                    f"saga {saga_id} does not go on from {before.steps[start].name} (step "
                    f"{start}): {'; '.join(found.refused)}; nothing was recorded"
                )
            again = [i for i in again if i >= start]
            handed = {"from": start, "settled": list(found.settled)}
        saga_run = self._pass(stored, None)
        await saga_run.emit(
            saga_run.event(
                EventType.SAGA_RESUMED,
                by=by,
                why=reason,
                status=before.status.value,
                saga_reason=before.reason,
                **handed,
                steps=again,
                # their attempts may have taken effect: a fresh budget proves nothing
                doubted=[i for i in again if before.steps[i].status is StepStatus.UNKNOWN],
                # and a call that may still be running is not called again before its
                # window ends, however soon the person resumed
                running=[i for i in again if _may_be_running(events[:last], i)],
            )
        )
        if not run:
            return saga_run.state
        return await self.run(saga_id)

    async def resolve(self, saga_id: str, by: str, reason: str) -> SagaState:
        """A person settled a ``needs_human`` saga outside Pivotal: it ends ``resolved``,
        with who and why in its event log. Refused (``MayStillLand``, nothing recorded)
        while an attempt of any of its steps, or of an undo, may still land: what it made
        after the person's word would be made twice."""
        await synced(self.clock)  # times below are the ledger's
        stored = await self._parked(saga_id, by, reason)
        steps = range(len(stored.state.steps))
        by_hand.check(stored.state, steps, self.clock.now(), "the parked saga")
        saga_run = self._pass(stored, None)
        await saga_run.emit(
            saga_run.event(
                EventType.SAGA_RESOLVED, by=by, why=reason, reason=f"resolved by {by}: {reason}"
            )
        )
        return saga_run.state

    async def _parked(self, saga_id: str, by: str, reason: str) -> StoredSaga:
        if not names_someone(by) or not reason.strip():
            raise InvalidInput("a decision on a parked saga needs who decided and why")
        stored = await self.get(saga_id)
        if stored.state.status is not SagaStatus.NEEDS_HUMAN:
            raise SagaNotParked(f"saga {saga_id} is {stored.state.status.value}, not needs_human")
        return stored

    # -- audit --------------------------------------------------------------------------

    async def replayed(self, saga_id: str) -> SagaState:
        """The saga's state rebuilt from its event log alone."""
        events = await self.store.events(saga_id)
        if not events:
            raise SagaNotFound(saga_ids.missing(saga_id))
        return replay(events)

    # -- run a compensated plan again ---------------------------------------------------

    async def rerun(self, saga_id: str, by: str, reason: str = "") -> SagaState:
        """Submit the plan of a saga that ended ``compensated`` again, as a new saga whose
        provenance points back to it (``rerun_of``, with who asked and, when given, why):
        through ``submit``, so
        validation against fresh facts, the rollout and the approval policy apply again.
        Nothing runs here (a worker picks it up). One rerun per saga: asking again returns
        it (``rerun.rerun_id``). ``SagaNotRerunnable`` with ``rerun.refusal``'s reason
        while anything of the first saga stayed in place or may still land."""
        if not names_someone(by):
            raise InvalidInput("rerunning a saga needs who asked for it")
        await synced(self.clock)  # times below are the ledger's
        plan = rerun_plan(await self.get(saga_id), by, self.clock.now(), reason)
        again = rerun_id(saga_id)
        found = await self.store.load(again)
        if found is not None:
            return found.state
        try:
            return await self.submit(plan, saga_id=again)
        except SagaConflict:  # another person's rerun was recorded meanwhile
            return (await self.get(again)).state

    # -- fork a finished saga with arguments changed --------------------------------------

    async def fork(self, saga_id: str, edits: list[Edit], by: str, reason: str) -> SagaState:
        """Submit the plan of a finished saga with ``edits`` applied, as a new saga whose
        provenance points back to it (``forked_from``: who, why, each argument changed),
        and note on the first saga that it was forked into it (``saga_forked``): through
        ``submit``, so validation against today's facts, the rollout and the approval
        policy apply again, and four-eyes counts the one who forked it. Nothing runs here.
        The same request again (same saga, edits and person) returns the same fork
        (``fork.fork_id``); other edits make another. ``SagaNotForkable`` with
        ``fork.refusal``'s reason, ``PlanRejected`` for edits that do not validate;
        nothing is recorded then."""
        if not names_someone(by) or not reason.strip():
            raise InvalidInput("forking a saga needs who asked for it and why")
        await synced(self.clock)  # times below are the ledger's
        stored = await self.get(saga_id)
        catalogue = self.app.catalogue(stored.state.catalogue)
        plan = fork_plan(stored, edits, by, reason, catalogue, self.clock.now())
        assert plan.provenance.forked_from is not None
        new = fork_id(saga_id, list(plan.provenance.forked_from.changes), by)
        found = await self.store.load(new)
        if found is None:
            try:
                state = await self.submit(plan, saga_id=new)
            except SagaConflict:  # the same request, recorded meanwhile
                state = (await self.get(new)).state
        else:
            state = found.state
        await self._note_fork(saga_id, new)
        return state

    async def _note_fork(self, saga_id: str, new: str) -> None:
        """``saga_forked`` on ``saga_id``, naming the fork ``new`` with who forked it, why and
        what changed as its provenance records them, unless noted already (a retry after a
        crash between the two writes notes it then)."""
        fork = (await self.get(new)).plan.provenance.forked_from
        if fork is None:  # pragma: no cover - a fork's id names only forks
            raise SagaConflict(f"saga {new} is not a fork of saga {saga_id}")
        changes = [c.model_dump(mode="json") for c in fork.changes]

        def noted(e: Event) -> bool:
            return e.type is EventType.SAGA_FORKED and e.data.get("fork") == new

        data: dict[str, Any] = {"fork": new, "by": fork.by, "why": fork.reason, "changes": changes}
        if not await self._note(saga_id, EventType.SAGA_FORKED, data, noted):
            # the fork is made; the same request again notes it (``noted`` above)
            raise VersionConflict(f"saga {saga_id} kept changing: its fork is not noted yet")


def _may_be_running(events: list[Event], index: int) -> bool:
    """Whether the last call of step ``index`` may still be running: the event that recorded
    its end says so (``running``); one that does not say is taken to (an older ledger)."""
    for e in reversed(events):
        if e.step != index:
            continue
        if e.type in (EventType.STEP_UNKNOWN, EventType.STEP_RETRY_SCHEDULED):
            return bool(e.data.get("running", True))
        if e.type in (EventType.STEP_FAILED, EventType.STEP_SUCCEEDED):
            return False
        if e.type is EventType.STEP_STARTED:
            return True  # interrupted mid-call
    return False
