"""A person's decisions before the point of no return: approve or reject a pivot that
waits for approval, abort a saga."""

from __future__ import annotations

from dataclasses import replace

from pivotal.admission.validation import Recheck, recheck_bounded
from pivotal.clock import synced
from pivotal.declarations.holds import expiry_cause
from pivotal.engine import point_of_no_return
from pivotal.errors import (
    ApprovalError,
    InvalidInput,
    LeaseLost,
    PivotalError,
    SagaUnserved,
    StaleApproval,
    VersionConflict,
)
from pivotal.orchestration import four_eyes
from pivotal.orchestration.letters import Letters
from pivotal.people.principals import names_someone
from pivotal.sagas.state import (
    ApprovalStatus,
    Event,
    EventType,
    SagaState,
    SagaStatus,
    StepStatus,
)
from pivotal.store.base import StoredSaga


class Decisions(Letters):
    """Approvals and aborts."""

    # -- approvals ----------------------------------------------------------------------

    async def approve(
        self,
        saga_id: str,
        approver: str,
        note: str = "",
        *,
        run: bool = True,
        version: int | None = None,
    ) -> SagaState:
        """Grant the pending approval; with ``run`` the saga goes on in this process.

        Four-eyes (``four_eyes.check``, for every surface): the saga's submitter, the person
        it was asked for on behalf of, whoever asked for it to run again (its re-run, or a
        resume) and an approver who approved it already (an approval that needs two
        approvers needs two distinct people) are refused with ``FourEyesError``, people
        compared by their canonical name; nothing is recorded. An
        approval that needs two approvers stays pending after the first. An approval that
        arrives after the request expired is recorded as expired and the saga compensates.
        With ``version`` (the saga version the approver was shown) the decision is refused
        with ``VersionConflict`` if the saga changed since.
        """
        await synced(self.clock)  # times below are the ledger's
        return await self._decide(saga_id, approver, note, approve=True, run=run, version=version)

    async def reject(
        self,
        saga_id: str,
        approver: str,
        note: str = "",
        *,
        run: bool = True,
        version: int | None = None,
    ) -> SagaState:
        """Refuse the pending approval: the saga compensates (``version`` as for approve).
        Not restricted by four-eyes: anyone may say no, which only undoes."""
        await synced(self.clock)  # times below are the ledger's
        return await self._decide(saga_id, approver, note, approve=False, run=run, version=version)

    async def _decide(
        self,
        saga_id: str,
        approver: str,
        note: str,
        *,
        approve: bool,
        run: bool,
        version: int | None = None,
    ) -> SagaState:
        if not names_someone(approver):
            raise InvalidInput("an approval decision needs the approver's name")
        stored = await self.get(saga_id)
        state, approval = stored.state, stored.state.approval
        if version is not None and state.version != version:
            # the commit below is fenced on the version read here: compare-and-set
            raise VersionConflict(
                f"saga {saga_id} is at version {state.version}, not {version}: it changed "
                "since the decision was prepared; reload it and decide again"
            )
        if (
            state.status is not SagaStatus.AWAITING_APPROVAL
            or approval is None
            or approval.status is not ApprovalStatus.PENDING
        ):
            raise ApprovalError(
                four_eyes.already_decided(stored)
                or f"saga {saga_id} is {state.status.value}, not awaiting an approval decision"
            )
        if approve:  # four-eyes, for every surface: here, once (resumes are in the log)
            four_eyes.check(approver, stored, await self.store.events(saga_id))
        saga_run = self._pass(stored, None)
        now = self.clock.now()
        step_name = state.steps[approval.step].name
        if now >= approval.expires_at:
            events = [
                saga_run.event(EventType.APPROVAL_EXPIRED, approval.step),
                saga_run.event(
                    EventType.COMPENSATION_STARTED,
                    reason=f"approval for {step_name} expired before a decision"
                    + expiry_cause(state, self.app.catalogue(state.catalogue)),
                ),
            ]
        elif approve:
            await self._still_holds(stored)
            events = [
                saga_run.event(
                    EventType.APPROVAL_GRANTED, approval.step, approver=approver, note=note
                )
            ]
        else:
            events = [
                saga_run.event(
                    EventType.APPROVAL_REJECTED, approval.step, approver=approver, note=note
                ),
                saga_run.event(
                    EventType.COMPENSATION_STARTED,
                    reason=f"approval for {step_name} rejected by {approver}"
                    + (f": {note}" if note else ""),
                ),
            ]
        try:
            await saga_run.emit(*events)
        except VersionConflict:  # another person decided first, or the saga moved on
            raise await self._lost_race(saga_id) from None
        if not run:
            return saga_run.state
        try:
            return await self.run(saga_id)
        except (LeaseLost, SagaUnserved):  # a worker that serves it goes on (it was notified)
            return saga_run.state

    async def _lost_race(self, saga_id: str) -> PivotalError:
        """What a decision that lost its commit to another writer is told: who decided
        first (``ApprovalError``), or, when the approval is still open, that the saga
        changed meanwhile (``VersionConflict``: reload and decide again)."""
        now = await self.get(saga_id)
        first = four_eyes.already_decided(now, raced=True)
        if first is not None:
            return ApprovalError(first)
        return VersionConflict(
            f"saga {saga_id} changed while this decision was recorded (it is at version "
            f"{now.state.version} now); nothing was recorded: reload it and decide again"
        )

    async def _still_holds(self, stored: StoredSaga) -> None:
        """``StaleApproval`` unless the saga's plan still validates against fresh facts, as
        at submission (an approval of an order that changed since is not an approval of
        this plan); nothing is recorded either way."""
        catalogue = self.app.catalogue(stored.state.catalogue)
        found = await recheck_bounded(stored.plan, catalogue, self.app.facts)
        if found.verdict is Recheck.CHANGED:
            raise StaleApproval(
                f"saga {stored.state.saga_id} cannot be approved: the facts changed since "
                f"the approval was asked, and its plan no longer holds: {found.describe()}"
            )
        if found.verdict is Recheck.CANNOT_TELL:
            raise StaleApproval(
                f"saga {stored.state.saga_id} cannot be approved now: its plan could not be "
                f"re-checked against the trusted facts ({found.describe()}); try again once "
                "they can be read"
            )

    # -- abort before the point of no return --------------------------------------------

    async def abort(
        self, saga_id: str, by: str, reason: str, *, run: bool = False, search: str | None = None
    ) -> SagaState:
        """Turn a verdict (a model's "this order is invalid", an operator's "stop") into a
        rollback: a saga that has not begun its point-of-no-return step (``abort_refusal``)
        starts compensating; with ``run`` it compensates in this process, else a worker (or
        the pass that holds its lease) does. A saga waiting for approval is stopped too:
        its pending approval is closed as refused, with the abort as its note, in the same
        commit (approving stays the approvers', under four-eyes). Refused with
        ``InvalidInput`` otherwise: past the point of no return nothing is undone. The write
        is fenced by version: a pass running meanwhile reloads. ``search``: the query of
        the search that selected it, when one act aborted many (``pivotal.operations.bulk``),
        kept in the event's data."""
        await synced(self.clock)  # times below are the ledger's
        if not names_someone(by) or not reason.strip():
            raise InvalidInput("aborting a saga needs who aborted it and why")
        stored = await self.get(saga_id)
        state = stored.state
        refused = abort_refusal(state)
        if refused is not None:
            raise InvalidInput(f"saga {saga_id} {refused}")
        saga_run = self._pass(stored, None)
        why = f"aborted by {by}: {reason}"
        if state.status is SagaStatus.AWAITING_APPROVAL and state.approval is not None:
            step = state.approval.step
            events = [
                saga_run.event(EventType.APPROVAL_REJECTED, step, approver=by, note=why),
                _chosen(saga_run.event(EventType.COMPENSATION_STARTED, reason=why), search),
            ]
        else:
            events = [_chosen(saga_run.event(EventType.COMPENSATION_STARTED, reason=why), search)]
        await saga_run.emit(*events)
        if not run:
            return saga_run.state
        return await self.run(saga_id)


def _chosen(started: Event, search: str | None) -> Event:
    """The start of an abort's compensation, with the search that selected the saga when
    one act aborted many (``pivotal.operations.bulk``)."""
    if search is None:
        return started
    return replace(started, data={**started.data, "search": search})


_ABORTABLE = (SagaStatus.SUBMITTED, SagaStatus.RUNNING, SagaStatus.AWAITING_APPROVAL)


def abort_refusal(state: SagaState) -> str | None:
    """Why the saga cannot be aborted now (to follow its id in a refusal), or None when it
    can: it is submitted, running or waiting for approval, and has not begun its point of
    no return. The one rule for every surface, and for the buttons a page offers."""
    if state.status not in _ABORTABLE:
        return f"is {state.status.value}: it cannot be aborted"
    pnr = point_of_no_return(state)
    if pnr is not None and state.steps[pnr].status is not StepStatus.PENDING:
        return (
            f"has begun {state.steps[pnr].name}, its point of no return: nothing is undone after it"
        )
    return None
