"""Schema versions: migrations apply once; an unknown or missing schema is refused clearly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
