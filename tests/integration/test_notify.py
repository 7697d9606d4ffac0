"""PostgreSQL wakes an idle worker with LISTEN/NOTIFY instead of waiting for its next poll."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from pivotal import Orchestrator, Plan, SagaStatus, SystemClock
from pivotal.examples.commerce import CommerceApp
from pivotal.store.postgres import PostgresStore
from pivotal.worker import Worker, WorkerConfig

POLL = 30.0  # far longer than the test may take: only a notification can wake the worker


async def status(store: PostgresStore, saga_id: str) -> SagaStatus | None:
    stored = await store.load(saga_id)
    return None if stored is None else stored.state.status


async def test_a_new_saga_wakes_an_idle_worker(
    postgres_url: str, app: CommerceApp, checkout_plan: Callable[..., Plan]
) -> None:
    plan = checkout_plan("n-1")
    async with PostgresStore(postgres_url) as worker_store, PostgresStore(postgres_url) as other:
        worker = Worker(
            Orchestrator(worker_store, app, clock=SystemClock(), owner="idle"),
            WorkerConfig(poll_interval=POLL, sweep_interval=POLL),
        )
        running = asyncio.create_task(worker.run())
        await asyncio.sleep(0.5)  # the worker has found nothing and is waiting

        started = time.monotonic()
        await Orchestrator(other, app).submit(plan, saga_id="n-1")
        async with asyncio.timeout(10):
            while await status(other, "n-1") is not SagaStatus.COMPLETED:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        waited = time.monotonic() - started

        worker.stop()
        await running
    assert waited < 5, f"the worker took {waited:.1f}s: it was not woken by the notification"
    assert worker.stats.finished == {"completed": 1}
