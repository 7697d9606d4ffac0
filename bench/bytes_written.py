"""Bytes a saga writes: sagas of 3 no-op steps on embedded SQLite, one at a time and 32 in
flight, counted as the bytes this process hands to ``write()`` (``wchar`` in
``/proc/self/io``: the WAL, and the checkpoints that copy it into the ledger), divided by
the sagas run. A count, not a time: a machine's load moves it little.

Each mode runs twice in the same run: on a new ledger as Pivotal makes it, and on a ledger
whose file was made first with SQLite's default pages of 4 KiB (what every ledger had before
pages of 1 KiB; a ledger's page size is fixed when it is made), with the ratio of the two.

    python bench/bytes_written.py [--sagas 1000] [--modes 1,32]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import PLAN, noop_catalogue

from pivotal import Orchestrator, SQLiteStore

WARM_UP = 50


def written() -> int:
    """Bytes this process has passed to ``write()`` so far."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise SystemExit("this system has no /proc/self/io")


async def per_saga(path: Path, sagas: int, at_once: int) -> float:
    """Bytes written per saga, ``at_once`` sagas in flight, after a warm-up."""
    async with SQLiteStore(path) as store:
        orchestrator = Orchestrator(store, noop_catalogue())
        gate = asyncio.Semaphore(at_once)

        async def one(n: int) -> None:
            async with gate:
                await orchestrator.execute(PLAN, saga_id=f"s-{n}")

        await asyncio.gather(*(one(n) for n in range(-WARM_UP, 0)))
        before = written()
        await asyncio.gather(*(one(n) for n in range(sagas)))
        return (written() - before) / sagas


def made_with_pages(path: Path, size: int) -> Path:
    """An empty ledger file whose pages are ``size`` bytes (the first write fixes it)."""
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA page_size = {size}")
    db.execute("PRAGMA journal_mode = WAL")
    db.close()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sagas", type=int, default=1000)
    parser.add_argument("--modes", default="1,32", help="sagas in flight, comma-separated")
    opts = parser.parse_args()
    print(f"{'sagas in flight':>16} {'KiB a saga':>11} {'4 KiB pages':>12} {'ratio':>6}")
    for at_once in (int(m) for m in opts.modes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            now = asyncio.run(per_saga(Path(tmp) / "new.db", opts.sagas, at_once))
            old = made_with_pages(Path(tmp) / "old.db", 4096)
            before = asyncio.run(per_saga(old, opts.sagas, at_once))
        print(f"{at_once:>16} {now / 1024:>11.1f} {before / 1024:>12.1f} {now / before:>6.2f}")


if __name__ == "__main__":
    main()
