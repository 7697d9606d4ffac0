"""Shared by every workload script: its command line, its timed run (``timed``: the warm-up,
the start barrier, then the sagas, at most ``--in-flight`` at once) and its JSON line.

Each workload runs in its own interpreter (the system's own virtual environment), so this
module imports only the standard library. It also holds what every workload shares:
``--provider-ms`` (each step waits that long for its provider, with ``asyncio.sleep``), the
CPU time spent between the start barrier and the JSON line (this process's user+sys, and
that of any server process the workload started, read from ``/proc/<pid>/stat``), and a
loopback-only network namespace for the systems that run a server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

STEPS = 3  # no-op durable steps per saga, for every system
WARM_UP = 20  # sagas run before the clock starts (imports, caches, schema)
NETNS_ENV = "BENCH_PEERS_NETNS"  # set inside the loopback-only network namespace

One = Callable[[str], Awaitable[object]]  # a workload's one saga, given its name
_provider_s = 0.0  # --provider-ms, in seconds
_servers: list[int] = []  # pids of server processes whose CPU time counts too
_cpu_at_go: tuple[float, float] | None = None  # (this process, servers) at the barrier
_at_stop: tuple[float, float, float] | None = None  # CPU as at go, and servers' peak RSS


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
    p.add_argument(
        "--provider-ms",
        type=float,
        default=0.0,
        help="each step waits this long for its provider (asyncio.sleep); 0: no wait at all",
    )
    opts = p.parse_args()
    global _provider_s
    _provider_s = opts.provider_ms / 1000
    return opts


async def provider() -> None:
    """What a step does besides being durable: wait ``--provider-ms`` for its provider
    (nothing at all, not even a yield, at the default 0)."""
    if _provider_s:
        await asyncio.sleep(_provider_s)


def isolate_network() -> None:
    """Re-run this script inside a new network namespace whose only interface is
    loopback (brought up), so a server's outside lookups fail at once. Uses
    ``unshare --net`` (root), else ``unshare -rn`` (a user namespace)."""
    if os.environ.get(NETNS_ENV) == "1":
        names = [name for _, name in socket.if_nameindex()]
        if names != ["lo"]:
            raise SystemExit(f"not run: network namespace has interfaces {names}")
        return
    if shutil.which("unshare") is None:
        raise SystemExit("not run: `unshare` is missing (util-linux), no network namespace")
    inner = ["sh", "-c", 'ip link set lo up && exec "$@"', "netns", sys.executable, *sys.argv]
    for flags in (["--net"], ["-rn"]):
        probe = subprocess.run(["unshare", *flags, "true"], capture_output=True, check=False)
        if probe.returncode == 0:
            os.environ[NETNS_ENV] = "1"
            os.execvp("unshare", ["unshare", *flags, "--", *inner])
    raise SystemExit("not run: cannot create a network namespace (unshare --net and -rn refused)")


def die_with_parent() -> None:
    """``preexec_fn`` of a server process: the kernel kills it if this process dies."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def watch_server(pid: int) -> None:
    """Count this server process's CPU time (and its descendants') with this process's."""
    _servers.append(pid)


def _tree_ticks(pid: int) -> int:
    """utime + stime of a process and of every descendant still alive, in clock ticks."""
    total = 0
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    total += _tree_ticks(int(child))
    return total


def cpu_seconds() -> tuple[float, float]:
    """(this process's user+sys CPU seconds, its server processes' user+sys)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    servers = sum(_tree_ticks(pid) for pid in _servers) / os.sysconf("SC_CLK_TCK")
    return own.ru_utime + own.ru_stime, servers


def server_rss_mib() -> float:
    """The largest peak RSS (VmHWM) among the server processes, in MiB (0 without one)."""
    peak = 0
    for pid in _servers:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
    return peak / 1024


def barrier(opts: argparse.Namespace) -> None:
    """Several processes start their timed work together: each says it is ready, then
    waits for the driver's go. The CPU clock of the timed work starts here."""
    global _cpu_at_go
    if opts.ready:
        Path(opts.ready).touch()
    if opts.go:
        while not os.path.exists(opts.go):
            time.sleep(0.005)
    _cpu_at_go = cpu_seconds()


async def many(n: int, at_once: int, prefix: str, one: One) -> None:
    """``one(name)`` for ``n`` sagas named ``prefix`` and a number, ``at_once`` at a time."""
    gate = asyncio.Semaphore(at_once)

    async def limited(i: int) -> None:
        async with gate:
            await one(f"{prefix}{i}")

    await asyncio.gather(*(limited(i) for i in range(n)))


async def measured(opts: argparse.Namespace, one: One) -> tuple[float, float]:
    """The timed run: from the start barrier, ``--sagas`` sagas (named ``t0``, ``t1``, ...),
    ``--in-flight`` at a time; its start and end, wall-clock."""
    barrier(opts)
    start = time.time()
    await many(opts.sagas, opts.in_flight, "t", one)
    return start, stop_clock()


async def timed(opts: argparse.Namespace, one: One) -> tuple[float, float]:
    """``--warm-up`` sagas (named ``w0``, ``w1``, ...), then the timed run (``measured``)."""
    await many(opts.warm_up, opts.in_flight, "w", one)
    return await measured(opts, one)


def stop_clock() -> float:
    """The end of the timed work: its wall-clock time; CPU times (and the servers' peak
    RSS) are taken now too, before any shutdown."""
    global _at_stop
    _at_stop = (*cpu_seconds(), server_rss_mib())
    return time.time()


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
    own, servers, server_rss = _at_stop or (*cpu_seconds(), server_rss_mib())
    own0, servers0 = _cpu_at_go or (0.0, 0.0)
    cpu = {"worker_cpu_s": own - own0, "server_cpu_s": servers - servers0}
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
        "provider_ms": opts.provider_ms,
        **cpu,
        "cpu_ms_per_saga": 1000 * (cpu["worker_cpu_s"] + cpu["server_cpu_s"]) / max(opts.sagas, 1),
        "server_peak_rss_mib": server_rss,
        **extra,
    }
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def sqlite_settings(db: str) -> dict[str, object]:
    """What a fresh connection to the file sees: the persisted journal mode and the
    default synchronous level (0 off, 1 normal, 2 full, 3 extra)."""
    if db.startswith("postgres"):
        return {}
    conn = sqlite3.connect(db)
    try:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        conn.close()
    return {"journal_mode": mode, "synchronous": sync}
