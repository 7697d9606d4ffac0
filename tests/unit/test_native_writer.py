"""The native group writer (``_pivotal_writer``) answers every group as the Python writer
does: the same outcome for each batch, the same rows kept. Its own edges: a handle over
another file or a closed connection is refused."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from pivotal import SQLiteStore
from pivotal.errors import LeaseLost, StoreError
from pivotal.store import native
from pivotal.store.primitives import BatchResult, Stmt

pytestmark = pytest.mark.skipif(
    not native.installed() and os.environ.get("CI") != "true",
    reason="the native writer is not built here (make builds it)",
)

TABLE = "CREATE TABLE t (n INTEGER PRIMARY KEY, s)"
PUT = "INSERT INTO t (n, s) VALUES (?, ?)"


def test_the_native_writer_is_built() -> None:
    """Where CI runs, ``make`` built it: without it every test above runs the fallback only."""
    assert native.installed()


def group() -> list[list[Stmt]]:
    """One group's batches, each meeting one rule: kept, fenced, refused by a constraint
    (the batch's first insert goes too), returning, stopped by a guard, many rows, a value
    too large to bind, a blob, a float and nothing at all."""
    return [
        [Stmt(PUT, (1, "a"))],
        [Stmt("UPDATE t SET s = 'x' WHERE n = 99", fence="no such row")],
        [Stmt(PUT, (2, "b")), Stmt(PUT, (1, "dup"))],
        [Stmt(PUT + " RETURNING n, s", (3, "c"), returning=True)],
        [Stmt("UPDATE t SET s = 'g' WHERE n = 77", guard=True), Stmt(PUT, (4, "never"))],
        [Stmt(PUT, [(5, "e"), (6, None)], many=True)],
        [Stmt(PUT, (7, b"\x00blob")), Stmt("SELECT n, s FROM t WHERE n = 7", returning=True)],
        [Stmt(PUT, (8, 2**70))],
        [Stmt(PUT, (9, 1.5)), Stmt(PUT, (10, "é\u2603"))],
        [],
    ]


def outcome(result: Any) -> Any:
    if isinstance(result, BatchResult):
        return ("ok", result.stopped, result.rows)
    if isinstance(result, LeaseLost):
        return ("fenced", str(result))
    assert isinstance(result, StoreError), result
    return ("refused", type(result.__cause__).__name__ if result.__cause__ else None)


async def run_group(store: SQLiteStore, batches: list[list[Stmt]]) -> list[Any]:
    """``batches`` as one group: the writer is held while they queue."""
    writer, inside, gate = store.writer, threading.Event(), threading.Event()

    def hold(conn: object) -> None:
        inside.set()
        gate.wait()

    held = asyncio.ensure_future(writer.call(hold))
    await asyncio.to_thread(inside.wait)
    try:
        writes: list[Awaitable[Any]] = [store._batch(b) for b in batches]
        running = asyncio.gather(*writes, return_exceptions=True)
        await asyncio.sleep(0)
        assert writer._jobs.qsize() == len(batches)
    finally:
        gate.set()
    await held
    return [outcome(r) for r in await asyncio.wait_for(running, 30)]


async def answers(
    path: Path, monkeypatch: pytest.MonkeyPatch, which: str, alone: bool
) -> tuple[list[Any], list[Any]]:
    monkeypatch.setenv(native.WRITER_ENV, which)
    async with SQLiteStore(path) as store:
        assert store.writer.native == (which == "native")
        await store._batch([Stmt(TABLE)])
        if alone:  # each batch in a group of its own
            results = [(await run_group(store, [b]))[0] for b in group()]
        else:
            results = await run_group(store, group())
        kept = await store._fetch("SELECT n, s FROM t ORDER BY n")
    return results, kept


@pytest.mark.parametrize("alone", [False, True], ids=["one group", "each alone"])
async def test_both_writers_answer_a_group_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alone: bool
) -> None:
    ours, ours_kept = await answers(tmp_path / "n.db", monkeypatch, "native", alone)
    theirs, theirs_kept = await answers(tmp_path / "p.db", monkeypatch, "python", alone)
    assert ours == theirs
    assert ours_kept == theirs_kept
    assert [r[0] for r in ours] == [
        "ok", "fenced", "refused", "ok", "ok", "ok", "ok", "refused", "ok", "ok"
    ]  # fmt: skip
    assert ours[2] == ("refused", "IntegrityError")
    assert ours[7] == ("refused", "OverflowError")
    assert ours[3] == ("ok", False, [[(3, "c")]])
    assert ours[4] == ("ok", True, [])
    assert ours[6] == ("ok", False, [[(7, b"\x00blob")]])
    assert [n for n, _ in ours_kept] == [1, 3, 5, 6, 7, 9, 10]


def test_a_connection_over_another_file_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db")
    conn.execute(TABLE)
    (tmp_path / "b.db").touch()
    with pytest.raises(ValueError, match="not one over"):
        native.connect(conn, str(tmp_path / "b.db"))
    conn.close()


def test_a_closed_connection_runs_nothing(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    conn.execute(TABLE)
    writer = native.connect(conn, str(tmp_path / "a.db"))
    lost, ((stopped, rows),) = writer.run([[Stmt(PUT, (1, "a"))]], 1.0)
    assert (lost, stopped, rows) == (None, False, [])
    writer.close()
    conn.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.run([[Stmt(PUT, (2, "b"))]], 1.0)
    assert sqlite3.connect(tmp_path / "a.db").execute("SELECT n FROM t").fetchall() == [(1,)]
