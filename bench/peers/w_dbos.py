"""DBOS's workload: an async workflow of 3 no-op steps, each step's output checkpointed.

Runs with ``.bench/dbos``'s python, using DBOS's public API (``DBOS``, ``@DBOS.workflow``,
``@DBOS.step``). On SQLite the driver creates the file in WAL mode first (the mode
persists in the file); DBOS leaves ``synchronous`` at SQLite's default, which is FULL in
this build, and this script checks and prints what the connection actually uses. With
``--provider-ms`` each step first waits that long for its provider (``asyncio.sleep``).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

from common import STEPS, barrier, emit, parse, provider, sqlite_settings, stop_clock
from dbos import DBOS, DBOSConfig, SetWorkflowID


@DBOS.step()
async def noop(n: int) -> int:
    await provider()
    return n


@DBOS.workflow()
async def bench_saga() -> int:
    total = 0
    for s in range(STEPS):
        total += await noop(s)
    return total


def url_of(db: str) -> str:
    return db if db.startswith("postgres") else f"sqlite:///{db}"


async def main() -> None:
    opts = parse(__doc__ or "")
    config: DBOSConfig = {
        "name": "bench-peers",
        "system_database_url": url_of(opts.db),
        "log_level": "WARNING",
        "sys_db_pool_size": 40,
        # One executor id per process: processes sharing a database must not recover
        # each other's in-flight workflows at launch.
        "executor_id": f"bench-{opts.tag}-{os.getpid()}",
    }
    DBOS(config=config)
    DBOS.launch()
    try:
        if opts.mode == "setup":
            return
        run_id = f"{opts.tag}-{uuid.uuid4().hex[:8]}"

        async def one(i: int) -> None:
            with SetWorkflowID(f"{run_id}-{i}"):
                await bench_saga()

        async def bounded(n: int, prefix: str) -> None:
            gate = asyncio.Semaphore(opts.in_flight)

            async def limited(i: int) -> None:
                async with gate:
                    await one(i if prefix == "t" else -1 - i)

            await asyncio.gather(*(limited(i) for i in range(n)))

        await bounded(opts.warm_up, "w")
        barrier(opts)
        start = time.time()
        await bounded(opts.sagas, "t")
        end = stop_clock()
    finally:
        DBOS.destroy()
    emit("dbos", opts, start, end, **sqlite_settings(opts.db))


if __name__ == "__main__":
    asyncio.run(main())
