"""Group commit: concurrent transactions share commits; a failure spoils only itself."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pivotal import FakeClock, Orchestrator, Plan, SQLiteStore, StoreError
from pivotal.examples.commerce import CommerceApp
from pivotal.store.primitives import Stmt
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


async def test_a_group_opens_savepoints_only_after_one_of_its_jobs_failed(tmp_path: Path) -> None:
    seen: list[str] = []

    def traced() -> sqlite3.Connection:
        conn = connect(tmp_path / "db")
        conn.set_trace_callback(seen.append)
        return conn

    writer = GroupWriter(traced, name="test")
    await writer.call(lambda conn: None)  # connects

    def insert(n: int, fail: bool = False) -> Callable[[sqlite3.Connection], int]:
        def work(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
            if fail:
                raise ValueError("refused")
            return n

        return work

    ok = await asyncio.gather(*(writer.transaction(insert(n)) for n in range(100)))
    assert ok == list(range(100))
    assert writer.commits < 100  # grouped ...
    assert not [s for s in seen if s.startswith("SAVEPOINT")]  # ... and no savepoint opened

    seen.clear()
    jobs = [writer.transaction(insert(n, fail=n == 150)) for n in range(100, 200)]
    results = await asyncio.gather(*jobs, return_exceptions=True)
    writer.stop()
    assert isinstance(results[50], ValueError)
    assert [r for r in results if not isinstance(r, BaseException)] == [
        n for n in range(100, 200) if n != 150
    ]
    assert [s for s in seen if s.startswith("SAVEPOINT")]  # the failing group ran again, careful
    rows = [n for (n,) in sqlite3.connect(tmp_path / "db").execute("SELECT n FROM t ORDER BY n")]
    assert rows == [n for n in range(200) if n != 150]


async def test_a_failing_transaction_raises_and_the_writer_goes_on(tmp_path: Path) -> None:
    writer = GroupWriter(lambda: connect(tmp_path / "db"), name="test")
    with pytest.raises(sqlite3.OperationalError):
        await writer.transaction(lambda conn: conn.execute("INSERT INTO missing VALUES (1)"))
    assert await writer.transaction(lambda conn: 42) == 42
    writer.stop()


# -- a transaction lost as a whole, a writer that dies: nobody waits for ever ---------------

BOUND = 10.0  # a safety net only: every wait below ends on an event, not on the clock


def put_row(n: int, size: int = 0) -> Callable[[sqlite3.Connection], int]:
    def work(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO blobs (n, data) VALUES (?, ?)", (n, b"x" * size))
        return n

    return work


async def queued_behind(
    writer: GroupWriter, works: list[Callable[[sqlite3.Connection], object]]
) -> list[asyncio.Task[Any]]:
    """Queue ``works`` as transactions while the writer is held, so they form one group."""
    gate = threading.Event()
    held = asyncio.ensure_future(writer.call(lambda conn: gate.wait(BOUND)))
    tasks = [asyncio.ensure_future(writer.transaction(work)) for work in works]
    await asyncio.sleep(0)  # one turn of the loop: every task has queued its transaction
    gate.set()
    assert await asyncio.wait_for(held, BOUND) is True
    return tasks


async def test_a_transaction_lost_as_a_whole_fails_its_group_and_the_writer_goes_on(
    tmp_path: Path,
) -> None:
    def connect_small() -> sqlite3.Connection:
        conn = connect(tmp_path / "db")
        conn.execute("CREATE TABLE IF NOT EXISTS blobs (n INTEGER PRIMARY KEY, data BLOB)")
        return conn

    writer = GroupWriter(connect_small, name="test")
    pages = await writer.call(lambda conn: conn.execute("PRAGMA page_count").fetchone()[0])
    await writer.call(lambda conn: conn.execute(f"PRAGMA max_page_count = {pages}").fetchone())

    tasks = await queued_behind(writer, [put_row(1), put_row(2, size=100_000), put_row(3)])
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), BOUND)

    assert all(isinstance(r, sqlite3.Error) for r in results), results  # 1 was rolled back too
    assert "full" in str(results[1])
    assert writer.commits == 0

    await writer.call(lambda conn: conn.execute("PRAGMA max_page_count = 100000").fetchone())
    done = await asyncio.wait_for(
        asyncio.gather(writer.transaction(put_row(4)), writer.transaction(put_row(5, 100_000))),
        BOUND,
    )
    writer.stop()

    assert list(done) == [4, 5]
    rows = sqlite3.connect(tmp_path / "db").execute("SELECT n FROM blobs ORDER BY n").fetchall()
    assert rows == [(4,), (5,)]  # nothing of the lost group was kept


async def test_a_writer_whose_thread_dies_fails_queued_and_later_calls_at_once(
    tmp_path: Path,
) -> None:
    connecting = threading.Event()
    go_on = threading.Event()

    def connect_then_break() -> sqlite3.Connection:
        connecting.set()
        go_on.wait(BOUND)
        raise RuntimeError("a bug in connect")  # not a sqlite3.Error: nothing handles it

    writer = GroupWriter(connect_then_break, name="doomed")
    first = asyncio.ensure_future(writer.transaction(lambda conn: 1))
    assert await asyncio.to_thread(connecting.wait, BOUND)  # the writer is inside connect
    queued = [
        asyncio.ensure_future(writer.transaction(lambda conn: 2)),
        asyncio.ensure_future(writer.call(lambda conn: 3)),
    ]
    await asyncio.sleep(0)  # one turn of the loop: both are queued
    go_on.set()

    results = await asyncio.wait_for(asyncio.gather(first, *queued, return_exceptions=True), BOUND)
    assert all(isinstance(r, StoreError) for r in results), results
    assert "writer thread doomed died" in str(results[0])
    assert "a bug in connect" in str(results[0])

    with pytest.raises(StoreError, match="died"):
        await asyncio.wait_for(writer.call(lambda conn: 4), BOUND)
    writer.stop()  # still returns after a death
    with pytest.raises(StoreError):
        await asyncio.wait_for(writer.transaction(lambda conn: 5), BOUND)


async def test_calls_after_stop_fail_at_once(tmp_path: Path) -> None:
    writer = GroupWriter(lambda: connect(tmp_path / "db"), name="test")
    assert await writer.call(lambda conn: 1) == 1
    writer.stop()
    with pytest.raises(StoreError, match="stopped"):
        await asyncio.wait_for(writer.transaction(lambda conn: 2), BOUND)


async def test_a_full_disk_fails_the_store_write_with_store_error_and_the_store_recovers(
    tmp_path: Path, app: CommerceApp, checkout_plan: Callable[..., Plan]
) -> None:
    async with SQLiteStore(tmp_path / "ledger.db") as store:
        orchestrator = Orchestrator(store, app, clock=FakeClock())
        await orchestrator.submit(checkout_plan("o-1"), saga_id="s1")
        await store.writer.call(lambda conn: conn.execute("PRAGMA max_page_count = 1").fetchone())

        big = checkout_plan("o-2", rationale="r" * 3_900)  # more than the free pages hold
        with pytest.raises(StoreError, match="full"):
            await asyncio.wait_for(orchestrator.submit(big, saga_id="s2"), BOUND)
        assert await store.load("s2") is None

        await store.writer.call(
            lambda conn: conn.execute("PRAGMA max_page_count = 1000000").fetchone()
        )
        await asyncio.wait_for(orchestrator.submit(big, saga_id="s2"), BOUND)
        loaded = await store.load("s2")
        assert loaded is not None
        assert loaded.plan == big
        assert await store.load("s1") is not None


async def test_a_write_whose_statements_cannot_be_built_fails_alone(
    tmp_path: Path,
) -> None:
    """The Python writer builds a write's statements when its transaction runs (nothing is
    kept while it waits), the native one as it is asked: a build that raises fails its own
    write with that error, and nothing else."""
    async with SQLiteStore(tmp_path / "ledger.db") as store:
        await store._batch([Stmt("CREATE TABLE t (n INTEGER PRIMARY KEY)")])
        built_on: list[str] = []

        def build(n: int) -> list[Stmt]:
            built_on.append(threading.current_thread().name)
            if n == 7:
                raise ValueError("not JSON")
            return [Stmt("INSERT INTO t (n) VALUES (?)", (n,))]

        results = await asyncio.gather(
            *(store._batch_built(lambda n=n: build(n)) for n in range(20)),
            return_exceptions=True,
        )
        # its own error, as the store's: the cause is what the build raised
        assert isinstance(results[7], StoreError)
        assert isinstance(results[7].__cause__, ValueError)
        assert sum(isinstance(r, BaseException) for r in results) == 1
        here = threading.current_thread().name
        if store.writer.native:  # built by their caller: the writer runs them without the GIL
            assert set(built_on) == {here}
        else:
            assert here not in built_on
        rows = await store._fetch("SELECT n FROM t ORDER BY n")
    assert [n for (n,) in rows] == [n for n in range(20) if n != 7]
