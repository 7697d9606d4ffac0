"""Instructions per saga: a deterministic count of the CPU work one saga of three no-op steps
costs, one at a time, on embedded SQLite.

    python bench/instructions.py [--sagas 130] [--minus 30] [--against PATH]

Each count runs this script under ``valgrind --tool=callgrind`` twice, once running
``--sagas`` sagas and once ``--minus`` sagas (the same start-up, imports and warm-up), and
prints the difference divided by the difference in sagas: the instructions of one saga,
start-up excluded. A machine's load does not change the count. With ``--against`` (the
``src`` folder of another checkout), that tree is counted in the same run, and the ratio is
printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
SRC = HERE.parent.parent / "src"


async def run_sagas(n: int, folder: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    from throughput import PLAN, noop_catalogue

    from pivotal import Orchestrator, SQLiteStore

    store = SQLiteStore(folder / "bench.db")
    await store.open()
    orchestrator = Orchestrator(store, noop_catalogue())
    try:
        for _ in range(n):
            await orchestrator.execute(PLAN)
    finally:
        await store.close()


def count(src: Path, sagas: int) -> int:
    """Instructions callgrind counts for a whole process running ``sagas`` sagas."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                str(HERE),
                "--child",
                str(sagas),
                folder,
            ],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        found = re.search(r"^summary:\s+(\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            raise SystemExit("callgrind wrote no summary")
        return int(found.group(1))


def per_saga(src: Path, sagas: int, minus: int) -> float:
    return (count(src, sagas) - count(src, minus)) / (sagas - minus)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        asyncio.run(run_sagas(int(sys.argv[2]), Path(sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sagas", type=int, default=130)
    parser.add_argument("--minus", type=int, default=30)
    parser.add_argument("--against", type=Path, help="another checkout's src folder")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    if not args.sagas > args.minus >= 0:
        raise SystemExit("--sagas must be more than --minus")
    here = per_saga(SRC, args.sagas, args.minus)
    print(f"this tree: {here / 1e6:.2f} M instructions per saga of 3 no-op steps")
    if args.against is not None:
        there = per_saga(args.against.resolve(), args.sagas, args.minus)
        print(f"{args.against}: {there / 1e6:.2f} M instructions per saga")
        print(f"ratio (this tree / other): {here / there:.3f}x")


if __name__ == "__main__":
    main()
