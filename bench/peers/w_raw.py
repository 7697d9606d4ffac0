"""Baselines measured in the same run as the systems: the physical floor of this machine.

``--mode commits``: single-row INSERT commits in a loop (SQLite WAL, synchronous=FULL, or
PostgreSQL autocommit when ``--db`` is a URL); ``--sagas`` is the number of commits and
``rate`` is commits/s. ``--mode lean``: "a lean 5-commit saga" in raw sqlite3, one at a
time: create the saga, one intent commit per step (which also records the previous step's
result), and a completion commit that records the last result and the final status.

``--mode grouped``: the rows Pivotal writes for a 3-step saga (the saga, its steps, its
events, the provenance and the completion's outbox message: 22 statements in 4
transactions, in Pivotal's own schema), from ``--in-flight`` asyncio tasks handing their
transactions to one writer thread that commits whatever queued up together (one fsync per
group) and answers the group with one wake-up of the event loop. No engine, no validation,
no user code: the ceiling of that write shape in Python on this machine, for many sagas in
flight.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import queue
import sqlite3
import threading
import time

from common import STEPS, barrier, emit, parse, timed


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


_STEP = (
    "INSERT INTO steps (saga_id, idx, name, kind, grp, status, attempts, result, error,"
    " next_attempt_at, seq, undo_status, undo_attempts, undo_error, undo_next_attempt_at)"
    " VALUES (?, ?, 'noop', 'compensable', NULL, ?, ?, ?, NULL, NULL, ?, 'none', 0, NULL, NULL)"
    " ON CONFLICT (saga_id, idx) DO UPDATE SET status = excluded.status,"
    " attempts = excluded.attempts, result = excluded.result, error = excluded.error,"
    " next_attempt_at = excluded.next_attempt_at, seq = excluded.seq,"
    " undo_status = excluded.undo_status, undo_attempts = excluded.undo_attempts,"
    " undo_error = excluded.undo_error, undo_next_attempt_at = excluded.undo_next_attempt_at"
)
_EVENT = (
    "INSERT INTO events (saga_id, seq, type, step, attempt, at, data, provenance_ref)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, 'p')"
)
_CREATE = (
    "INSERT INTO sagas (saga_id, catalogue, plan, plan_digest, provenance_ref, status, reason,"
    " version, outcomes, created_at, updated_at, wake_at, traceparent, lease_owner,"
    " lease_token, lease_expires_at, lease_epoch, idle_passes) VALUES (?, 'bench', ?, 'd',"
    " 'p', 'running', NULL, 2, 0, ?, ?, NULL, NULL, 'me', ?, ?, 1, 1)"
    " ON CONFLICT (saga_id) DO NOTHING"
)
_MOVE = (
    "UPDATE sagas SET status = ?, reason = NULL, version = ?, outcomes = ?, updated_at = ?,"
    " wake_at = NULL, compensating_since = NULL, idle_passes = 0, last_error = NULL"
    " WHERE saga_id = ? AND version = ? AND lease_epoch = 1"
)
_OUTBOX = (
    "INSERT INTO outbox (id, saga_id, type, payload, traceparent, created_at, next_attempt_at)"
    " VALUES (?, ?, 'saga.completed', ?, NULL, ?, ?)"
)
Stmts = list[tuple[str, tuple[object, ...]]]


class GroupedLedger:
    """One writer thread: each group of queued transactions is one commit, one fsync."""

    def __init__(self, path: str) -> None:
        self.jobs: queue.SimpleQueue[tuple[asyncio.Future[None], Stmts] | None] = (
            queue.SimpleQueue()
        )
        self.loop = asyncio.get_running_loop()
        self.thread = threading.Thread(target=self._write, args=(path,))
        self.thread.start()

    def _write(self, path: str) -> None:
        conn = sqlite_conn(path)
        while (job := self.jobs.get()) is not None:
            group = [job]
            with contextlib.suppress(queue.Empty):
                while (more := self.jobs.get_nowait()) is not None:
                    group.append(more)
                self.jobs.put(None)  # what ended the group ends the thread
            conn.execute("BEGIN IMMEDIATE")
            for _, stmts in group:
                for sql, params in stmts:
                    conn.execute(sql, params)
            conn.execute("COMMIT")
            self.loop.call_soon_threadsafe(_settle, [f for f, _ in group])
        conn.close()

    async def commit(self, stmts: Stmts) -> None:
        done = self.loop.create_future()
        self.jobs.put((done, stmts))
        await done

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join()


def _settle(futures: list[asyncio.Future[None]]) -> None:
    for f in futures:
        f.set_result(None)


async def grouped_saga(ledger: GroupedLedger, sid: str) -> None:
    """Pivotal's 4 commits of a 3-step saga: creation with the first intent, two intents
    each with the previous outcome, the completion with its outbox message."""
    now, d = time.time, json.dumps
    plan = d(
        {"catalogue": "bench", "steps": [{"name": "noop", "args": {"n": i}} for i in range(3)]}
    )
    steps = d({"steps": [{"name": "noop", "kind": "compensable", "group": None}] * STEPS})
    first: Stmts = [
        (
            "INSERT INTO provenance VALUES ('p', ?) ON CONFLICT (ref) DO NOTHING",
            (d({"actor_type": "system", "actor_id": "unknown"}),),
        ),
        (_CREATE, (sid, plan, now(), now(), f"{sid}-token", now() + 60)),
        *[
            (_STEP, (sid, i, "started" if i == 0 else "pending", int(i == 0), None, None))
            for i in range(STEPS)
        ],
        (_EVENT, (sid, 1, "saga_submitted", None, None, now(), steps)),
        (_EVENT, (sid, 2, "step_started", 0, 1, now(), d({"by": "me", "key": f"{sid}:0"}))),
    ]
    await ledger.commit(first)
    version = 2
    for i in range(STEPS):
        result, last = d({"n": i}), i == STEPS - 1
        stmts: Stmts = [
            (_MOVE, ("completed" if last else "running", version + 2, i + 1, now(), sid, version)),
            (_STEP, (sid, i, "succeeded", 1, result, version + 1)),
            (_EVENT, (sid, version + 1, "step_succeeded", i, None, now(), d({"result": result}))),
        ]
        if last:
            stmts += [
                (_EVENT, (sid, version + 2, "saga_completed", None, None, now(), d({}))),
                (_OUTBOX, (f"{sid}:{version + 2}", sid, d({"saga_id": sid}), now(), now())),
            ]
        else:
            key = d({"by": "me", "key": f"{sid}:{i + 1}"})
            stmts += [
                (_STEP, (sid, i + 1, "started", 1, None, None)),
                (_EVENT, (sid, version + 2, "step_started", i + 1, 1, now(), key)),
            ]
        await ledger.commit(stmts)
        version += 2


async def grouped_sagas(path: str, opts: argparse.Namespace) -> tuple[float, float]:
    from pivotal import SQLiteStore  # its schema, as migrated; nothing else of it

    async with SQLiteStore(path):
        pass
    ledger = GroupedLedger(path)

    async def one(sid: str) -> None:
        await grouped_saga(ledger, sid)

    try:
        return await timed(opts, one)
    finally:
        ledger.close()


def postgres_commits(url: str, n: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_raw (id SERIAL PRIMARY KEY, v TEXT)")
        for _ in range(n):
            conn.execute("INSERT INTO bench_raw (v) VALUES ('x')")


def main() -> None:
    opts = parse(__doc__ or "", extra_modes=("commits", "lean", "grouped"))
    pg = opts.db.startswith("postgres")
    if opts.mode == "grouped":
        start, end = asyncio.run(grouped_sagas(opts.db, opts))
        emit("raw-sqlite", opts, start, end, mode=opts.mode)
        return
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
