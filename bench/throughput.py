"""Durable throughput: sagas of 3 no-op steps, one at a time, on SQLite.

Prints Pivotal's sagas/s next to a baseline measured in the same run on the same disk:
raw sqlite3 commits/s in WAL mode with synchronous=FULL (the physical floor).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel

from pivotal import Catalogue, Orchestrator, Plan, SQLiteStore, StepContext


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


def baseline_commits_per_second(path: Path, seconds: float) -> float:
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


async def pivotal_sagas_per_second(path: Path, count: int) -> tuple[float, int]:
    catalogue = noop_catalogue()
    plan = Plan.model_validate(
        {"catalogue": "bench", "steps": [{"name": "noop", "args": {"n": i}} for i in range(3)]}
    )
    async with SQLiteStore(path) as store:
        orch = Orchestrator(store, catalogue)
        start = time.perf_counter()
        for _ in range(count):
            await orch.execute(plan)
        elapsed = time.perf_counter() - start
        events = len(await store.events((await store.list_sagas(limit=1))[0].saga_id))
    return count / elapsed, events


async def pivotal_concurrent_sagas_per_second(path: Path, count: int, at_once: int) -> float:
    """``count`` sagas, ``at_once`` of them in flight together (as a worker runs them)."""
    catalogue = noop_catalogue()
    plan = Plan.model_validate(
        {"catalogue": "bench", "steps": [{"name": "noop", "args": {"n": i}} for i in range(3)]}
    )
    async with SQLiteStore(path) as store:
        orch = Orchestrator(store, catalogue)
        gate = asyncio.Semaphore(at_once)

        async def one(n: int) -> None:
            async with gate:
                await orch.execute(plan, saga_id=f"c{n}")

        start = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(count)))
        return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sagas", type=int, default=500)
    parser.add_argument("--baseline-seconds", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=32)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = baseline_commits_per_second(Path(tmp) / "raw.db", opts.baseline_seconds)
        rate, events = asyncio.run(pivotal_sagas_per_second(Path(tmp) / "ledger.db", opts.sagas))
        together = asyncio.run(
            pivotal_concurrent_sagas_per_second(
                Path(tmp) / "concurrent.db", opts.sagas, opts.concurrency
            )
        )
    print(f"baseline raw sqlite3 WAL FULL: {base:,.0f} commits/s")
    print(f"pivotal, 3-step sagas, sequential: {rate:,.0f} sagas/s ({events} events per saga)")
    print(f"pivotal, 3-step sagas, {opts.concurrency} at once: {together:,.0f} sagas/s")
    print(f"ratio sequential sagas/s : baseline commits/s = {rate / base:.4f}")
    print(f"ratio concurrent sagas/s : baseline commits/s = {together / base:.4f}")


if __name__ == "__main__":
    main()
