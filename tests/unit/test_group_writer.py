"""Group commit: concurrent transactions share commits; a failure spoils only itself."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from pivotal.store.writer import GroupWriter


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (n INTEGER PRIMARY KEY)")
    return conn


async def test_concurrent_transactions_share_commits_and_fail_alone(tmp_path: Path) -> None:
    writer = GroupWriter(lambda: connect(tmp_path / "db"), name="test")
    await writer.call(lambda conn: None)  # connects

    def insert(n: int) -> object:
        def work(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
            if n == 13:
                raise ValueError("unlucky")
            return n

        return work

    results = await asyncio.gather(
        *(writer.transaction(insert(n)) for n in range(200)),  # type: ignore[arg-type]
        return_exceptions=True,
    )
    writer.stop()

    assert isinstance(results[13], ValueError)
    assert [r for r in results if not isinstance(r, BaseException)] == [
        n for n in range(200) if n != 13
    ]
    rows = [n for (n,) in sqlite3.connect(tmp_path / "db").execute("SELECT n FROM t ORDER BY n")]
    assert rows == [n for n in range(200) if n != 13]  # 13 rolled back to its savepoint only
    assert writer.transactions == 200
    assert writer.commits < 200  # queued transactions were committed together


async def test_a_failing_transaction_raises_and_the_writer_goes_on(tmp_path: Path) -> None:
    writer = GroupWriter(lambda: connect(tmp_path / "db"), name="test")
    with pytest.raises(sqlite3.OperationalError):
        await writer.transaction(lambda conn: conn.execute("INSERT INTO missing VALUES (1)"))
    assert await writer.transaction(lambda conn: 42) == 42
    writer.stop()
