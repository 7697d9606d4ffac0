"""Shared by every workload script: its command line, the start barrier and its JSON line.

Each workload runs in its own interpreter (the system's own virtual environment), so this
module imports only the standard library.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

STEPS = 3  # no-op durable steps per saga, for every system
WARM_UP = 20  # sagas run before the clock starts (imports, caches, schema)


def parse(description: str, *, extra_modes: tuple[str, ...] = ()) -> argparse.Namespace:
    """The command line every workload understands."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mode", choices=("run", "setup", *extra_modes), default="run")
    p.add_argument("--db", required=True, help="a SQLite file path or a PostgreSQL URL")
    p.add_argument("--sagas", type=int, default=500)
    p.add_argument("--in-flight", type=int, default=1, help="sagas in flight at once")
    p.add_argument("--warm-up", type=int, default=WARM_UP)
    p.add_argument("--ready", help="create this file when set up, then wait for --go")
    p.add_argument("--go", help="start the clock once this file exists")
    p.add_argument("--tag", default="0", help="distinguishes saga ids between processes")
    return p.parse_args()


def barrier(opts: argparse.Namespace) -> None:
    """Several processes start their timed work together: each says it is ready, then
    waits for the driver's go."""
    if opts.ready:
        Path(opts.ready).touch()
    if opts.go:
        while not os.path.exists(opts.go):
            time.sleep(0.005)


def peak_rss_mib() -> float:
    """This process's own peak resident set size, in MiB.

    Linux keeps ``ru_maxrss`` across ``exec``: a process started by a large parent reports
    at least the parent's size. ``VmHWM`` in ``/proc/self/status`` belongs to this
    program's own memory map, so it is read where it exists.
    """
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def emit(system: str, opts: argparse.Namespace, start: float, end: float, **extra: Any) -> None:
    """Print the one JSON line the driver reads (wall-clock start/end let it combine
    several processes of one run)."""
    seconds = max(end - start, 1e-9)
    line = {
        "system": system,
        "sagas": opts.sagas,
        "in_flight": opts.in_flight,
        "seconds": seconds,
        "rate": opts.sagas / seconds,
        "start": start,
        "end": end,
        "peak_rss_mib": peak_rss_mib(),
        "pid": os.getpid(),
        **extra,
    }
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
