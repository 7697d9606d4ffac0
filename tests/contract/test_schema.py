"""Schema versions: migrations apply once; an unknown or missing schema is refused clearly."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pivotal import SchemaMismatch, SQLiteStore
from pivotal.store.postgres import PostgresStore
from pivotal.store.schema import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS


async def test_sqlite_migrates_on_open_and_only_once(tmp_path: Path) -> None:
    for _ in range(2):
        async with SQLiteStore(tmp_path / "ledger.db"):
            pass
    versions = sqlite3.connect(tmp_path / "ledger.db").execute(
        "SELECT version FROM schema_version ORDER BY version"
    )
    assert [v for (v,) in versions] == list(range(1, len(SQLITE_MIGRATIONS) + 1))


async def test_sqlite_refuses_a_newer_schema(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "ledger.db"):
        pass
    db = sqlite3.connect(tmp_path / "ledger.db")
    db.execute("INSERT INTO schema_version (version) VALUES (999)")
    db.commit()
    with pytest.raises(SchemaMismatch, match="newer than this Pivotal knows"):
        await SQLiteStore(tmp_path / "ledger.db").open()


async def test_a_new_sqlite_ledger_has_small_pages_and_an_older_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    """A commit writes every page it changed whole; a new ledger's pages are 1 KiB. The
    page size of a ledger made before is fixed in its file: it opens and works as it is."""
    async with SQLiteStore(tmp_path / "new.db"):
        pass
    older = tmp_path / "older.db"
    made = sqlite3.connect(older)
    made.execute("PRAGMA page_size = 4096")
    made.execute("PRAGMA journal_mode = WAL")  # the first write fixes the page size
    made.close()
    async with SQLiteStore(older) as store:
        assert await store.list_sagas(None, 10) == []

    def page_size(path: Path) -> int:
        with sqlite3.connect(path) as db:
            return int(db.execute("PRAGMA page_size").fetchone()[0])

    assert page_size(tmp_path / "new.db") == 1024
    assert page_size(older) == 4096


async def test_postgres_refuses_an_unmigrated_database(postgres_empty_url: str) -> None:
    with pytest.raises(SchemaMismatch, match="run `pivotal migrate`"):
        await PostgresStore(postgres_empty_url).open()


async def test_postgres_migrate_is_idempotent_and_refuses_newer(postgres_empty_url: str) -> None:
    store = PostgresStore(postgres_empty_url, migrate=True)
    await store.open()
    assert await store.migrate() == (len(POSTGRES_MIGRATIONS), len(POSTGRES_MIGRATIONS))
    await store.close()
    async with PostgresStore(postgres_empty_url):  # now it starts without migrating
        pass
    with psycopg.connect(postgres_empty_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version (version) VALUES (999)")
    with pytest.raises(SchemaMismatch, match="newer than this Pivotal knows"):
        await PostgresStore(postgres_empty_url).open()


async def test_sqlite_keeps_the_sagas_counts_from_the_sagas_a_ledger_had(
    tmp_path: Path, app: Any, checkout_plan: Any
) -> None:
    """Migration 16 counts the sagas there are; its triggers keep the counts as sagas are
    created, change status and are deleted; the gauges read them, not the sagas."""
    from pivotal import Orchestrator
    from pivotal.store.queries import SQLITE

    path = tmp_path / "ledger.db"
    async with SQLiteStore(path) as store:
        orchestrator = Orchestrator(store, app)
        for n in range(3):
            await orchestrator.submit(checkout_plan(f"o-{n}"), saga_id=f"s{n}")
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(  # the ledger as it was before migration 16, with its sagas
        "DROP TABLE saga_counts; DROP TRIGGER saga_counts_created; "
        "DROP TRIGGER saga_counts_moved; DROP TRIGGER saga_counts_deleted; "
        "DROP TABLE exposure; DROP INDEX tokens_person; ALTER TABLE tokens DROP COLUMN person; "
        "DROP TABLE saved_searches; "
        "DELETE FROM schema_version WHERE version >= 16;"
    )

    async with SQLiteStore(path) as store:
        assert dict((await store.ops_snapshot(0.0)).sagas_by_status) == {"submitted": 3}
    db.execute("UPDATE sagas SET status = 'completed' WHERE saga_id = 's0'")
    db.execute("UPDATE sagas SET reason = 'not a status change' WHERE saga_id = 's1'")
    db.execute("DELETE FROM sagas WHERE saga_id = 's2'")  # no foreign keys on this link
    async with SQLiteStore(path) as store:
        counts = dict((await store.ops_snapshot(0.0)).sagas_by_status)
    assert counts == {"submitted": 1, "completed": 1}
    plan = db.execute(f"EXPLAIN QUERY PLAN {SQLITE.sagas_by_status}").fetchall()
    assert "sagas " not in " ".join(str(step[-1]) for step in plan) + " "
