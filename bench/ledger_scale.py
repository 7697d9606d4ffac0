"""Does a saga cost the same in a full ledger? SQLite ledgers already holding N finished
sagas (copied in bulk from one the engine ran, with their steps, events and outbox rows):
sagas/s through ``Orchestrator.execute``, and the latency of what workers, the sweeper and
the metrics read on every round (claim, expired leases, due dead letters, pending approvals,
the gauges' snapshot). Each size is measured next to an empty ledger in the same run.

    python bench/ledger_scale.py [--sizes 10000,1000000] [--sagas 500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from throughput import PLAN, noop_catalogue

from pivotal import Orchestrator, SQLiteStore

TABLES = ("sagas", "steps", "events", "outbox")  # what one finished saga leaves behind


def prefill(path: Path, n: int) -> None:
    """Copy the saga ``tpl`` ``n`` times under new ids, as if the ledger had run them."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    # finished long ago: its message was delivered
    conn.execute("UPDATE outbox SET status = 'delivered', delivered_at = created_at")
    for table in TABLES:
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        if table == "outbox":
            cols = [c for c in cols if c != "seq"]
        picked = []
        for c in cols:
            if c == "saga_id":
                picked.append("'pre' || k.i || '-' || saga_id")
            elif table == "outbox" and c == "id":
                picked.append("'pre' || k.i || '-' || id")
            else:
                picked.append(c)
        conn.execute(
            f"WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?) "
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(picked)} "
            f"FROM k, {table} WHERE saga_id = 'tpl'",
            (n,),
        )
    conn.execute("COMMIT")
    conn.close()


async def timed(call: Callable[[], Awaitable[object]], times: int = 20) -> float:
    """Median milliseconds of ``call``."""
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        await call()
        spent.append((time.perf_counter() - start) * 1000)
    return statistics.median(spent)


async def measure(path: Path, count: int) -> dict[str, float]:
    async with SQLiteStore(path) as store:
        orch = Orchestrator(store, noop_catalogue())
        run, now = uuid.uuid4().hex[:8], orch.clock.now()
        out: dict[str, float] = {}
        for at_once in (1, 32):
            gate = asyncio.Semaphore(at_once)

            async def one(n: int, gate: asyncio.Semaphore = gate, at_once: int = at_once) -> None:
                async with gate:
                    await orch.execute(PLAN, saga_id=f"{run}-{at_once}-{n}")

            start = time.perf_counter()
            await asyncio.gather(*(one(n) for n in range(count)))
            out[f"sagas/s {at_once} in flight"] = count / (time.perf_counter() - start)
        reads: dict[str, Callable[[], Awaitable[object]]] = {
            "claim_next ms": lambda: store.claim_next("bench", 30.0, now, 8),
            "expire_leases ms": lambda: store.expire_leases(now),
            "due dead letters ms": lambda: store.dead_letters("open", due_by=now),
            "pending approvals ms": lambda: store.pending_approvals(),
            "gauges snapshot ms": lambda: store.ops_snapshot(now),
        }
        for name, call in reads.items():
            out[name] = await timed(call)
        return out


async def template(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await Orchestrator(store, noop_catalogue()).execute(PLAN, saga_id="tpl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,1000000")
    parser.add_argument("--sagas", type=int, default=500)
    opts = parser.parse_args()
    sizes = [0, *(int(s) for s in opts.sizes.split(",") if s.strip())]
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            path = Path(tmp) / f"ledger-{size}.db"
            asyncio.run(template(path))
            started = time.perf_counter()
            if size:
                prefill(path, size)
                # the bulk copy leaves gigabytes of dirty pages for the kernel to write back:
                # measured before they are on disk, every commit's fsync waits behind them
                os.sync()
            filled = time.perf_counter() - started
            results[size] = asyncio.run(measure(path, opts.sagas))
            print(f"ledger with {size:,} finished sagas (filled in {filled:.0f} s)", flush=True)
            path.unlink()
    names = list(results[0])
    print(f"{'':28}" + "".join(f"{s:>14,}" for s in sizes) + "   ratio to empty")
    for name in names:
        row = "".join(f"{results[s][name]:14,.2f}" for s in sizes)
        ratios = ", ".join(f"{results[s][name] / results[0][name]:.2f}" for s in sizes[1:])
        print(f"{name:28}{row}   {ratios}")


if __name__ == "__main__":
    main()
