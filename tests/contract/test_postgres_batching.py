"""Group commit on PostgreSQL: many sagas' write batches share one transaction.

Each batch is still fenced on its own and acknowledged only after the shared ``COMMIT``; a
refused fence fails only its own batch; a link lost mid-group fails exactly that group's
batches (or, with retries allowed, runs the group again) and never half-applies one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest
from contract_orders import open_order

from pivotal import FakeClock, LeaseLost, Orchestrator, Plan, StoreError
from pivotal.examples.commerce import CommerceApp
from pivotal.sagas.state import Event, EventType, SagaState, apply
from pivotal.store.postgres import PostgresStore

NOW = 1_800_000_000.0


def plan(order: str) -> Plan:
    return Plan.model_validate(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "name": "reserve_stock",
                    "args": {"order_id": order, "sku": "sku-1", "quantity": 1},
                },
                {"name": "charge_payment", "args": {"order_id": order, "amount": "10"}},
            ],
        }
    )


def started(state: SagaState) -> tuple[SagaState, Event]:
    """The saga's state after its first step's intent, and that event."""
    event = Event(
        type=EventType.STEP_STARTED,
        at=state.updated_at + 1,
        step=0,
        attempt=1,
        data={"key": f"{state.saga_id}:0"},
        seq=state.version + 1,
    )
    return apply(state, event), event


async def open_store(url: str, attempts: int = 3) -> PostgresStore:
    store = PostgresStore(url, attempts=attempts)
    await store.open()
    return store


@pytest.fixture
async def ledger(postgres_url: str) -> AsyncIterator[PostgresStore]:
    store = await open_store(postgres_url)
    yield store
    await store.close()


async def leased(store: PostgresStore, app: CommerceApp, n: int) -> list[tuple[SagaState, int]]:
    """``n`` submitted sagas, each claimed: (state, lease epoch)."""
    orch = Orchestrator(store, app, clock=FakeClock(NOW))
    found = []
    for i in range(n):
        open_order(app.services, f"o-{i}")  # the order plan() is for: 10 for one sku-1
        state = await orch.submit(plan(f"o-{i}"), saga_id=f"s{i}")
        epoch = await store.claim(state.saga_id, "w1", 30, NOW)
        assert epoch is not None
        found.append((state, epoch))
    return found


async def versions(store: PostgresStore, sagas: list[tuple[SagaState, int]]) -> list[int]:
    return [len(await store.events(state.saga_id)) for state, _ in sagas]


async def test_concurrent_commits_share_one_transaction(
    ledger: PostgresStore, app: CommerceApp
) -> None:
    sagas = await leased(ledger, app, 20)
    before = await versions(ledger, sagas)
    commits, batches = ledger._writer.commits, ledger._writer.batches

    async def commit(state: SagaState, epoch: int) -> None:
        after, event = started(state)
        await ledger.commit(state, after, [event], epoch)

    await asyncio.gather(*(commit(state, epoch) for state, epoch in sagas))

    assert ledger._writer.batches - batches == 20
    assert ledger._writer.commits - commits < 20  # batches went together
    assert await versions(ledger, sagas) == [n + 1 for n in before]
    for state, _ in sagas:
        loaded = await ledger.load(state.saga_id)
        assert loaded is not None
        assert loaded.state == started(state)[0]


async def test_a_refused_fence_fails_only_its_own_batch(
    ledger: PostgresStore, app: CommerceApp
) -> None:
    sagas = await leased(ledger, app, 8)
    before = await versions(ledger, sagas)
    stale = sagas[3][0].saga_id

    async def commit(state: SagaState, epoch: int) -> None:
        after, event = started(state)
        await ledger.commit(state, after, [event], epoch + (state.saga_id == stale))

    results = await asyncio.gather(
        *(commit(state, epoch) for state, epoch in sagas), return_exceptions=True
    )

    assert [isinstance(r, LeaseLost) for r in results] == [i == 3 for i in range(8)]
    assert [r for r in results if not isinstance(r, LeaseLost)] == [None] * 7
    assert await versions(ledger, sagas) == [n + (i != 3) for i, n in enumerate(before)]
    loaded = await ledger.load(stale)
    assert loaded is not None
    assert loaded.state == sagas[3][0]


async def test_a_refused_guard_in_a_group_keeps_the_others(
    ledger: PostgresStore, app: CommerceApp
) -> None:
    sagas = await leased(ledger, app, 4)
    orch = Orchestrator(ledger, app, clock=FakeClock(NOW))
    again = orch.submit(plan("o-0"), saga_id="s0")  # already there: its guard stops it
    fresh = [orch.submit(plan(f"o-{i}"), saga_id=f"new{i}") for i in range(4)]

    await asyncio.gather(again, *fresh)

    for i in range(4):
        assert await ledger.load(f"new{i}") is not None
    assert len(await ledger.events("s0")) == len(await ledger.events(sagas[1][0].saga_id))


async def _waiting_for_lock(url: str) -> int:
    """The backend of this database waiting for a lock (bounded; else the test fails)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(500):
            cur = await conn.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = await cur.fetchone()
            if row is not None:
                return int(row[0])
            await asyncio.sleep(0.01)
    pytest.fail("the group's transaction never waited for the lock")


@pytest.mark.parametrize("attempts", [1, 3])
async def test_a_link_killed_mid_group_fails_exactly_that_group(
    postgres_url: str, app: CommerceApp, attempts: int
) -> None:
    store = await open_store(postgres_url, attempts=attempts)
    try:
        sagas = await leased(store, app, 7)
        group, later = sagas[:6], sagas[6]
        before = await versions(store, sagas)
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as locker:
            # Hold one saga's row, so that the group's transaction stays in flight.
            await locker.execute("BEGIN")
            await locker.execute(
                "SELECT 1 FROM sagas WHERE saga_id = %s FOR UPDATE", (group[2][0].saga_id,)
            )

            async def commit(state: SagaState, epoch: int) -> None:
                after, event = started(state)
                await store.commit(state, after, [event], epoch)

            running = asyncio.gather(
                *(commit(state, epoch) for state, epoch in group), return_exceptions=True
            )
            pid = await _waiting_for_lock(postgres_url)
            queued = asyncio.ensure_future(commit(*later))  # waits for the next group
            await asyncio.sleep(0)
            await locker.execute("SELECT pg_terminate_backend(%s)", (pid,))
            if attempts > 1:
                await locker.execute("COMMIT")  # the group's next try may go on
            results = await running
            await queued  # the next group, on a fresh connection, lands
            if attempts == 1:
                await locker.execute("COMMIT")

        now = await versions(store, sagas)
        if attempts == 1:
            assert all(isinstance(r, StoreError) for r in results)
            assert now == [*before[:6], before[6] + 1]  # nothing of the group was kept
        else:
            assert results == [None] * 6  # run again on a fresh connection, landed once
            assert now == [n + 1 for n in before]
    finally:
        await store.close()


async def test_refused_groups_do_not_spoil_prepared_statements(
    ledger: PostgresStore, app: CommerceApp
) -> None:
    """A group cut short by an error leaves none of its statements half-prepared: the
    driver prepares a statement after a few uses, and the ones it was preparing when the
    server skipped the rest of the group must not be used later."""
    sagas = await leased(ledger, app, 12)
    for state, epoch in sagas:
        after, event = started(state)
        with pytest.raises(LeaseLost):
            await ledger.commit(state, after, [event], epoch + 1)
        await ledger.commit(state, after, [event], epoch)
    assert await versions(ledger, sagas) == [2] * 12
