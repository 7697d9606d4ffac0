"""The orchestrator's ground floor: its parts (the ledger, the app, the clock, the leases,
the observers), and running a saga in this process: a pass under its lease."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import replace

from pivotal.admission.validation import Checked
from pivotal.clock import Clock, SystemClock, follow_ledger, synced
from pivotal.declarations.app import App
from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.serving import unserved
from pivotal.engine import Creation, Driver, RunOptions
from pivotal.engine.telemetry import Observers, Telemetry
from pivotal.errors import InvalidInput, SagaNotFound, SagaUnserved
from pivotal.hooks import Hook
from pivotal.provider_check.model import recorded_drift
from pivotal.sagas import saga_ids
from pivotal.sagas.lease import Lease, LeaseKeeper
from pivotal.sagas.state import SagaState, SagaStatus
from pivotal.store.base import Store, StoredSaga

# one logger for the orchestrator, whichever floor speaks
log = logging.getLogger("pivotal.orchestrator")

_RUNNABLE = (SagaStatus.SUBMITTED, SagaStatus.RUNNING, SagaStatus.COMPENSATING)

# True inside a pass admitted by ``Orchestrator.execute`` or ``run`` (and in what its steps
# call or start): a saga started from a step is admitted at once, never queued behind the
# pass that waits for it.
_admitted: ContextVar[bool] = ContextVar("pivotal_admitted", default=False)


def _trace(traceparent: str | None) -> dict[str, str]:
    return {"traceparent": traceparent} if traceparent else {}


class Running:
    """Runs sagas durably against a ledger: ``run`` drives one in this process until it
    ends or waits for a person; workers use the same engine (``drive``)."""

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

    # -- execution ----------------------------------------------------------------------

    async def get(self, saga_id: str) -> StoredSaga:
        stored = await self.store.load(saga_id)
        if stored is None:
            raise SagaNotFound(saga_ids.missing(saga_id))
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
