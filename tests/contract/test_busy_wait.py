"""The SQLite writer begins its transaction while another process may hold the write lock
(a server beside its worker): it asks again after short pauses, within the same bound as
SQLite's own busy_timeout would wait; the write connection has none of its own."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pivotal.store import writer


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA busy_timeout = 0")  # as the store's write connection
    return conn


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "busy.db"
    with connect(path) as conn:
        conn.execute("CREATE TABLE t (n INTEGER)")
    return path


def test_the_writer_gets_the_lock_once_the_other_process_lets_it_go(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other, mine = connect(ledger), connect(ledger)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (1)")
    pauses: list[float] = []

    def pause(seconds: float) -> None:  # the other process commits while this one waits
        pauses.append(seconds)
        if len(pauses) == 3:
            other.execute("COMMIT")

    monkeypatch.setattr(writer.time, "sleep", pause)
    writer.begin(mine)

    assert mine.in_transaction
    assert len(pauses) == 3  # asked again after each pause, until the lock was free
    assert all(p <= writer.BUSY_MOST * 1.5 for p in pauses)  # short steps, not SQLite's
    assert mine.execute("SELECT n FROM t").fetchall() == [(1,)]
    mine.execute("COMMIT")


def test_a_lock_held_past_the_bound_is_database_is_locked(
    ledger: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other, mine = connect(ledger), connect(ledger)
    other.execute("BEGIN IMMEDIATE")
    clock = iter(range(0, 10_000, 1))  # a second per look: the bound of 5 s runs out
    monkeypatch.setattr(writer.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(writer.time, "sleep", lambda seconds: None)

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        writer.begin(mine, timeout=5)

    assert not mine.in_transaction
    other.execute("ROLLBACK")


def test_another_error_is_not_waited_for(tmp_path: Path) -> None:
    conn = connect(tmp_path / "other.db")
    conn.execute("BEGIN")  # already in a transaction: not a lock to wait for
    with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
        writer.begin(conn)


async def test_the_stores_write_connection_waits_its_own_way(tmp_path: Path) -> None:
    from pivotal.store import SQLiteStore

    store = SQLiteStore(tmp_path / "ledger.db")
    await store.open()
    try:
        timeouts = await store._call(lambda c: c.execute("PRAGMA busy_timeout").fetchone())
        assert timeouts == (0,)
        assert store._reader is not None
        assert store._reader.execute("PRAGMA busy_timeout").fetchone() == (10000,)
    finally:
        await store.close()
