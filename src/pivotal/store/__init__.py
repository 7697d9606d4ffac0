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


def open_store(url: str) -> Store:
    """A store for ``url``: ``sqlite:///path.db``, ``sqlite:///:memory:`` or a bare path."""
    if url.startswith("sqlite:///"):
        return SQLiteStore(url.removeprefix("sqlite:///"))
    if url.startswith(("postgres://", "postgresql://")):
        raise StoreError("PostgreSQL ledgers are not available in this version")
    if "://" in url:
        raise StoreError(f"unsupported ledger URL {url!r}; use sqlite:///path.db")
    return SQLiteStore(url)
