"""A model stage's veto is durable: neither a crash nor a worker can run the saga past it.

A veto given before the first act is recorded with the submission itself (the saga is
created compensating, in the one transaction that records it), so there is no moment when
the saga exists and may still go forward. A veto given later, under the agent's lease, is
retried when its write meets a version conflict, and never driven past.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

import pytest
from adk_story import ORDER, Session, check_stage, comp_records, plan_stage

from pivotal import FakeClock, Orchestrator
from pivotal.adk import Act, Decide, SagaAgent
from pivotal.declarations.plan import Plan, Provenance
from pivotal.errors import StoreError, VersionConflict
from pivotal.examples.commerce import CommerceApp, CommerceServices
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.sagas.state import Event, EventType, SagaState, SagaStatus
from pivotal.store import Store
from pivotal.testing import FlakyStore, SimulatedCrash

VETO = "the order check said 'invalid'"
REASON = f"aborted by adk:check: {VETO}"
FORWARD_OPS = ("reserve", "authorize", "capture", "ship", "email")


class Ledger(FlakyStore):
    """The agent's process's view of the ledger: every call goes through to ``inner``, and
    ``meanwhile`` runs once, at the first of the ``moments`` met after the saga was created:
    ``created`` (its creation just committed), ``write`` (before the agent's next write
    that holds no lease, such as an abort, after that write's read) or ``claim`` (before
    the agent takes the saga's lease)."""

    def __init__(
        self,
        inner: Store,
        moments: Collection[str],
        meanwhile: Callable[[], Awaitable[None]],
        *,
        times: int = 1,
    ) -> None:
        super().__init__(inner, [])
        self.moments = frozenset(moments)
        self.meanwhile = meanwhile
        self.times = times
        self.created = False
        self.met: list[str] = []

    async def _moment(self, moment: str) -> None:
        if self.created and moment in self.moments and len(self.met) < self.times:
            self.met.append(moment)
            await self.meanwhile()

    async def create(
        self, state: SagaState, plan: Plan, provenance: Provenance, events: Sequence[Event]
    ) -> bool:
        made = await self.inner.create(state, plan, provenance, events)
        self.created = self.created or made
        if made:
            await self._moment("created")
        return made

    async def create_leased(
        self,
        state: SagaState,
        plan: Plan,
        provenance: Provenance,
        events: Sequence[Event],
        lease: tuple[str, float, float],
    ) -> int | None:
        epoch = await super().create_leased(state, plan, provenance, events, lease)
        self.created = self.created or epoch is not None
        if epoch is not None:
            await self._moment("created")
        return epoch

    async def commit(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int | None
    ) -> None:
        if epoch is None:
            await self._moment("write")
        await super().commit(before, after, events, epoch)

    async def claim(self, saga_id: str, owner: str, ttl: float, now: float) -> int | None:
        await self._moment("claim")
        return await self.inner.claim(saga_id, owner, ttl, now)


def _order(s: Any) -> dict[str, Any]:
    return dict(s["order_plan"])


def fulfilment(orch: Orchestrator, *, check: Decide, leading: bool) -> SagaAgent:
    """PLAN -> [CHECK] -> reserve -> [CHECK] -> authorize -> capture (the pivot) -> ship:
    the check before any act (``leading``) or after the reservation."""
    pay = ("order_id", "amount")
    reserve = Act(
        "reserve_stock",
        lambda s: {k: _order(s)[k] for k in ("order_id", "sku", "quantity", "warehouse")},
        name="reserve",
    )
    rest = [
        Act("authorize_payment", lambda s: {k: _order(s)[k] for k in pay}, name="authorize"),
        Act("capture_payment", lambda s: {k: _order(s)[k] for k in pay}, name="capture"),
        Act("create_shipment", lambda s: {k: _order(s)[k] for k in ("order_id", "warehouse")}),
    ]
    middle: list[Any] = [check, reserve] if leading else [reserve, check]
    stages: list[Any] = [plan_stage(ORDER), *middle, *rest]
    return SagaAgent(name="fulfil", orchestrator=orch, catalogue="fulfilment", stages=stages)


def vetoing(orch: Orchestrator, *, leading: bool = True) -> SagaAgent:
    return fulfilment(orch, check=check_stage("invalid"), leading=leading)


def forward_calls(services: CommerceServices) -> list[dict[str, Any]]:
    return [c for op in FORWARD_OPS for c in services.calls(op)]


async def event_types(store: Store, saga_id: str) -> list[str]:
    return [e.type.value for e in await store.events(saga_id)]


async def drain(orchestrator: Orchestrator) -> None:
    await Worker(orchestrator, WorkerConfig(poll_interval=0.01)).run(until_idle=True)


# -- (a) a crash between the submission and the abort --------------------------------------


@pytest.mark.parametrize("recovery", ["rerun", "worker"])
async def test_a_leading_veto_survives_a_crash_right_after_the_submission(
    recovery: str,
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
) -> None:
    async def die() -> None:
        raise SimulatedCrash("the process died as the submission committed")

    ledger = Ledger(store, {"created"}, die)
    crashing = Orchestrator(ledger, app, clock=clock, owner="dying")
    session = Session(vetoing(crashing))
    with pytest.raises(SimulatedCrash):
        await session.run()
    assert ledger.met == ["created"]
    state = await session.state()
    saga_id = state["pivotal_saga_id"]
    assert state["decided:check"] == VETO  # the session holds the veto; the ledger must too

    clock.advance(61)  # whatever the dead process held has run out
    if recovery == "worker":
        await drain(orchestrator)
    session.rebind(vetoing(orchestrator))  # a restarted process, the same session
    await session.run("how is my order?")
    state = await session.state()

    assert state["pivotal_saga_id"] == saga_id
    assert state["saga_status"] == "compensated"
    assert state["saga_reason"] == REASON
    assert comp_records(state) == {}
    stored = (await orchestrator.get(saga_id)).state
    assert stored.status is SagaStatus.COMPENSATED
    assert stored.reason == REASON
    assert EventType.STEP_STARTED.value not in await event_types(store, saga_id)
    assert services.calls() == []  # no provider was ever called


async def test_a_leading_veto_is_in_the_ledger_as_soon_as_the_saga_is(
    store: Store, app: CommerceApp, clock: FakeClock, services: CommerceServices
) -> None:
    seen: list[SagaState] = []

    async def look() -> None:  # what any other process would find the moment it exists
        (summary,) = await store.list_sagas()
        stored = await store.load(summary.saga_id)
        assert stored is not None
        seen.append(stored.state)

    orch = Orchestrator(Ledger(store, {"created"}, look), app, clock=clock)
    session = Session(vetoing(orch))
    await session.run()
    (first,) = seen
    assert first.status is SagaStatus.COMPENSATING
    assert first.reason == REASON
    state = await session.state()
    assert state["saga_status"] == "compensated"
    assert state["saga_reason"] == REASON
    assert await event_types(store, state["pivotal_saga_id"]) == [
        "saga_submitted",
        "compensation_started",
        "saga_compensated",
    ]
    assert services.calls() == []


# -- (b) a worker that claims the new saga before the agent aborts it -----------------------


async def test_a_leading_veto_wins_over_a_worker_that_claims_the_saga_first(
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
) -> None:
    # The worker gets in at the agent's first ledger call after the saga exists: before the
    # abort's write (after its read: the abort then meets a version conflict), or before
    # the agent leases the saga, whichever comes first.
    ledger = Ledger(store, {"write", "claim"}, lambda: drain(orchestrator))
    agent_orch = Orchestrator(ledger, app, clock=clock, owner="agent")
    session = Session(vetoing(agent_orch))
    await session.run()
    assert ledger.met  # the worker did run in between
    state = await session.state()
    saga_id = state["pivotal_saga_id"]
    await drain(orchestrator)

    stored = (await orchestrator.get(saga_id)).state
    assert stored.status is SagaStatus.COMPENSATED
    assert stored.reason == REASON
    assert state["saga_status"] == "compensated"
    assert EventType.STEP_STARTED.value not in await event_types(store, saga_id)
    assert services.calls("capture") == []  # nothing irreversible ran
    assert forward_calls(services) == []  # nor anything else


class Watched(FlakyStore):
    """A worker's view of the ledger: ``first_round`` is what its first claim found."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner, [])
        self.first_round: asyncio.Future[list[tuple[str, int]]] = asyncio.Future()

    async def claim_next(
        self,
        owner: str,
        ttl: float,
        now: float,
        limit: int,
        *,
        catalogues: Sequence[str] | None = None,
        skip: Sequence[str] = (),
    ) -> list[tuple[str, int]]:
        found = await super().claim_next(owner, ttl, now, limit, catalogues=catalogues, skip=skip)
        if not self.first_round.done():
            self.first_round.set_result(found)
        return found


async def test_a_later_veto_wins_over_a_worker_that_looks_for_work_as_the_saga_is_created(
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
) -> None:
    claimed: list[list[tuple[str, int]]] = []

    async def a_worker_looks_for_work() -> None:
        """Until its first claim: then it runs what it claimed to its end, or stops."""
        watched = Watched(store)
        worker = Worker(
            Orchestrator(watched, app, clock=clock, owner="worker"),
            WorkerConfig(poll_interval=0.01),
        )
        running = asyncio.create_task(worker.run(until_idle=True))
        claimed.append(await watched.first_round)
        if not claimed[-1]:
            worker.stop()
        await running

    # A worker looks for work the moment the agent's saga is in the ledger, before the
    # agent reserved anything and long before its check said "invalid": the saga is the
    # agent's from its creation, so the worker finds nothing to claim.
    ledger = Ledger(store, {"created"}, a_worker_looks_for_work)
    agent_orch = Orchestrator(ledger, app, clock=clock, owner="agent")
    session = Session(vetoing(agent_orch, leading=False))
    await session.run()
    assert ledger.met == ["created"]  # the worker did look in between
    state = await session.state()
    saga_id = state["pivotal_saga_id"]

    stored = (await orchestrator.get(saga_id)).state
    assert stored.status is SagaStatus.COMPENSATED
    assert stored.reason == REASON
    assert state["saga_status"] == "compensated"
    assert state["comp:reserve"]["undo"] == "done"
    assert services.calls("authorize") == services.calls("capture") == []
    assert len(services.calls("reserve")) == 1
    assert claimed == [[]]  # the worker found nothing it could claim


# -- a later veto whose write meets a version conflict -------------------------------------


@pytest.mark.parametrize("conflicts", [1, 2])
async def test_a_later_veto_is_retried_after_a_version_conflict(
    conflicts: int,
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    services: CommerceServices,
) -> None:
    async def moved() -> None:
        raise VersionConflict("saga changed under this writer (injected)")

    ledger = Ledger(store, {"write"}, moved, times=conflicts)
    orch = Orchestrator(ledger, app, clock=clock, owner="agent")
    session = Session(vetoing(orch, leading=False))
    await session.run()
    assert ledger.met == ["write"] * conflicts
    state = await session.state()
    stored = (await orch.get(state["pivotal_saga_id"])).state
    assert stored.status is SagaStatus.COMPENSATED
    assert stored.reason == REASON
    assert state["saga_status"] == "compensated"
    assert state["comp:reserve"]["undo"] == "done"
    assert services.calls("authorize") == services.calls("capture") == []


async def test_a_later_veto_that_cannot_be_written_is_never_driven_past(
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    services: CommerceServices,
) -> None:
    async def moved() -> None:
        raise VersionConflict("saga changed under this writer (injected)")

    ledger = Ledger(store, {"write"}, moved, times=1000)
    orch = Orchestrator(ledger, app, clock=clock, owner="agent")
    session = Session(vetoing(orch, leading=False))
    await session.run()
    assert 1 < len(ledger.met) < 10  # retried, but not forever
    state = await session.state()
    saga_id = state["pivotal_saga_id"]
    assert "could not be recorded" in state["saga_reason"]
    assert (await orchestrator.get(saga_id)).state.status is SagaStatus.RUNNING
    assert services.calls("authorize") == services.calls("capture") == []

    # the next invocation in the session (the ledger writable again) still applies the veto
    session.rebind(vetoing(orchestrator, leading=False))
    await session.run("and now?")
    state = await session.state()
    stored = (await orchestrator.get(saga_id)).state
    assert stored.status is SagaStatus.COMPENSATED
    assert stored.reason == REASON
    assert state["saga_status"] == "compensated"
    assert services.calls("authorize") == services.calls("capture") == []


# -- a ledger that cannot create a saga leased ---------------------------------------------


class _Unleasable:
    """A ledger with every operation but ``create_leased``."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "create_leased":
            raise AttributeError(name)
        return getattr(self._inner, name)


async def test_an_agent_is_refused_a_ledger_that_would_create_its_saga_free(
    store: Store, app: CommerceApp, clock: FakeClock, services: CommerceServices
) -> None:
    # Created free, the saga could be claimed by any worker and run past a model stage that
    # has yet to decide: the agent's submission is refused before anything is written.
    agent_orch = Orchestrator(_Unleasable(store), app, clock=clock, owner="agent")  # type: ignore[arg-type]
    session = Session(vetoing(agent_orch, leading=False))
    with pytest.raises(StoreError, match="cannot create a saga leased"):
        await session.run()
    assert await store.list_sagas() == []
    assert forward_calls(services) == []
