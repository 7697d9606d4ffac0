"""Processes on one SQLite ledger: sagas of 3 no-op steps, 32 in flight in each process, run
by one process and then by two over the same ledger file, with each of the SQLite writers
(the native one, when it is built, and the pure-Python one), in interleaved rounds. Prints
each case's median sagas/s, the ratio of two processes to one, and the CPU a saga took
(user and system, all processes) and the cores that kept busy: on a machine of C cores, two
processes cannot run more than C / (cores one process keeps busy) times one.

    python bench/processes.py [--sagas 3000] [--rounds 3] [--at-once 32]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import resource
import statistics
import sys
import tempfile
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import PLAN, noop_catalogue

from pivotal import Orchestrator, SQLiteStore
from pivotal.store import native

WARM_UP = 30


def child(path: str, sagas: int, at_once: int, tag: str, start: Barrier, done: Any) -> None:
    async def run() -> None:
        async with SQLiteStore(path) as store:
            orchestrator = Orchestrator(store, noop_catalogue())
            gate = asyncio.Semaphore(at_once)

            async def one(n: int) -> None:
                async with gate:
                    await orchestrator.execute(PLAN, saga_id=f"{tag}-{n}")

            await asyncio.gather(*(one(n) for n in range(-WARM_UP, 0)))
            start.wait()
            await asyncio.gather(*(one(n) for n in range(sagas)))

    asyncio.run(run())
    done.put(time.perf_counter())


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(processes: int, sagas: int, at_once: int, writer: str) -> tuple[float, float]:
    """Sagas/s of ``processes`` processes on one new ledger, and CPU seconds a saga."""
    os.environ[native.WRITER_ENV] = writer  # the children inherit it
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "ledger.db")

        async def make() -> None:
            async with SQLiteStore(path):
                pass

        asyncio.run(make())
        ctx = mp.get_context("spawn")
        start, done = ctx.Barrier(processes + 1), ctx.Queue()
        workers = [
            ctx.Process(target=child, args=(path, sagas, at_once, f"p{k}", start, done))
            for k in range(processes)
        ]
        cpu = children_cpu()
        for worker in workers:
            worker.start()
        start.wait()
        began = time.perf_counter()
        ended = max(done.get() for _ in workers)
        for worker in workers:
            worker.join()
        total = processes * sagas
        return total / (ended - began), (children_cpu() - cpu) / (total + processes * WARM_UP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sagas", type=int, default=3000, help="sagas each process runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--at-once", type=int, default=32)
    opts = parser.parse_args()
    writers = ["native", "python"] if native.installed() else ["python"]
    cases = [(w, n) for w in writers for n in (1, 2)]
    found: dict[tuple[str, int], list[tuple[float, float]]] = {case: [] for case in cases}
    for _ in range(opts.rounds):
        for writer, processes in cases:
            found[writer, processes].append(measure(processes, opts.sagas, opts.at_once, writer))
    print(f"{os.cpu_count()} cores; {opts.at_once} sagas in flight in each process")
    head = ("writer", "processes", "sagas/s", "to one", "ms CPU a saga", "cores")
    print("{:8} {:>9} {:>9} {:>7} {:>14} {:>6}".format(*head))
    for writer, processes in cases:
        rate = statistics.median(r for r, _ in found[writer, processes])
        cpu = statistics.median(c for _, c in found[writer, processes])
        one = statistics.median(r for r, _ in found[writer, 1])
        print(
            f"{writer:8} {processes:>9} {rate:>9,.0f} {rate / one:>7.2f} "
            f"{cpu * 1e3:>14.3f} {rate * cpu:>6.2f}"
        )
    if len(writers) == 2:
        for processes in (1, 2):
            ours = statistics.median(r for r, _ in found["native", processes])
            theirs = statistics.median(r for r, _ in found["python", processes])
            print(f"native / python writer, {processes} process(es): {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
