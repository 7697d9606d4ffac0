"""Whether a (frozen) process keeps a write transaction open, so a test freezes it elsewhere."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg


def sqlite_write_locked(path: Path) -> bool:
    conn = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
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
