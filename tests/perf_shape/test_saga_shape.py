"""The shape of the work a saga costs on SQLite: commits and statements, counted, never timed.

An in-process ``execute`` of a 3-step saga costs four commits: its creation with the first
step's intent (the saga is leased to this process as it is created), one intent per later
step (each carrying the previous step's outcome), and the completion (which also frees the
lease). A transaction alone in its group opens no savepoint.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, model_validator

from pivotal import Catalogue, Orchestrator, SagaStatus, SQLiteStore, StepContext, parse_plan
from pivotal.clock import FakeClock
from pivotal.declarations.plan import Plan
from pivotal.declarations.policy import ApprovalRequirement
from pivotal.hooks import Point
from pivotal.operations.worker import Sweeper
from pivotal.testing import CrashAt, CrashSite, SimulatedCrash

TTL = 30.0


class Item(BaseModel):
    n: int = 0


def three_steps(gate: asyncio.Event | None = None, reached: asyncio.Event | None = None) -> Any:
    """A catalogue of one compensable no-op step; with ``gate``, step 1 waits for it."""
    catalogue = Catalogue("shape")

    async def undo(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo)
    async def noop(args: Item, ctx: StepContext) -> dict[str, int]:
        if gate is not None and reached is not None and args.n == 1:
            reached.set()
            await gate.wait()
        return {"n": args.n}

    return catalogue


def plan_of(n: int = 3) -> Plan:
    return parse_plan(
        {"catalogue": "shape", "steps": [{"name": "noop", "args": {"n": i}} for i in range(n)]}
    )


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "ledger.db") as store:
        yield store


class Statements:
    """Counts the statements the writer runs (sqlite3's trace callback, on its thread)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, store: SQLiteStore, on: bool) -> None:
        callback = self.seen.append if on else None
        await store._call(lambda conn: conn.set_trace_callback(callback))


async def test_an_executed_three_step_saga_costs_four_commits(ledger: SQLiteStore) -> None:
    orch = Orchestrator(ledger, three_steps(), clock=FakeClock(), rng=random.Random(0))
    await orch.execute(plan_of(), saga_id="warm")  # migrations and caches out of the way
    statements = Statements()
    await statements(ledger, True)
    commits = ledger.writer.commits
    state = await orch.execute(plan_of(), saga_id="s")
    await statements(ledger, False)

    assert state.status is SagaStatus.COMPLETED
    assert ledger.writer.commits - commits == 4
    begun = [s for s in statements.seen if s.startswith("BEGIN")]
    assert len(begun) == 4
    assert not [s for s in statements.seen if s.startswith(("SAVEPOINT", "RELEASE"))]
    # no claim and no release of their own: they ride on the creation and the completion
    assert not [s for s in statements.seen if "lease_token = ?" in s and "UPDATE" in s]


async def test_a_group_of_concurrent_sagas_shares_commits(ledger: SQLiteStore) -> None:
    orch = Orchestrator(ledger, three_steps(), clock=FakeClock(), rng=random.Random(0))
    commits = ledger.writer.commits
    states = await asyncio.gather(*(orch.execute(plan_of(), saga_id=f"s{n}") for n in range(32)))
    assert {s.status for s in states} == {SagaStatus.COMPLETED}
    assert ledger.writer.commits - commits <= 4 * 32  # never more than one at a time
    for n in range(32):
        owner, _, expires = await ledger.lease_of(f"s{n}") or (None, 0, None)
        assert owner is None
        assert expires is None


async def test_a_saga_run_in_process_holds_its_lease_and_frees_it_at_the_end(
    ledger: SQLiteStore,
) -> None:
    clock = FakeClock()
    gate, reached = asyncio.Event(), asyncio.Event()
    orch = Orchestrator(ledger, three_steps(gate, reached), clock=clock, owner="here")
    other = Orchestrator(ledger, three_steps(), clock=clock, owner="there")
    running = asyncio.create_task(orch.execute(plan_of(), saga_id="s"))
    await reached.wait()

    owner, epoch, _ = await ledger.lease_of("s") or (None, 0, None)
    assert (owner, epoch) == ("here", 1)  # leased with its creation, at epoch 1
    assert await ledger.claim("s", "there", TTL, clock.now()) is None
    assert await ledger.claim_next("there", TTL, clock.now(), 10) == []
    assert "s" in orch.leases.held
    del other

    gate.set()
    state = await running
    assert state.status is SagaStatus.COMPLETED
    owner, epoch, expires = await ledger.lease_of("s") or ("?", 0, 0.0)
    assert (owner, epoch, expires) == (None, 1, None)
    assert orch.leases.held == {}
    assert await ledger.claim_next("there", TTL, clock.now(), 10) == []  # nothing left to do


async def test_a_saga_that_waits_for_approval_frees_its_lease(ledger: SQLiteStore) -> None:
    catalogue = Catalogue("shape", approval=lambda step, args, plan: ApprovalRequirement("big"))

    async def undo(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo)
    async def noop(args: Item, ctx: StepContext) -> None:
        return None

    @catalogue.pivot()
    async def charge(args: Item, ctx: StepContext) -> None:
        return None

    orch = Orchestrator(ledger, catalogue, clock=FakeClock(), owner="here")
    plan = parse_plan({"catalogue": "shape", "steps": [{"name": "noop"}, {"name": "charge"}]})
    commits = ledger.writer.commits
    state = await orch.execute(plan, saga_id="s")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert ledger.writer.commits - commits == 2  # create with intent, approval request
    owner, _, _ = await ledger.lease_of("s") or ("?", 0, None)
    assert owner is None
    assert orch.leases.held == {}

    state = await orch.approve("s", "ann")
    assert state.status is SagaStatus.COMPLETED
    owner, _, _ = await ledger.lease_of("s") or ("?", 0, None)
    assert owner is None


async def test_a_crash_mid_way_leaves_a_lease_that_expires_and_is_recovered(
    ledger: SQLiteStore,
) -> None:
    clock = FakeClock()
    dying = Orchestrator(
        ledger,
        three_steps(),
        clock=clock,
        owner="dying",
        lease_ttl=TTL,
        hook=CrashAt(CrashSite(Point.AFTER_INTENT, 1)),
    )
    with pytest.raises(SimulatedCrash):
        await dying.execute(plan_of(), saga_id="s")
    assert dying.leases.held == {}  # the process is gone: nobody renews the lease

    owner, epoch, _ = await ledger.lease_of("s") or (None, 0, None)
    assert (owner, epoch) == ("dying", 1)
    heir = Orchestrator(ledger, three_steps(), clock=clock, owner="heir", lease_ttl=TTL)
    assert await ledger.claim_next("heir", TTL, clock.now(), 10) == []  # still leased

    clock.advance(TTL + 1)
    report = await Sweeper(heir).sweep()
    assert "s" in report.leases_recovered
    state = (await heir.get("s")).state
    assert state.status in (SagaStatus.COMPLETED, SagaStatus.RUNNING)
    if state.status is SagaStatus.RUNNING:  # the sweep freed it: a run finishes it
        state = await heir.run("s")
    assert state.status is SagaStatus.COMPLETED
    owner, epoch, _ = await ledger.lease_of("s") or ("?", 0, None)
    assert owner is None
    assert epoch > 1
    assert await heir.replayed("s") == state


class Counted(BaseModel):
    """Arguments that count how often a model of them is made."""

    n: int = 0
    made: ClassVar[list[int]] = []

    @model_validator(mode="after")
    def count(self) -> Counted:
        Counted.made.append(self.n)
        return self


async def test_execute_parses_each_calls_arguments_once(ledger: SQLiteStore) -> None:
    """The arguments the validator parsed are the ones the first pass hands to the steps; a
    later pass (after a crash, an approval) parses them again from the plan."""
    catalogue = Catalogue("shape")
    seen: list[Counted] = []

    async def undo(args: Counted, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo)
    async def noop(args: Counted, ctx: StepContext) -> None:
        seen.append(args)
        if args.n == 1 and len(seen) == 2:
            raise SimulatedCrash("after step 1's call")

    Counted.made.clear()
    clock = FakeClock()
    orch = Orchestrator(ledger, catalogue, clock=clock, lease_ttl=TTL)
    with pytest.raises(SimulatedCrash):
        await orch.execute(plan_of(), saga_id="s")
    assert Counted.made == [0, 1, 2]  # by the validator only
    assert [a.n for a in seen] == [0, 1]

    clock.advance(TTL + 1)  # the crashed pass's lease expires
    later = Orchestrator(ledger, catalogue, clock=clock, lease_ttl=TTL)
    state = await later.execute(plan_of(), saga_id="s")  # the same plan: it goes on
    assert state.status is SagaStatus.COMPLETED
    assert [a.n for a in seen] == [0, 1, 1, 2]
