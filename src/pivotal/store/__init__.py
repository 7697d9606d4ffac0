"""Ledgers: the store protocol and its backends."""

from __future__ import annotations

from pivotal.errors import StoreError
from pivotal.store.base import DeadLetter, PendingApproval, SagaSummary, Store, StoredSaga
from pivotal.store.sqlite import SQLiteStore

__all__ = [
    "DeadLetter",
    "PendingApproval",
    "SQLiteStore",
    "SagaSummary",
    "Store",
    "StoredSaga",
    "open_store",
]


def open_store(url: str, *, migrate: bool = False) -> Store:
    """A store for ``url``: ``sqlite:///path.db``, ``sqlite:///:memory:``, a bare path, or
    ``postgresql://user@host/db``. SQLite applies migrations on open; PostgreSQL does when
    ``migrate`` is true and otherwise refuses a schema it does not match."""
    if url.startswith("sqlite:///"):
        return SQLiteStore(url.removeprefix("sqlite:///"))
    if url.startswith(("postgres://", "postgresql://")):
        from pivotal.store.postgres import PostgresStore

        return PostgresStore(url, migrate=migrate)
    if "://" in url:
        raise StoreError(
            f"unsupported ledger URL {url!r}; use sqlite:///path.db or postgresql://..."
        )
    return SQLiteStore(url)
