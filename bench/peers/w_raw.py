"""Baselines measured in the same run as the systems: the physical floor of this machine.

``--mode commits``: single-row INSERT commits in a loop (SQLite WAL, synchronous=FULL, or
PostgreSQL autocommit when ``--db`` is a URL); ``--sagas`` is the number of commits and
``rate`` is commits/s. ``--mode lean``: "a lean 5-commit saga" in raw sqlite3, one at a
time: create the saga, one intent commit per step (which also records the previous step's
result), and a completion commit that records the last result and the final status.
"""

from __future__ import annotations

import json
import sqlite3
import time

from common import STEPS, barrier, emit, parse


def sqlite_conn(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def sqlite_commits(path: str, n: int) -> None:
    conn = sqlite_conn(path)
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
    for _ in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v) VALUES ('x')")
        conn.execute("COMMIT")
    conn.close()


def lean_sagas(path: str, first: int, n: int) -> None:
    conn = sqlite_conn(path)
    conn.execute("CREATE TABLE IF NOT EXISTS saga (id TEXT PRIMARY KEY, status TEXT, plan TEXT)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS step (saga TEXT, idx INTEGER, status TEXT, result TEXT,"
        " PRIMARY KEY (saga, idx))"
    )
    plan = json.dumps([{"name": "noop", "args": {"n": i}} for i in range(STEPS)])

    def commit(*stmts: tuple[str, tuple[object, ...]]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        for sql, params in stmts:
            conn.execute(sql, params)
        conn.execute("COMMIT")

    done = "UPDATE step SET status = 'done', result = ? WHERE saga = ? AND idx = ?"
    for k in range(first, first + n):
        sid = f"s{k}"
        commit(("INSERT INTO saga VALUES (?, 'running', ?)", (sid, plan)))
        result: str | None = None
        for i in range(STEPS):
            intent = ("INSERT INTO step VALUES (?, ?, 'started', NULL)", (sid, i))
            if result is None:
                commit(intent)
            else:
                commit((done, (result, sid, i - 1)), intent)
            result = json.dumps({"n": i})  # the no-op step's effect
        commit(
            (done, (result, sid, STEPS - 1)),
            ("UPDATE saga SET status = 'completed' WHERE id = ?", (sid,)),
        )
    conn.close()


def postgres_commits(url: str, n: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_raw (id SERIAL PRIMARY KEY, v TEXT)")
        for _ in range(n):
            conn.execute("INSERT INTO bench_raw (v) VALUES ('x')")


def main() -> None:
    opts = parse(__doc__ or "", extra_modes=("commits", "lean"))
    pg = opts.db.startswith("postgres")
    if opts.mode == "lean":
        lean_sagas(opts.db, -opts.warm_up, opts.warm_up)
        barrier(opts)
        start = time.time()
        lean_sagas(opts.db, 0, opts.sagas)
    else:
        warm = postgres_commits if pg else sqlite_commits
        warm(opts.db, opts.warm_up)
        barrier(opts)
        start = time.time()
        warm(opts.db, opts.sagas)
    end = time.time()
    emit("raw-postgres" if pg else "raw-sqlite", opts, start, end, mode=opts.mode)


if __name__ == "__main__":
    main()
