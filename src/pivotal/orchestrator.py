"""The orchestrator: submit validated plans, run sagas, decide approvals."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from pivotal import four_eyes, saga_ids
from pivotal.admission import admit
from pivotal.app import App
from pivotal.catalogue import Catalogue, StepKind
from pivotal.clock import Clock, SystemClock, follow_ledger, synced
from pivotal.engine import AlreadyCreated, Creation, Driver, RunOptions, by_hand, point_of_no_return
from pivotal.engine.resuming import ResumeFromRefused, resume_from, step_named
from pivotal.errors import (
    ApprovalError,
    InvalidInput,
    LeaseLost,
    PlanRejected,
    SagaConflict,
    SagaNotFound,
    SagaNotParked,
    SagaUnserved,
    StaleApproval,
    StoreError,
    VersionConflict,
)
from pivotal.fork import Edit, fork_id, fork_plan
from pivotal.holds import expiry_cause
from pivotal.hooks import Hook
from pivotal.lease import Lease, LeaseKeeper
from pivotal.plan import Plan
from pivotal.principals import canonical_person
from pivotal.provider_check.model import recorded_drift
from pivotal.rerun import rerun_id, rerun_plan
from pivotal.serving import unserved
from pivotal.state import (
    ApprovalStatus,
    Event,
    EventType,
    SagaState,
    SagaStatus,
    StepStatus,
    apply,
    replay,
)
from pivotal.store.base import DeadLetter, Store, StoredSaga
from pivotal.telemetry import Observers, Telemetry
from pivotal.validation import Checked, Recheck, recheck_bounded

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LettersDue:
    """What ``Orchestrator.dead_letters_due`` did: ``made``, the letters it made due (one
    settled, or retried and settled, meanwhile is not); ``noted``, whether the saga notes
    who asked (False when none was made due, or when the saga kept changing under the note:
    the letters are due all the same)."""

    made: tuple[int, ...]
    noted: bool


_RUNNABLE = (SagaStatus.SUBMITTED, SagaStatus.RUNNING, SagaStatus.COMPENSATING)

# True inside a pass admitted by ``Orchestrator.execute`` or ``run`` (and in what its steps
# call or start): a saga started from a step is admitted at once, never queued behind the
# pass that waits for it.
_admitted: ContextVar[bool] = ContextVar("pivotal_admitted", default=False)


def _trace(traceparent: str | None) -> dict[str, str]:
    return {"traceparent": traceparent} if traceparent else {}


class Orchestrator:
    """Executes validated plans durably against a ledger.

    ``run`` executes a saga in this process until it ends or waits for a person; workers
    use the same engine.
    """

    def __init__(
        self,
        store: Store,
        app: App | Catalogue,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        owner: str | None = None,
        lease_ttl: float = 60.0,
        hook: Hook | None = None,
        poison_after: int = 5,
        telemetry: Telemetry | Sequence[Telemetry] = (),
        max_active: int | None = 1000,
        ledger_clock: bool = True,
    ) -> None:
        if max_active is not None and (
            isinstance(max_active, bool) or not isinstance(max_active, int) or max_active < 1
        ):
            raise InvalidInput(f"max_active must be a whole number >= 1 or None: {max_active!r}")
        self.store = store
        self.app = app if isinstance(app, App) else App([app], name=app.name)
        # wall-clock time is the ledger's, read through this process's clock (a fake clock
        # given by a test is its own time)
        self.clock: Clock = follow_ledger(clock, store) if ledger_clock else clock or SystemClock()
        self.rng = rng or random.Random()
        self.owner = owner or f"orchestrator-{uuid.uuid4().hex[:8]}"
        self.lease_ttl = lease_ttl
        self.hook = hook
        self.poison_after = poison_after  # passes in a row without progress, then a person
        self.leases = LeaseKeeper(store, self.owner, self.clock)
        observers = [telemetry] if isinstance(telemetry, Telemetry) else list(telemetry)
        self.telemetry = Observers(observers)  # metrics, traces, log fields; contained
        # passes run by execute/run at once; more wait their turn holding only their call
        self._active = asyncio.Semaphore(max_active) if max_active is not None else None
        # every path that runs sagas (a worker, execute, the ADK agent, the API's decisions)
        # has an orchestrator: it says where a catalogue declares less than its providers'
        # last check saw (``Catalogue(checked=...)``)
        for said in recorded_drift(self.app):
            log.warning("%s: %s", self.owner, said)

    # -- submission ---------------------------------------------------------------------

    async def submit(self, plan: Plan, *, saga_id: str | None = None) -> SagaState:
        """Validate ``plan`` and record it as a saga. Nothing runs yet.

        Idempotent on ``saga_id``: the same id and plan returns the existing saga; the same
        id with another plan raises ``SagaConflict``.
        """
        await synced(self.clock)  # times below are the ledger's
        saga_ids.check(saga_id)
        existing = await self.store.load(saga_id) if saga_id is not None else None
        if existing is None:
            # Validated once, when first submitted: a resubmission of the same plan returns
            # the saga even if its preconditions no longer hold (it may have run since).
            state, event, _ = await self._new(plan, saga_id)
            if await self.store.create(state, plan, plan.provenance, [event]):
                self.telemetry.committed(None, state, [event])
                return state
            existing = await self.store.load(state.saga_id)
            assert existing is not None
        return self._same_plan(existing, plan).state

    async def submit_aborted(
        self, plan: Plan, *, saga_id: str | None = None, by: str, reason: str
    ) -> SagaState:
        """``submit``, with a verdict given before anything ran: the saga is created
        compensating (reason ``aborted by {by}: {reason}``, as ``abort`` writes it) in the
        one transaction that records it, so no pass can ever begin one of its steps, and
        there is no moment at which it exists unaborted (a crash, or a worker claiming it).

        Validated like ``submit`` (``PlanRejected``) and idempotent on ``saga_id`` the same
        way: an existing saga with the same plan is returned as it is, aborted or not (the
        caller aborts it then, if it still can); another plan raises ``SagaConflict``.
        """
        await synced(self.clock)  # times below are the ledger's
        if not canonical_person(by) or not reason.strip():
            raise InvalidInput("aborting a saga needs who aborted it and why")
        saga_ids.check(saga_id)
        existing = await self.store.load(saga_id) if saga_id is not None else None
        if existing is None:
            state, submitted, _ = await self._new(plan, saga_id)
            started = Event(
                type=EventType.COMPENSATION_STARTED,
                at=submitted.at,
                seq=submitted.seq + 1,
                data={"reason": f"aborted by {by}: {reason}"},
            )
            state = apply(state, started)
            if await self.store.create(state, plan, plan.provenance, [submitted, started]):
                self.telemetry.committed(None, state, [submitted, started])
                return state
            existing = await self.store.load(state.saga_id)
            assert existing is not None
        return self._same_plan(existing, plan).state

    async def submit_leased(
        self, plan: Plan, *, saga_id: str | None = None
    ) -> tuple[SagaState, Lease | None]:
        """``submit``, with the new saga leased to this process by the commit that creates
        it (``create_leased``): no other process can claim it before this lease ends or
        lapses, so the caller decides what runs first (an agent's model stage between two
        steps). The lease is renewed by this process's heartbeat; hold it at once with
        ``leases.holding``, which releases it.

        Validated and idempotent on ``saga_id`` like ``submit``: for a saga that existed
        already (same plan) the lease is None, and the caller takes it as usual. A store
        that cannot create a saga leased is refused (``StoreError``) before anything is
        written: created free, any worker could claim the saga and run it past a stage the
        caller has yet to decide.
        """
        create = getattr(type(self.store), "create_leased", None)
        if create is None:
            raise StoreError(
                f"this ledger ({type(self.store).__name__}) cannot create a saga leased to "
                "its submitter (it has no create_leased): nothing was submitted"
            )
        await synced(self.clock)  # times below are the ledger's
        saga_ids.check(saga_id)
        existing = await self.store.load(saga_id) if saga_id is not None else None
        if existing is None:
            state, event, _ = await self._new(plan, saga_id)
            now = self.clock.now()
            terms = (self.owner, self.lease_ttl, now)
            epoch: int | None = await create(
                self.store, state, plan, plan.provenance, [event], terms
            )
            if epoch is not None:
                self.telemetry.committed(None, state, [event])
                return state, self.leases.adopt(state.saga_id, epoch, self.lease_ttl, since=now)
            existing = await self.store.load(state.saga_id)
            assert existing is not None
        return self._same_plan(existing, plan).state, None

    def _same_plan(self, existing: StoredSaga, plan: Plan) -> StoredSaga:
        if existing.state.plan_digest != plan.digest():
            raise SagaConflict(
                f"saga {existing.state.saga_id} already exists with a different plan"
            )
        return existing

    async def _new(self, plan: Plan, saga_id: str | None) -> tuple[SagaState, Event, Checked]:
        """The saga ``plan`` becomes, as admission decides (``pivotal.admission``): every
        path that records a new saga comes through here, before anything is written. A
        plan admission holds back is recorded as it says, and its error raised."""
        admission = await admit(
            plan,
            saga_id,
            app=self.app,
            store=self.store,
            now=self.clock.now(),
            trace=lambda saga: _trace(self.telemetry.submission_trace(saga)),
        )
        if admission.state is not None and admission.event is not None:
            return admission.state, admission.event, admission.found
        if admission.run is not None:
            await self.store.record_run(admission.run)
        raise admission.refusal()

    # -- execution ----------------------------------------------------------------------

    async def get(self, saga_id: str) -> StoredSaga:
        stored = await self.store.load(saga_id)
        if stored is None:
            raise SagaNotFound(f"no saga {saga_id!r}")
        return stored

    async def _admit(self, work: Callable[[], Awaitable[SagaState]]) -> SagaState:
        """Run ``work`` once fewer than ``max_active`` passes of ``execute``/``run`` are
        under way; a call from inside one of them (a step that starts a saga) goes at once."""
        await synced(self.clock)
        gate = self._active
        if gate is None or _admitted.get():
            return await work()
        async with gate:
            token = _admitted.set(True)
            try:
                return await work()
            finally:
                _admitted.reset(token)

    async def run(self, saga_id: str, *, options: RunOptions | None = None) -> SagaState:
        """Lease the saga and drive it in this process until it ends, waits for a person,
        or (with ``options.max_inline_wait``) waits for a retry that is not yet due. The
        lease is renewed while the saga runs; if it is taken over, the pass stops at once."""
        return await self._admit(functools.partial(self._run, saga_id, options))

    async def _run(self, saga_id: str, options: RunOptions | None) -> SagaState:
        refused: SagaUnserved | None = None
        async with self.lease(saga_id) as lease:
            work = self.drive(saga_id, lease.epoch, self.leased(lease, options, release=True))
            try:
                return await self.leases.guard(lease, work)
            except SagaUnserved as exc:
                await self.refuse(lease, exc)  # given back uncounted: not released again
                refused = exc
        assert refused is not None
        raise refused

    async def drive(
        self,
        saga_id: str,
        epoch: int,
        options: RunOptions | None = None,
        *,
        stored: StoredSaga | None = None,
    ) -> SagaState:
        """One pass over a saga whose lease the caller holds at ``epoch`` (``stored``: its
        ledger state, when the caller has it already).

        A saga whose last ``poison_after`` passes all ended without progress (each crashed
        or failed before recording anything) is parked ``needs_human`` instead.

        A saga this process cannot serve (its app lacks the saga's catalogue, or a step the
        saga uses, or has one of another kind: an older build in a rolling deploy) raises
        ``SagaUnserved`` before anything runs or is written; the caller gives the lease back
        with ``refuse``, which does not count the pass, so it never makes the saga poison.
        """
        stored = stored or await self.get(saga_id)
        refusal = self._refusal(stored.state)
        if refusal is not None:
            raise refusal
        run = self._pass(stored, epoch, options)
        status = stored.state.status
        if stored.idle_passes > self.poison_after and status in _RUNNABLE:
            why = f"; the last one: {stored.last_error}" if stored.last_error else ""
            return await run.park(
                f"poison: {stored.idle_passes - 1} passes in a row ended without progress"
                f"{why}. Fix the cause, then resume the saga"
            )
        return await run.drive()

    def _refusal(self, state: SagaState) -> SagaUnserved | None:
        """Why this process cannot run the saga (``serving.unserved``, told to the
        observers), or None when it can."""
        why = unserved(self.app.catalogues.get(state.catalogue), state)
        if why is None:
            return None
        reason = f"worker {self.owner} cannot serve it: {why}"
        self.telemetry.unserved(state, self.owner, reason)
        return SagaUnserved(reason)

    async def refuse(self, lease: Lease, refusal: SagaUnserved) -> None:
        """Give back the lease of a saga this process cannot serve, nothing run: the claim
        is not counted as a pass without progress, and ``refusal`` is kept as the saga's
        last error (for ``pivotal sagas show``). The keeper does not release it again."""
        self.leases.freed(lease)
        if lease.lost or not lease.in_ledger:
            return
        await self.store.release(lease.saga_id, lease.epoch, str(refusal), counted=False)

    def leased(
        self, lease: Lease, options: RunOptions | None = None, *, release: bool = False
    ) -> RunOptions:
        """``options`` for a pass under ``lease``; every pass that may call an action, an
        undo or a lookup runs with these. The lease is checked (renewed when about to run
        out) before every intent and call, and a call's progress report is kept under it.
        With ``release`` (a lease held for that single pass: ``run``, ``execute``, a
        worker's), the commit that ends the pass (the saga ended, or waits for a person)
        frees the lease too, and the keeper forgets it."""
        options = options or RunOptions(owner=self.owner, hook=self.hook)
        return replace(
            options,
            on_release=functools.partial(self.leases.freed, lease) if release else None,
            lease_check=functools.partial(self.leases.ensure, lease),
            report=functools.partial(self.leases.report, lease),
        )

    def lease(self, saga_id: str) -> AbstractAsyncContextManager[Lease]:
        """Hold the saga's lease (renewed by this process's heartbeat); released on return or
        error, kept on a crash. ``LeaseLost`` when another process holds it."""
        return self.leases.hold(saga_id, self.lease_ttl)

    async def execute(
        self, plan: Plan, *, saga_id: str | None = None, options: RunOptions | None = None
    ) -> SagaState:
        """Submit and run in this process.

        With a store that can (``create_leased``), the saga is created already leased to
        this process, and its pass starts from the state just written: no claim, no read.

        At most ``max_active`` passes of ``execute`` and ``run`` go on at once in this
        orchestrator; more calls wait their turn, in order, before anything is checked or
        written (a saga started from inside a step never waits).
        """
        return await self._admit(functools.partial(self._execute, plan, saga_id, options))

    async def _execute(
        self, plan: Plan, saga_id: str | None, options: RunOptions | None
    ) -> SagaState:
        create = getattr(type(self.store), "create_leased", None)
        if create is None:
            state = await self.submit(plan, saga_id=saga_id)
            return await self.run(state.saga_id, options=options)
        saga_ids.check(saga_id)
        try:
            state, event, found = await self._new(plan, saga_id)
        except PlanRejected:
            # a resubmission is not validated again (see ``submit``): it runs what exists
            if saga_id is None or await self.store.load(saga_id) is None:
                raise
            return await self._resubmitted(plan, saga_id, options)
        # The saga is created by the first commit of its pass, with its first intent (or
        # whatever the pass records first), leased to this process: epoch 1.
        lease = Lease(state.saga_id, 1, self.lease_ttl, in_ledger=False)

        sent: list[float] = []  # when the creation's lease terms were sent

        def write(after: SagaState, events: list[Event], leased: bool) -> Awaitable[object]:
            if not leased:  # that commit ends the pass: nothing to hold
                return self.store.create(after, plan, plan.provenance, events)
            sent.append(self.clock.now())
            terms = (self.owner, self.lease_ttl, sent[-1])
            return create(self.store, after, plan, plan.provenance, events, terms)  # type: ignore[no-any-return]

        def written(leased: bool) -> None:
            if leased:
                self.leases.keep(lease, since=sent[-1] if sent else None)

        creation = Creation(event, write, written)
        fresh = StoredSaga(state, plan, 1, None)
        async with self.leases.holding(lease):
            releasing = self.leased(lease, options, release=True)
            work = self._pass(fresh, 1, releasing, creation, found).drive()  # never poison
            del fresh, found, state  # the pass holds what it needs while it waits
            try:
                return await self.leases.guard(lease, work)
            except AlreadyCreated:
                pass  # nothing was written; the lease was never held
        return await self._resubmitted(plan, lease.saga_id, options)

    async def _resubmitted(self, plan: Plan, saga_id: str, options: RunOptions | None) -> SagaState:
        """``execute`` of an id that exists: the same plan runs on, another is refused."""
        self._same_plan(await self.get(saga_id), plan)
        return await self.run(saga_id, options=options)

    def _pass(
        self,
        stored: StoredSaga,
        epoch: int | None,
        options: RunOptions | None = None,
        creating: Creation | None = None,
        checked: Checked | None = None,
    ) -> Driver:
        return Driver(
            self.store,
            self.app.catalogue(stored.state.catalogue),
            stored.plan,
            stored.state,
            self.clock,
            epoch=epoch,
            rng=self.rng,
            options=options or RunOptions(owner=self.owner, hook=self.hook),
            telemetry=self.telemetry,
            creating=creating,
            checked=checked,
            facts=self.app.facts,
            rates=self.app.rates,
        )

    # -- dead letters -------------------------------------------------------------------

    async def _dead_letter(self, dead_letter_id: int) -> DeadLetter:
        found = await self.store.dead_letters(None, id=dead_letter_id)
        if not found:
            raise InvalidInput(f"no dead letter {dead_letter_id}")
        return found[0]

    async def retry_dead_letter(self, dead_letter_id: int) -> bool:
        """Run a parked undo again with its undo key; True when it is now settled."""
        await synced(self.clock)  # times below are the ledger's
        letter = await self._dead_letter(dead_letter_id)
        if letter.status != "open":
            return True
        refusal = self._refusal((await self.get(letter.saga_id)).state)
        if refusal is not None:  # asked before the lease: nothing counted
            raise refusal
        async with self.lease(letter.saga_id) as lease:
            run = self._pass(await self.get(letter.saga_id), lease.epoch, self.leased(lease))
            return await self.leases.guard(
                lease, run.retry_dead_letter(letter.step, letter.retries)
            )

    async def resolve_dead_letter(self, dead_letter_id: int, by: str, reason: str) -> None:
        """Record that a person settled a parked undo by hand, and why."""
        await synced(self.clock)  # times below are the ledger's
        if not canonical_person(by) or not reason.strip():
            raise InvalidInput("resolving a dead letter needs who resolved it and why")
        letter = await self._dead_letter(dead_letter_id)
        if letter.status != "open":
            raise InvalidInput(f"dead letter {dead_letter_id} is already {letter.status}")
        async with self.lease(letter.saga_id) as lease:
            run = self._pass(await self.get(letter.saga_id), lease.epoch, self.leased(lease))
            await self.leases.guard(lease, run.resolve_dead_letter(letter.step, by, reason))

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
        if not canonical_person(approver):
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
        await saga_run.emit(*events)
        if not run:
            return saga_run.state
        try:
            return await self.run(saga_id)
        except (LeaseLost, SagaUnserved):  # a worker that serves it goes on (it was notified)
            return saga_run.state

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
        """Turn a verdict (a model's "this order is invalid", a check) into a rollback: a
        saga that is submitted or running, and has not begun its point-of-no-return step,
        starts compensating; with ``run`` it compensates in this process, else a worker
        (or the pass that holds its lease) does. Refused with ``InvalidInput`` otherwise: a
        saga awaiting approval is rejected instead, and past the point of no return nothing
        is undone. The write is fenced by version: a pass running meanwhile reloads.
        ``search``: the query of the search that selected it, when one act aborted many
        (``pivotal.bulk``), kept in the event's data."""
        await synced(self.clock)  # times below are the ledger's
        if not canonical_person(by) or not reason.strip():
            raise InvalidInput("aborting a saga needs who aborted it and why")
        stored = await self.get(saga_id)
        state = stored.state
        if state.status not in (SagaStatus.SUBMITTED, SagaStatus.RUNNING):
            waiting = state.status is SagaStatus.AWAITING_APPROVAL
            hint = "; reject the approval instead" if waiting else ""
            raise InvalidInput(
                f"saga {saga_id} is {state.status.value}: it cannot be aborted{hint}"
            )
        pnr = point_of_no_return(state)
        if pnr is not None and state.steps[pnr].status is not StepStatus.PENDING:
            raise InvalidInput(
                f"saga {saga_id} has begun {state.steps[pnr].name}, its point of no return: "
                "nothing is undone after it"
            )
        saga_run = self._pass(stored, None)
        started = saga_run.event(
            EventType.COMPENSATION_STARTED, reason=f"aborted by {by}: {reason}"
        )
        if search is not None:  # which search selected it
            started = replace(started, data={**started.data, "search": search})
        await saga_run.emit(started)
        if not run:
            return saga_run.state
        return await self.run(saga_id)

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
        if not canonical_person(by) or not reason.strip():
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
            raise SagaNotFound(f"no saga {saga_id!r}")
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
        if not canonical_person(by):
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
        if not canonical_person(by) or not reason.strip():
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

    async def dead_letters_due(
        self,
        saga_id: str,
        letters: Sequence[int],
        by: str,
        search: str | None = None,
        reason: str = "",
    ) -> LettersDue:
        """Make the saga's open dead letters ``letters`` due now, for a worker's sweep to
        retry with their undo keys, and note on the saga who asked, why when they said, and
        which letters were made due (``dead_letters_due``; ``search``: the query of the
        search that selected it, for a bulk act). A letter no longer open (settled
        meanwhile) is not made due, and nothing is noted when none was. The answer says
        what was done (``LettersDue``): letters made due stay due when the note loses to a
        saga that keeps changing; it says so rather than raise."""
        if not canonical_person(by):
            raise InvalidInput("retrying dead letters needs who asked for it")
        await synced(self.clock)  # times below are the ledger's
        now = self.clock.now()
        made = tuple(
            [letter for letter in letters if await self.store.schedule_dead_letter(letter, now)]
        )
        if not made:
            return LettersDue(made, noted=False)
        data: dict[str, Any] = {"by": by, "letters": list(made)}
        if reason.strip():
            data["why"] = reason.strip()
        if search is not None:
            data["search"] = search
        noted = await self._note(saga_id, EventType.DEAD_LETTERS_DUE, data, lambda e: False)
        if not noted:
            log.warning(
                "dead letters %s of saga %s are due, but who asked (%s) is not noted: the saga "
                "kept changing",
                list(made),
                saga_id,
                by,
            )
        return LettersDue(made, noted)

    async def dead_letter_due(self, dead_letter_id: int, by: str) -> LettersDue:
        """``dead_letters_due`` for one open dead letter (the API's, the page's and the
        CLI's retry): nothing made due when there is no such open letter (or it was settled
        meanwhile), and nothing changed then."""
        if not canonical_person(by):
            raise InvalidInput("retrying dead letters needs who asked for it")
        found = await self.store.dead_letters("open", id=dead_letter_id)
        if not found:
            return LettersDue((), noted=False)
        return await self.dead_letters_due(found[0].saga_id, [dead_letter_id], by)

    async def _note(
        self,
        saga_id: str,
        kind: EventType,
        data: dict[str, Any],
        noted: Callable[[Event], bool],
    ) -> bool:
        """A note on ``saga_id`` (an event that changes nothing of it), unless one already
        there is ``noted``; fenced by version like every write, read again when another
        write moved it meanwhile. False when it lost that race three times: not noted."""
        for _ in range(3):
            stored = await self.get(saga_id)
            if any(noted(e) for e in await self.store.events(saga_id)):
                return True
            saga_run = self._pass(stored, None)
            try:
                await saga_run.emit(saga_run.event(kind, **data))
                return True
            except VersionConflict:
                continue
        return False


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
