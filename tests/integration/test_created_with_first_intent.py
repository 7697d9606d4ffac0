"""``execute`` creates a saga with the first commit of its pass (its first intent, typically).

Until that commit nothing that could take effect was called, so a process that dies before
it leaves nothing behind and was never acknowledged; once it lands, the saga is in the
ledger leased to this process. An id that exists already is never written, and a lease that
another process holds on it is never touched.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    Orchestrator,
    SagaConflict,
    SagaStatus,
    SQLiteStore,
    StepContext,
    parse_plan,
)
from pivotal.clock import FakeClock
from pivotal.declarations.plan import Plan
from pivotal.declarations.policy import ApprovalRequirement
from pivotal.engine import RunOptions
from pivotal.errors import LeaseLost, StoreError
from pivotal.hooks import Point
from pivotal.operations.worker import Sweeper
from pivotal.sagas.state import ApprovalStatus, StepStatus
from pivotal.testing import CrashAt, CrashSite, SimulatedCrash

TTL = 30.0


class Item(BaseModel):
    n: int = 0


class Effects:
    """What the provider saw: one entry per call, by idempotency key."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate: asyncio.Event | None = None
        self.reached = asyncio.Event()

    def catalogue(self, approval: bool = False) -> Catalogue:
        policy = (lambda step, args, plan: ApprovalRequirement("big")) if approval else None
        catalogue = Catalogue("first", approval=policy)

        async def undo(args: Item, result: Any, ctx: StepContext) -> None:
            self.calls.append(f"undo {ctx.key}")

        @catalogue.compensable(undo=undo)
        async def reserve(args: Item, ctx: StepContext) -> dict[str, int]:
            self.calls.append(ctx.key)
            if self.gate is not None:
                self.reached.set()
                await self.gate.wait()
            return {"n": args.n}

        @catalogue.pivot()
        async def charge(args: Item, ctx: StepContext) -> None:
            self.calls.append(ctx.key)

        return catalogue


def two_reserves(n: int = 0) -> Plan:
    steps = [{"name": "reserve", "args": {"n": n}}, {"name": "reserve", "args": {"n": n + 1}}]
    return parse_plan({"catalogue": "first", "steps": steps})


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "ledger.db") as store:
        yield store


async def crash_executing(
    ledger: SQLiteStore, effects: Effects, clock: FakeClock, point: Point
) -> Orchestrator:
    """``execute`` saga "s" in a process that dies at ``point`` of its first step."""
    dying = Orchestrator(
        ledger,
        effects.catalogue(),
        clock=clock,
        owner="dying",
        lease_ttl=TTL,
        hook=CrashAt(CrashSite(point, 0)),
    )
    with pytest.raises(SimulatedCrash):
        await dying.execute(two_reserves(), saga_id="s")
    return dying


async def test_a_crash_before_the_first_intent_leaves_nothing_and_a_retry_runs_it_once(
    ledger: SQLiteStore,
) -> None:
    effects, clock = Effects(), FakeClock()
    dying = await crash_executing(ledger, effects, clock, Point.BEFORE_INTENT)
    assert await ledger.load("s") is None  # never acknowledged, never written
    assert effects.calls == []
    assert dying.leases.held == {}

    again = Orchestrator(ledger, effects.catalogue(), clock=clock, owner="again")
    state = await again.execute(two_reserves(), saga_id="s")
    assert state.status is SagaStatus.COMPLETED
    assert effects.calls == ["s:0", "s:1"]
    assert await again.replayed("s") == state


async def test_a_crash_after_the_first_intent_leaves_the_saga_leased_and_recoverable(
    ledger: SQLiteStore,
) -> None:
    effects, clock = Effects(), FakeClock()
    await crash_executing(ledger, effects, clock, Point.AFTER_INTENT)
    stored = await ledger.load("s")
    assert stored is not None
    assert [r.status for r in stored.state.steps] == [StepStatus.STARTED, StepStatus.PENDING]
    assert [e.type.value for e in await ledger.events("s")] == ["saga_submitted", "step_started"]
    owner, epoch, _ = await ledger.lease_of("s") or (None, 0, None)
    assert (owner, epoch) == ("dying", 1)

    heir = Orchestrator(ledger, effects.catalogue(), clock=clock, owner="heir", lease_ttl=TTL)
    assert await ledger.claim_next("heir", TTL, clock.now(), 10) == []  # still leased
    clock.advance(TTL + 1)
    await Sweeper(heir).sweep()
    state = (await heir.get("s")).state
    if state.status is not SagaStatus.COMPLETED:
        state = await heir.run("s")
    assert state.status is SagaStatus.COMPLETED
    # the interrupted attempt may have taken effect: repeated with the same key, never a new one
    assert set(effects.calls) == {"s:0", "s:1"}
    assert await heir.replayed("s") == state


