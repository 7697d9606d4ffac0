"""agent-saga's workload: a saga boundary around 3 no-op COMPENSABLE tools.

Runs with ``.bench/agentsaga``'s python. Every tool call writes its intent and its
commit record to one fsync'd JSON-lines write-ahead log shared by the process (the log
groups concurrent flushes); agent-saga has no SQLite ledger, so "synchronous=FULL" does
not apply: its durability is ``write + fsync`` per flush. With ``--provider-ms`` each tool
first waits that long for its provider (``asyncio.sleep``).
"""

from __future__ import annotations

import asyncio

from agent_saga import saga_scope, tool
from agent_saga.registry import compensator
from agent_saga.semantics import ActionSemantics, Compensation
from agent_saga.wal import AsyncWAL
from common import STEPS, emit, many, measured, parse, provider


@compensator("bench.undo")
async def undo(n: int, idempotency_key: str = "") -> None:
    return None


def _undo(result: dict[str, int] | None) -> Compensation:
    """The inverse, named in the handler registry so another process could run it."""
    return Compensation(fn=undo, kwargs={"n": (result or {}).get("n", 0)}, handler="bench.undo")


@tool("noop", semantics=ActionSemantics.COMPENSABLE, compensate=_undo)
async def noop(n: int) -> dict[str, int]:
    await provider()
    return {"n": n}


async def main() -> None:
    opts = parse(__doc__ or "")
    wal = AsyncWAL(opts.db, max_buffer=1_000_000)
    await wal.start()
    if opts.mode == "setup":
        await wal.close()
        return

    async def one(name: str) -> None:
        async with saga_scope(name=f"bench-{name}", wal=wal):
            for s in range(STEPS):
                await noop(n=s)

    await many(opts.warm_up, opts.in_flight, "w", one)
    flushes_before = wal.flush_cycles
    start, end = await measured(opts, one)
    flushes = wal.flush_cycles - flushes_before
    await wal.close()
    emit("agent-saga", opts, start, end, flushes_per_saga=flushes / max(opts.sagas, 1))


if __name__ == "__main__":
    asyncio.run(main())
