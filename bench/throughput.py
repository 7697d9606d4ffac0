"""Durable throughput: sagas of 3 no-op steps, on SQLite and (optionally) PostgreSQL.

Every figure is printed next to a baseline measured in the same run on the same machine:
raw sqlite3 commits/s in WAL mode with synchronous=FULL (the physical floor here), and with
--postgres, raw single-row commits/s against the same server.

    python bench/throughput.py [--sagas 500] [--modes 1,32,1000] [--postgres URL]

On SQLite each mode also reports the work per saga on the writer: commits (one fsync each)
and statements run, counted with ``sqlite3``'s trace callback, never timed.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from pydantic import BaseModel

from pivotal import Catalogue, Orchestrator, Plan, SQLiteStore, StepContext, Store
from pivotal.store.postgres import PostgresStore


class NoArgs(BaseModel):
    n: int = 0


def noop_catalogue() -> Catalogue:
    catalogue = Catalogue("bench")

    async def undo(args: NoArgs, result: object, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo)
    async def noop(args: NoArgs, ctx: StepContext) -> dict[str, int]:
        return {"n": args.n}

    return catalogue


WARM_UP = 50  # sagas run before the clock starts
PLAN = Plan.model_validate(
    {"catalogue": "bench", "steps": [{"name": "noop", "args": {"n": i}} for i in range(3)]}
)


def sqlite_commits_per_second(path: Path, seconds: float) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v) VALUES ('x')")
        conn.execute("COMMIT")
        n += 1
    conn.close()
    return n / (time.perf_counter() - start)


def lean_sagas_per_second(path: Path, seconds: float) -> float:
    """A lean 3-step saga in raw sqlite3, one after another: five commits (create with its
    steps, an intent per step carrying the previous outcome, the completion), each with its
    rows and one event. The ceiling a durable engine on this file system aims at."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE saga (id TEXT PRIMARY KEY, status TEXT, version INTEGER)")
    conn.execute("CREATE TABLE step (saga TEXT, idx INTEGER, status TEXT, PRIMARY KEY (saga, idx))")
    conn.execute("CREATE TABLE event (saga TEXT, seq INTEGER, type TEXT, PRIMARY KEY (saga, seq))")

    def commit(*stmts: tuple[str, tuple[object, ...]]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        for sql, params in stmts:
            conn.execute(sql, params)
        conn.execute("COMMIT")

    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        saga = f"s{n}"
        event = "INSERT INTO event VALUES (?, ?, ?)"
        step = "UPDATE step SET status = ? WHERE saga = ? AND idx = ?"
        commit(
            ("INSERT INTO saga VALUES (?, 'submitted', 1)", (saga,)),
            *(("INSERT INTO step VALUES (?, ?, 'pending')", (saga, i)) for i in range(3)),
            (event, (saga, 1, "submitted")),
        )
        for i in range(3):
            commit(
                ("UPDATE saga SET status = 'running', version = version + 1 WHERE id = ?", (saga,)),
                (step, ("started", saga, i)),
                (event, (saga, 2 + i, "started")),
            )
        commit(
            ("UPDATE saga SET status = 'completed' WHERE id = ?", (saga,)),
            (step, ("succeeded", saga, 2)),
            (event, (saga, 5, "completed")),
        )
        n += 1
    conn.close()
    return n / (time.perf_counter() - start)


def postgres_commits_per_second(url: str, seconds: float) -> float:
    """Single-row INSERT commits into an ordinary (WAL-logged, so flushed) table."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_raw (id SERIAL PRIMARY KEY, v TEXT)")
        try:
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                conn.execute("INSERT INTO bench_raw (v) VALUES ('x')")
                n += 1
            return n / (time.perf_counter() - start)
        finally:
            conn.execute("DROP TABLE bench_raw")


@dataclass
class Rate:
    """Sagas per second, and (SQLite only) the writer's work per saga."""

    per_second: float
    commits: float | None = None
    statements: float | None = None


class _Counted:
    """Counts what a SQLite writer does while the clock runs."""

    def __init__(self, store: Store) -> None:
        self.store = store if isinstance(store, SQLiteStore) else None
        self.statements = 0
        self.commits = 0

    def _count(self, sql: str) -> None:
        self.statements += 1

    async def start(self) -> None:
        if self.store is not None:
            await self.store._call(lambda conn: conn.set_trace_callback(self._count))
            self.commits, self.statements = self.store.writer.commits, 0

    async def stop(self, count: int, rate: float) -> Rate:
        if self.store is None:
            return Rate(rate)
        await self.store._call(lambda conn: conn.set_trace_callback(None))
        commits = self.store.writer.commits - self.commits
        return Rate(rate, commits / count, self.statements / count)


async def sagas_per_second(
    ledger: Callable[[], AbstractAsyncContextManager[Store]], count: int, at_once: int
) -> Rate:
    """``count`` sagas, ``at_once`` of them in flight together (1: one after another)."""
    async with ledger() as store:
        orch = Orchestrator(store, noop_catalogue())
        gate = asyncio.Semaphore(at_once)
        run = uuid.uuid4().hex[:8]  # a reused ledger must not answer from earlier runs

        async def one(n: int) -> None:
            async with gate:
                await orch.execute(PLAN, saga_id=f"{run}-{at_once}-{n}")

        await asyncio.gather(*(one(n) for n in range(-WARM_UP, 0)))  # fill caches first
        counted = _Counted(store)
        await counted.start()
        start = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(count)))
        rate = count / (time.perf_counter() - start)
        return await counted.stop(count, rate)