async def test_executing_an_id_another_process_runs_never_touches_its_lease(
    ledger: SQLiteStore,
) -> None:
    effects, clock = Effects(), FakeClock()
    effects.gate = asyncio.Event()
    here = Orchestrator(ledger, effects.catalogue(), clock=clock, owner="here", lease_ttl=TTL)
    running = asyncio.create_task(here.execute(two_reserves(), saga_id="s"))
    await effects.reached.wait()
    leased = await ledger.lease_of("s")
    assert leased is not None
    assert leased[:2] == ("here", 1)

    there = Orchestrator(ledger, Effects().catalogue(), clock=clock, owner="there")
    with pytest.raises(LeaseLost):
        await there.execute(two_reserves(), saga_id="s")
    with pytest.raises(SagaConflict):
        await there.execute(two_reserves(n=5), saga_id="s")
    assert await ledger.lease_of("s") == leased  # same holder, epoch and expiry
    assert there.leases.held == {}

    effects.gate.set()
    state = await running
    assert state.status is SagaStatus.COMPLETED
    assert effects.calls == ["s:0", "s:1"]
    assert [e.seq for e in await ledger.events("s")] == list(range(1, state.version + 1))


async def test_executing_a_finished_saga_again_returns_it_without_running_anything(
    ledger: SQLiteStore,
) -> None:
    effects = Effects()
    orch = Orchestrator(ledger, effects.catalogue(), clock=FakeClock(), rng=random.Random(0))
    first = await orch.execute(two_reserves(), saga_id="s")
    again = await orch.execute(two_reserves(), saga_id="s")
    assert again.status is SagaStatus.COMPLETED
    assert again.version == first.version
    assert effects.calls == ["s:0", "s:1"]


async def test_a_first_step_that_waits_for_approval_is_created_free_and_pending(
    ledger: SQLiteStore,
) -> None:
    effects, clock = Effects(), FakeClock()
    orch = Orchestrator(ledger, effects.catalogue(approval=True), clock=clock, owner="here")
    plan = parse_plan({"catalogue": "first", "steps": [{"name": "charge"}]})
    commits = ledger.writer.commits
    state = await orch.execute(plan, saga_id="s")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert ledger.writer.commits - commits == 1  # created waiting: one commit, no lease taken
    owner, epoch, _ = await ledger.lease_of("s") or ("?", -1, None)
    assert (owner, epoch) == (None, 0)
    assert orch.leases.held == {}
    pending = await ledger.pending_approvals()
    assert [(p.saga_id, p.approval.status) for p in pending] == [("s", ApprovalStatus.PENDING)]
    assert [m.type for m in await ledger.messages(saga_id="s")] == ["approval.requested"]
    assert await orch.replayed("s") == (await orch.get("s")).state

    state = await orch.approve("s", "ann")
    assert state.status is SagaStatus.COMPLETED
    assert effects.calls == ["s:0"]


async def test_a_pass_paused_before_its_first_step_still_creates_the_saga(
    ledger: SQLiteStore,
) -> None:
    effects = Effects()
    orch = Orchestrator(ledger, effects.catalogue(), clock=FakeClock(), owner="here")
    options = RunOptions(owner="here", pause_before=lambda index: True)
    state = await orch.execute(two_reserves(), saga_id="s", options=options)
    assert state.status is SagaStatus.SUBMITTED
    stored = await ledger.load("s")
    assert stored is not None
    assert stored.state == state
    owner, _, _ = await ledger.lease_of("s") or ("?", 0, None)
    assert owner is None  # released when the pass ended
    assert effects.calls == []
    assert (await orch.run("s")).status is SagaStatus.COMPLETED


class RefusingStore(SQLiteStore):
    """A ledger whose creation fails; records every release it is asked for."""

    released: list[tuple[str, int]]

    async def create_leased(self, *args: Any, **kwargs: Any) -> int | None:
        raise StoreError("disk full")

    async def release(self, saga_id: str, epoch: int, error: str | None = None) -> None:
        self.released.append((saga_id, epoch))
        await super().release(saga_id, epoch, error)


async def test_a_failed_creation_raises_and_releases_nothing(tmp_path: Path) -> None:
    effects = Effects()
    async with RefusingStore(tmp_path / "ledger.db") as store:
        store.released = []
        orch = Orchestrator(store, effects.catalogue(), clock=FakeClock())
        with pytest.raises(StoreError, match="disk full"):
            await orch.execute(two_reserves(), saga_id="s")
        assert await store.load("s") is None
        assert store.released == []
        assert effects.calls == []
        assert orch.leases.held == {}
