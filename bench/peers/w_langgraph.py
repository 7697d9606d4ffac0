"""LangGraph's workload: a graph of 3 no-op nodes, checkpointed to SQLite at every step.

Runs with ``.bench/langgraph``'s python (``langgraph`` and ``langgraph-checkpoint-sqlite``).
Each saga is one ``ainvoke`` of a compiled ``StateGraph`` (START -> step0 -> step1 ->
step2 -> END) on its own ``thread_id``, with ``AsyncSqliteSaver`` on a fresh file
(``--db``; the saver puts it in WAL mode, ``synchronous`` stays at SQLite's default, FULL)
and ``durability="sync"``: each step's checkpoint is written before the next step starts
(LangGraph's default, ``"async"``, writes it while the next step runs). A checkpoint
records what a node returned; nothing is written before a node runs, and LangGraph has no
compensation of its own, so the nodes keep none.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TypedDict

from common import STEPS, emit, parse, provider, sqlite_settings, timed
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    done: int


def graph() -> StateGraph:
    g = StateGraph(State)
    previous = START
    for s in range(STEPS):

        async def step(state: State) -> State:
            await provider()
            return {"done": state["done"] + 1}

        g.add_node(f"step{s}", step)
        g.add_edge(previous, f"step{s}")
        previous = f"step{s}"
    g.add_edge(previous, END)
    return g


async def main() -> None:
    opts = parse(__doc__ or "")
    async with AsyncSqliteSaver.from_conn_string(opts.db) as saver:
        await saver.setup()
        if opts.mode == "setup":
            return
        app = graph().compile(checkpointer=saver)
        run_id = f"{opts.tag}-{uuid.uuid4().hex[:8]}"

        async def one(name: str) -> None:
            config = {"configurable": {"thread_id": f"{run_id}-{name}"}}
            out = await app.ainvoke({"done": 0}, config, durability="sync")
            if out["done"] != STEPS:
                raise SystemExit(f"saga ended with {out}, expected {STEPS} steps")

        start, end = await timed(opts, one)
    emit("langgraph", opts, start, end, **sqlite_settings(opts.db))


if __name__ == "__main__":
    asyncio.run(main())
