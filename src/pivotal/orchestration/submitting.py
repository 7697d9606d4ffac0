"""Recording new sagas (``submit``, ``submit_aborted``, ``submit_leased``) and running one
at once (``execute``): each goes through admission (``pivotal.admission``), which decides;
this writes what it says."""

from __future__ import annotations

import functools
from collections.abc import Awaitable

from pivotal.admission import Given, admit
from pivotal.admission.validation import Checked
from pivotal.clock import synced
from pivotal.declarations.plan import Plan
from pivotal.declarations.serving import catalogue_digest
from pivotal.engine import AlreadyCreated, Creation, RunOptions
from pivotal.errors import InvalidInput, PlanRejected, SagaConflict, StoreError
from pivotal.orchestration.running import Running, _trace
from pivotal.people.principals import names_someone
from pivotal.sagas import saga_ids
from pivotal.sagas.lease import Lease
from pivotal.sagas.state import Event, EventType, SagaState, apply
from pivotal.store.base import StoredSaga


class Submitting(Running):
    """What records a new saga, and ``execute``."""

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
        if not names_someone(by) or not reason.strip():
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
        catalogue = self.app.catalogue(plan.catalogue)
        given = Given(
            plan,
            plan.digest(),
            saga_id,
            catalogue,
            catalogue_digest(catalogue),
            self.clock.now(),
            self.app.facts,
            self.app.rates,
            self.store,
            lambda saga: _trace(self.telemetry.submission_trace(saga)),
        )
        admission = await admit(given)
        if admission.event is not None:
            return apply(None, admission.event), admission.event, admission.found
        if admission.run is not None:
            await self.store.record_run(admission.run)
        raise admission.refusal()

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
