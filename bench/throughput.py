"""Durable throughput: sagas of 3 no-op steps, on SQLite and (optionally) PostgreSQL.

Every figure is printed next to a baseline measured in the same run on the same machine:
raw sqlite3 commits/s in WAL mode with synchronous=FULL (the physical floor here), and with
--postgres, raw single-row commits/s against the same server.

    python bench/throughput.py [--sagas 500] [--concurrency 32] [--postgres URL]
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


async def sagas_per_second(
    ledger: Callable[[], AbstractAsyncContextManager[Store]], count: int, at_once: int
) -> float:
    """``count`` sagas, ``at_once`` of them in flight together (1: one after another)."""
    async with ledger() as store:
        orch = Orchestrator(store, noop_catalogue())
        gate = asyncio.Semaphore(at_once)
        run = uuid.uuid4().hex[:8]  # a reused ledger must not answer from earlier runs

        async def one(n: int) -> None:
            async with gate:
                await orch.execute(PLAN, saga_id=f"{run}-{at_once}-{n}")

        await asyncio.gather(*(one(n) for n in range(-WARM_UP, 0)))  # fill caches first
        start = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(count)))
        return count / (time.perf_counter() - start)


def report(name: str, base: float, rates: dict[int, float]) -> None:
    print(f"{name}: baseline {base:,.0f} commits/s")
    for at_once, rate in rates.items():
        how = "one at a time" if at_once == 1 else f"{at_once} at once"
        print(f"  3-step sagas, {how}: {rate:,.0f}/s  (ratio to baseline {rate / base:.4f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sagas", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--baseline-seconds", type=float, default=2.0)
    parser.add_argument("--postgres", help="an empty database URL to measure PostgreSQL too")
    opts = parser.parse_args()
    modes = (1, opts.concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        base = sqlite_commits_per_second(Path(tmp) / "raw.db", opts.baseline_seconds)
        rates = {
            n: asyncio.run(
                sagas_per_second(lambda n=n: SQLiteStore(Path(tmp) / f"l{n}.db"), opts.sagas, n)
            )
            for n in modes
        }
    report("SQLite (WAL, synchronous=FULL)", base, rates)
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
