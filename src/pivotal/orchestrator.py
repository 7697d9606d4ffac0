"""The orchestrator: submit validated plans, run sagas, decide approvals."""

from __future__ import annotations

import random
import re
import uuid

from pivotal.app import App
from pivotal.catalogue import Catalogue
from pivotal.clock import Clock, SystemClock
from pivotal.engine import SagaRun
from pivotal.errors import (
    ApprovalError,
    InvalidInput,
    LeaseLost,
    PlanRejected,
    SagaConflict,
    SagaNotFound,
)
from pivotal.plan import Plan
from pivotal.state import (
    ApprovalStatus,
    Event,
    EventType,
    SagaState,
    SagaStatus,
    apply,
    replay,
)
from pivotal.store.base import Store, StoredSaga
from pivotal.validation import validate

_SAGA_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


def new_saga_id() -> str:
    return f"sg_{uuid.uuid4().hex}"


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
        lease_ttl: float = 300.0,
    ) -> None:
        self.store = store
        self.app = app if isinstance(app, App) else App([app], name=app.name)
        self.clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self.owner = owner or f"orchestrator-{uuid.uuid4().hex[:8]}"
        self.lease_ttl = lease_ttl

    # -- submission ---------------------------------------------------------------------

    async def submit(self, plan: Plan, *, saga_id: str | None = None) -> SagaState:
        """Validate ``plan`` and record it as a saga. Nothing runs yet.

        Idempotent on ``saga_id``: the same id and plan returns the existing saga; the same
        id with another plan raises ``SagaConflict``.
        """
        catalogue = self.app.catalogue(plan.catalogue)
        errors = validate(plan, catalogue)
        if errors:
            raise PlanRejected(errors)
        if saga_id is not None and not _SAGA_ID.match(saga_id):
            raise InvalidInput(
                f"saga id {saga_id!r} must be 1-128 characters of letters, digits, '_', '.', '-'"
            )
        saga_id = saga_id or new_saga_id()
        digest = plan.digest()
        existing = await self.store.load(saga_id)
        if existing is None:
            event = Event(
                type=EventType.SAGA_SUBMITTED,
                at=self.clock.now(),
                seq=1,
                data={
                    "saga_id": saga_id,
                    "catalogue": plan.catalogue,
                    "plan_digest": digest,
                    "provenance_ref": plan.provenance.ref(),
                    "rationale": plan.rationale,
                    "steps": [
                        {
                            "name": f.call.name,
                            "kind": catalogue[f.call.name].kind.value,
                            "group": f.group,
                        }
                        for f in plan.calls()
                    ],
                },
            )
            state = apply(None, event)
            if await self.store.create(state, plan, plan.provenance, [event]):
                return state
            existing = await self.store.load(saga_id)
            assert existing is not None
        if existing.state.plan_digest != digest:
            raise SagaConflict(f"saga {saga_id} already exists with a different plan")
        return existing.state

    # -- execution ----------------------------------------------------------------------

    async def get(self, saga_id: str) -> StoredSaga:
        stored = await self.store.load(saga_id)
        if stored is None:
            raise SagaNotFound(f"no saga {saga_id!r}")
        return stored

    async def run(self, saga_id: str) -> SagaState:
        """Drive the saga in this process until it ends or waits for approval."""
        stored = await self.get(saga_id)
        if stored.state.status.terminal:
            return stored.state
        epoch = await self.store.claim(saga_id, self.owner, self.lease_ttl, self.clock.now())
        if epoch is None:
            raise LeaseLost(f"saga {saga_id} is leased by another worker")
        try:
            stored = await self.get(saga_id)
            return await self._pass(stored, epoch).drive()
        finally:
            await self.store.release(saga_id, epoch)

    async def execute(self, plan: Plan, *, saga_id: str | None = None) -> SagaState:
        """Submit and run in this process."""
        state = await self.submit(plan, saga_id=saga_id)
        return await self.run(state.saga_id)

    def _pass(self, stored: StoredSaga, epoch: int | None) -> SagaRun:
        return SagaRun(
            self.store,
            self.app.catalogue(stored.state.catalogue),
            stored.plan,
            stored.state,
            self.clock,
            epoch=epoch,
            provenance=stored.plan.provenance,
            rng=self.rng,
        )

    # -- approvals ----------------------------------------------------------------------

    async def approve(
        self, saga_id: str, approver: str, note: str = "", *, run: bool = True
    ) -> SagaState:
        """Grant the pending approval; with ``run`` the saga goes on in this process.

        An approval that arrives after the request expired is recorded as expired and the
        saga compensates.
        """
        return await self._decide(saga_id, approver, note, approve=True, run=run)

    async def reject(
        self, saga_id: str, approver: str, note: str = "", *, run: bool = True
    ) -> SagaState:
        """Refuse the pending approval: the saga compensates."""
        return await self._decide(saga_id, approver, note, approve=False, run=run)

    async def _decide(
        self, saga_id: str, approver: str, note: str, *, approve: bool, run: bool
    ) -> SagaState:
        if not approver.strip():
            raise InvalidInput("an approval decision needs the approver's name")
        stored = await self.get(saga_id)
        state, approval = stored.state, stored.state.approval
        if (
            state.status is not SagaStatus.AWAITING_APPROVAL
            or approval is None
            or approval.status is not ApprovalStatus.PENDING
        ):
            raise ApprovalError(
                f"saga {saga_id} is {state.status.value}, not awaiting an approval decision"
            )
        saga_run = self._pass(stored, None)
        now = self.clock.now()
        step_name = state.steps[approval.step].name
        if now >= approval.expires_at:
            events = [
                saga_run.event(EventType.APPROVAL_EXPIRED, approval.step),
                saga_run.event(
                    EventType.COMPENSATION_STARTED,
                    reason=f"approval for {step_name} expired before a decision",
                ),
            ]
        elif approve:
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
        return await self.run(saga_id) if run else saga_run.state

    # -- audit --------------------------------------------------------------------------

    async def replayed(self, saga_id: str) -> SagaState:
        """The saga's state rebuilt from its event log alone."""
        events = await self.store.events(saga_id)
        if not events:
            raise SagaNotFound(f"no saga {saga_id!r}")
        return replay(events)