def report(name: str, base: float, rates: dict[int, Rate], lean: float | None = None) -> None:
    print(f"{name}: baseline {base:,.0f} commits/s")
    if lean is not None:
        print(f"  lean raw 5-commit 3-step saga, one at a time: {lean:,.0f}/s")
    for at_once, rate in rates.items():
        how = "one at a time" if at_once == 1 else f"{at_once} at once"
        work = ""
        if rate.commits is not None and rate.statements is not None:
            work = f"; per saga {rate.commits:.2f} commits, {rate.statements:.1f} statements"
        to_lean = f", to lean saga {rate.per_second / lean:.2f}" if lean else ""
        print(
            f"  3-step sagas, {how}: {rate.per_second:,.0f}/s  "
            f"(ratio to baseline {rate.per_second / base:.4f}{to_lean}{work})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sagas", type=int, default=500)
    parser.add_argument("--concurrency", type=int, help="the same as --modes 1,N")
    parser.add_argument(
        "--modes", default="1,32", help="sagas in flight together, comma-separated (1,32,1000)"
    )
    parser.add_argument("--baseline-seconds", type=float, default=2.0)
    parser.add_argument("--postgres", help="an empty database URL to measure PostgreSQL too")
    opts = parser.parse_args()
    modes = (
        (1, opts.concurrency)
        if opts.concurrency
        else tuple(int(m) for m in opts.modes.split(",") if m.strip())
    )
    with tempfile.TemporaryDirectory() as tmp:
        base = sqlite_commits_per_second(Path(tmp) / "raw.db", opts.baseline_seconds)
        lean = lean_sagas_per_second(Path(tmp) / "lean.db", opts.baseline_seconds)
        rates = {
            n: asyncio.run(
                sagas_per_second(lambda n=n: SQLiteStore(Path(tmp) / f"l{n}.db"), opts.sagas, n)
            )
            for n in modes
        }
    report("SQLite (WAL, synchronous=FULL)", base, rates, lean)
    if opts.postgres:
        base = postgres_commits_per_second(opts.postgres, opts.baseline_seconds)
        url = opts.postgres
        rates = {
            n: asyncio.run(
                sagas_per_second(lambda: PostgresStore(url, migrate=True), opts.sagas, n)
            )
            for n in modes
        }
        report("PostgreSQL (loopback)", base, rates)


if __name__ == "__main__":
    main()
