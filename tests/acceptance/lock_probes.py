"""Whether a (frozen) process keeps a write transaction open, so a test freezes it elsewhere."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg

from pivotal.testing.realstop import sqlite_write_locked

__all__ = ["postgres_sagas_locked", "provider_call_open", "sqlite_write_locked"]


def provider_call_open(path: Path, pid: int) -> bool:
    """Whether process ``pid`` is inside a call of the simulated providers (begun, not ended).

    A process frozen mid-call and thawed after another took its saga over finishes that call
    while the new holder makes its own: two calls of one key in flight, which no lease can
    prevent (a paused process is the case fencing tokens at the provider would cover)."""
    conn = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    try:
        row = conn.execute(
            "SELECT COUNT(*) FROM calls WHERE pid = ? AND ended IS NULL", (pid,)
        ).fetchone()
        return bool(row[0])
    finally:
        conn.close()


def postgres_sagas_locked(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '200ms'")
        try:
            with conn.transaction():
                conn.execute("SELECT 1 FROM sagas FOR UPDATE")
        except psycopg.errors.LockNotAvailable:
            return True
    return False
