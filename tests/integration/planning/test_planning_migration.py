"""A ledger made before planning existed gains the planning tables and keeps its sagas; runs
recorded before migration 3 are numbered in order. On SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import psycopg
import pytest

from pivotal import Event, Orchestrator, Plan, SagaState, StoreError
from pivotal.planning import (
    PlanningMode,
    PlanningRun,
    PlanRequest,
    RulePlanner,
    commerce_rules,
    propose_plan,
)
from pivotal.store import postgres as postgres_module
from pivotal.store import queries as q
from pivotal.store import rows
from pivotal.store import sqlite as sqlite_module
from pivotal.store.postgres import PostgresStore
from pivotal.store.queries import RUN_COLUMNS
from pivotal.store.schema import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS
from pivotal.store.sql import SQLStore, Stmt
from pivotal.store.sqlite import SQLiteStore

OpenAt = Callable[[int | None], AbstractAsyncContextManager[SQLStore]]


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_at(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> OpenAt:
    """Opens one ledger with the first ``version`` migrations applied (None: all of them)."""
    if request.param == "sqlite":
        path = tmp_path / "old.db"

        @asynccontextmanager
        async def open_sqlite(version: int | None) -> AsyncIterator[SQLStore]:
            with monkeypatch.context() as patch:
                patch.setattr(sqlite_module, "SQLITE_MIGRATIONS", SQLITE_MIGRATIONS[:version])
                async with SQLiteStore(path) as store:
                    yield store

        return open_sqlite

    url = request.getfixturevalue("postgres_url")  # a migrated clone: empty it
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")

    @asynccontextmanager
    async def open_postgres(version: int | None) -> AsyncIterator[SQLStore]:
        with monkeypatch.context() as patch:
            patch.setattr(postgres_module, "POSTGRES_MIGRATIONS", POSTGRES_MIGRATIONS[:version])
            async with PostgresStore(url, migrate=True) as store:
                yield store

    return open_postgres


async def schema_version(store: SQLStore) -> int:
    return int((await store._fetch("SELECT MAX(version) FROM schema_version"))[0][0])


async def create_as_version_1(
    old: SQLStore, state: SagaState, plan: Plan, events: list[Event]
) -> None:
    """Write a saga with the columns the first schema had (as the Pivotal of then did)."""
    columns = (
        "saga_id, catalogue, plan, plan_digest, provenance_ref, status, reason, version, "
        "outcomes, created_at, updated_at, wake_at"
    )
    saga = Stmt(
        f"INSERT INTO sagas ({columns}) VALUES ({', '.join('?' * 12)})",
        (
            state.saga_id,
            state.catalogue,
            plan.to_json(),
            state.plan_digest,
            state.provenance_ref,
            state.status.value,
            state.reason,
            state.version,
            state.outcomes,
            state.created_at,
            state.updated_at,
            state.wake_at,
        ),
    )
    await old._batch(
        [
            Stmt(q.INSERT_PROVENANCE, (state.provenance_ref, plan.provenance.model_dump_json())),
            saga,
            Stmt(  # the steps table of version 1: its first 15 columns
                f"INSERT INTO steps ({q.STEP_COLUMNS.split(', doubt_until', 1)[0]}) "
                f"VALUES ({', '.join('?' * 15)})",
                [rows.step_row(state.saga_id, r)[:15] for r in state.steps],
                many=True,
            ),
            Stmt(
                q.INSERT_EVENT,
                [rows.event_row(state.saga_id, state.provenance_ref, e) for e in events],
                many=True,
            ),
        ]
    )


async def test_an_older_ledger_is_upgraded_in_place(ledger_at, app, clock, fulfilment_plan) -> None:
    async with SQLiteStore(":memory:") as scratch:  # the saga as an older Pivotal wrote it
        plan = fulfilment_plan()
        await Orchestrator(scratch, app, clock=clock).submit(plan, saga_id="kept")
        stored, events = await scratch.load("kept"), await scratch.events("kept")
    assert stored is not None
    async with ledger_at(1) as old:
        await create_as_version_1(old, stored.state, plan, events)
        with pytest.raises(StoreError, match=r"no such table|does not exist"):
            await old.escalations()

    async with ledger_at(None) as new:
        assert (await new.load("kept")) is not None
        assert await new.runs(PlanningMode.LIVE) == []
        assert await schema_version(new) == len(SQLITE_MIGRATIONS) == len(POSTGRES_MIGRATIONS)


async def test_runs_recorded_before_numbering_keep_their_order(ledger_at, app, clock) -> None:
    request = PlanRequest(
        text="ship it",
        catalogue="fulfilment",
        context={"order_id": "4471", "amount": "120", "sku": "lamp"},
    )

    async def planned(run_id: str) -> PlanningRun:
        planner, catalogue = RulePlanner(commerce_rules()), app.catalogue("fulfilment")
        run = await propose_plan(request, planner, catalogue, run_id=run_id, clock=clock)
        return run.model_copy(update={"mode": PlanningMode.LIVE})

    tied_b, tied_a = await planned("run-b"), await planned("run-a")  # same created_at
    clock.advance(5)
    late = await planned("run-late")
    async with ledger_at(2) as old:  # recorded as before migration 3: no seq column
        for run in (late, tied_b, tied_a):
            insert_run, *attempts = SQLStore.run_statements(run)
            marks = ", ".join("?" * len(insert_run.params))
            sql = f"INSERT INTO planning_runs ({RUN_COLUMNS}) VALUES ({marks})"
            legacy = Stmt(sql, insert_run.params)
            await old._batch([legacy, *attempts])

    async with ledger_at(None) as new:
        ledger = new
        assert await ledger.runs(PlanningMode.LIVE) == [tied_a, tied_b, late]
        after = (await planned("run-0")).model_copy(update={"created_at": tied_a.created_at})
        await ledger.record_run(after)  # ties after the older runs: recorded later
        assert [r.run_id for r in await ledger.runs(PlanningMode.LIVE)] == [
            "run-a",
            "run-b",
            "run-0",
            "run-late",
        ]
