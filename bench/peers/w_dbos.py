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
import uuid

from common import STEPS, emit, parse, provider, sqlite_settings, timed
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

        async def one(name: str) -> None:
            with SetWorkflowID(f"{run_id}-{name}"):
                await bench_saga()

        start, end = await timed(opts, one)
    finally:
        DBOS.destroy()
    emit("dbos", opts, start, end, **sqlite_settings(opts.db))


if __name__ == "__main__":
    asyncio.run(main())
