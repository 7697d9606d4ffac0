"""Ledgers: the store protocol and its backends."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Literal

from pivotal.errors import StoreError
from pivotal.store.base import DeadLetter, PendingApproval, SagaSummary, Store, StoredSaga
from pivotal.store.schema import SQLITE_MIGRATIONS
from pivotal.store.sql import SQLStore
from pivotal.store.sqlite import SQLiteStore

__all__ = [
    "DeadLetter",
    "PendingApproval",
    "SQLiteStore",
    "SagaSummary",
    "Store",
    "StoredSaga",
    "count_rows",
    "migrate_ledger",
    "open_store",
    "sqlite_path",
]

POSTGRES_SCHEMES = ("postgres://", "postgresql://")
Counted = Literal["sagas", "escalations", "dead_letters"]


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite ledger URL (``sqlite:///path.db``, a bare path, or
    ``:memory:``); None for a ledger that is not a SQLite file."""
    if url.startswith("sqlite:///"):
        return url.removeprefix("sqlite:///")
    return None if "://" in url else url


def open_store(url: str, *, migrate: bool = False, create: bool = True) -> Store:
    """A store for ``url``: ``sqlite:///path.db``, ``sqlite:///:memory:``, a bare path, or
    ``postgresql://user@host/db``. SQLite applies migrations on open; PostgreSQL does when
    ``migrate`` is true and otherwise refuses a schema it does not match.

    ``create=False`` opens only a ledger that exists: a missing SQLite file is refused with
    ``LedgerNotFound`` rather than created (a PostgreSQL database is never created)."""
    if url.startswith(POSTGRES_SCHEMES):
        from pivotal.store.postgres import PostgresStore

        return PostgresStore(url, migrate=migrate)
    path = sqlite_path(url)
    if path is None:
        raise StoreError(
            f"unsupported ledger URL {url!r}; use sqlite:///path.db or postgresql://..."
        )
    return SQLiteStore(path, create=create)


async def count_rows(store: Store, table: Counted, status: str | None = None) -> int | None:
    """How many sagas, escalations or dead letters (with ``status``) the ledger holds;
    None when the store cannot count them cheaply (a store that is not SQL)."""
    if not isinstance(store, SQLStore):
        return None
    where, params = ("WHERE status = ?", (status,)) if status is not None else ("", ())
    found = await store._fetch(f"SELECT COUNT(*) FROM {table} {where}", params)
    return int(found[0][0])


async def migrate_ledger(url: str) -> tuple[int, int]:
    """Bring the ledger's schema up to date; return the (from, to) schema versions.

    A SQLite ledger is created if it does not exist (from version 0)."""
    if url.startswith(POSTGRES_SCHEMES):
        from pivotal.store.postgres import PostgresStore

        class Migrating(PostgresStore):
            versions = (0, 0)

            async def migrate(self) -> tuple[int, int]:
                self.versions = await super().migrate()
                return self.versions

        store = Migrating(url, migrate=True)
        async with store:
            return store.versions
    path = sqlite_path(url)
    before = _sqlite_version(path) if path not in (None, ":memory:") else 0
    async with open_store(url):
        return before, len(SQLITE_MIGRATIONS)


def _sqlite_version(path: str | None) -> int:
    """The schema version of a SQLite ledger file, read without changing it (0: none)."""
    if path is None or not Path(path).is_file():
        return 0
    uri = Path(path).absolute().as_uri() + "?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as conn:
            known = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            ).fetchone()
            if known is None:
                return 0
            return int(
                conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0]
            )
    except sqlite3.Error as exc:
        raise StoreError(f"sqlite ledger {path}: {exc}") from exc
