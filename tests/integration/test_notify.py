"""PostgreSQL wakes an idle worker with LISTEN/NOTIFY instead of waiting for its next poll."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import psycopg
import pytest

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus
from pivotal.examples.commerce import CommerceApp
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.store.postgres import PostgresStore

# Longer than the test may ever run: once idle, only a notification can wake the worker.
POLL = 3600.0
BOUND = 45.0  # a safety net against a hang (under the 60 s test timeout), never measured


async def status(store: PostgresStore, saga_id: str) -> SagaStatus | None:
    stored = await store.load(saga_id)
    return None if stored is None else stored.state.status


async def listening(url: str) -> bool:
    """Whether some session of the database has run its LISTEN and now waits, idle."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state = 'idle' AND query LIKE 'LISTEN %'"
        )
        row = await cur.fetchone()
    return row is not None and row[0] > 0


async def test_a_new_saga_wakes_an_idle_worker(
    postgres_url: str,
    app: CommerceApp,
    checkout_plan: Callable[..., Plan],
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = checkout_plan("n-1")
    async with PostgresStore(postgres_url) as worker_store, PostgresStore(postgres_url) as other:
        waits: list[str] = []  # how each of the worker's waits for work ended
        wait_for_work = worker_store.wait_for_work

        async def recording(seconds: float) -> None:
            try:
                await wait_for_work(seconds)
            except asyncio.CancelledError:
                waits.append("cancelled")
                raise
            waits.append("woken")

        monkeypatch.setattr(worker_store, "wait_for_work", recording)
        worker = Worker(
            Orchestrator(worker_store, app, clock=clock, owner="idle"),
            WorkerConfig(poll_interval=POLL, sweep_interval=POLL),
        )
        running = asyncio.create_task(worker.run())
        async with asyncio.timeout(BOUND):
            # The worker found nothing, and listens: it will not look again for an hour.
            while not await listening(postgres_url):  # noqa: ASYNC110 (state in the database)
                await asyncio.sleep(0.02)
        assert waits == []  # still waiting

        await Orchestrator(other, app, clock=clock).submit(plan, saga_id="n-1")
        async with asyncio.timeout(BOUND):
            while await status(other, "n-1") is not SagaStatus.COMPLETED:  # noqa: ASYNC110
                await asyncio.sleep(0.02)

        worker.stop()
        await asyncio.wait_for(running, BOUND)
    assert waits[0] == "woken"  # the wait ended on the notification, an hour before its poll
    assert worker.stats.finished == {"completed": 1}
    assert worker.stats.runs == 1
