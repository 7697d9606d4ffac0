"""Does searching the sagas stay fast in a large ledger? A SQLite ledger is filled in bulk
with N sagas (with their provenance records, three steps each and the order each names,
written straight through the ledger's SQL, not the engine), then each filter of
``pivotal sagas list`` / ``GET /v1/sagas`` runs through ``Store.search_sagas`` (a page of
50): the median of each, and its ratio to an unfiltered page of 50 measured in the same
run. ``--plans`` prints SQLite's query plan of each.

    python bench/saga_search.py [--sagas 1000000] [--times 15] [--plans]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pivotal import SQLiteStore
from pivotal.store.search import SagaFilter

T0 = 1_700_000_000.0
STEP = 10.0  # seconds between two sagas' creation
PAGE = 50

# One saga in 200 (by i % 200) of each status; the rest completed.
STATUS = (
    "CASE WHEN i % 200 < 16 THEN 'compensated' WHEN i % 200 = 16 THEN 'needs_human' "
    "WHEN i % 200 = 17 THEN 'compensation_failed' WHEN i % 200 < 24 THEN 'running' "
    "WHEN i % 200 < 26 THEN 'awaiting_approval' ELSE 'completed' END"
)
FAILED = "CASE WHEN i % 200 < 18 THEN 1 ELSE 0 END"  # compensated, needs_human, failed
STEPS = ("reserve_stock", "charge_payment", "ship")


def fill(path: Path, n: int) -> None:
    """``n`` sagas, one every ``STEP`` seconds, in one transaction."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN")
    numbers = "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?) "
    conn.execute(
        numbers + "INSERT INTO provenance (ref, body) SELECT 'prov_' || i, json_object("
        "'actor_type', CASE WHEN i % 10 = 0 THEN 'human' ELSE 'agent' END, "
        "'actor_id', 'planner-' || (i % 50), 'run_id', 'run-' || i, "
        "'model', 'model-' || (i % 5), 'prompt_version', 'v' || (i % 20), "
        "'source_document_id', 'doc-' || (i / 10), "
        "'on_behalf_of', CASE WHEN i % 3 = 0 THEN 'user-' || (i % 5000) END) FROM k",
        (n,),
    )
    conn.execute(
        numbers + "INSERT INTO sagas (saga_id, catalogue, plan, plan_digest, provenance_ref, "
        "status, reason, version, outcomes, created_at, updated_at) "
        "SELECT printf('sg-%08d', i), 'catalogue-' || (i % 10), '{}', 'd', 'prov_' || i, "
        f"{STATUS}, CASE WHEN {FAILED} = 1 THEN "
        "'charge_payment failed: card declined (' || i || ')' END, 9, 3, "
        f"{T0} + i * {STEP}, {T0} + i * {STEP} + (i % 600) FROM k",
        (n,),
    )
    for idx, name in enumerate(STEPS):
        failed = f"CASE WHEN {FAILED} = 1 AND {idx} = 1 THEN 'failed' ELSE 'succeeded' END"
        conn.execute(
            numbers + "INSERT INTO steps (saga_id, idx, name, kind, status, attempts, "
            "undo_status, undo_attempts) SELECT printf('sg-%08d', i), ?, ?, 'compensable', "
            f"{failed}, 1, 'none', 0 FROM k",
            (n, idx, name),
        )
    conn.execute(
        numbers + "INSERT INTO saga_subjects (name, value, saga_id) "
        "SELECT 'order_id', 'o-' || (i / 2), printf('sg-%08d', i) FROM k",
        (n,),
    )
    conn.execute("COMMIT")
    conn.close()


def queries(n: int) -> dict[str, Mapping[str, Any]]:
    """Each filter, as a surface hands it to ``SagaFilter.parse``."""
    mid = n // 2
    day = 86_400 / STEP  # sagas a day
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(T0 + mid * STEP))
    end = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(T0 + (mid + day) * STEP))
    return {
        "status=needs_human (0.5%)": {"status": ["needs_human"]},
        "status=completed (87%)": {"status": ["completed"]},
        "status=needs_human,compensation_failed": {"status": ["needs_human,compensation_failed"]},
        "catalogue": {"catalogue": "catalogue-3"},
        "created in one day, mid-ledger": {"created_since": iso, "created_until": end},
        "updated since a day, sort=updated": {"updated_since": iso, "sort": "updated"},
        "actor_type=human (10%)": {"actor_type": "human"},
        "actor_id (2%)": {"actor_id": "planner-7"},
        "model (20%)": {"model": "model-2"},
        "run_id (one saga)": {"run_id": f"run-{mid}"},
        "prompt_version (5%)": {"prompt_version": "v3"},
        "on_behalf_of": {"on_behalf_of": "user-42"},
        "source_document_id": {"source_document_id": f"doc-{mid // 10}"},
        "failed_step": {"failed_step": "charge_payment"},
        "failed_step, none matches": {"failed_step": "ship"},
        "reason substring": {"reason": "DECLINED"},
        "reason substring, one saga": {"reason": f"({mid})"},
        "about order_id": {"about": [f"order_id=o-{mid // 2}"]},
        "catalogue + status + created since": {
            "catalogue": "catalogue-3",
            "status": ["compensated"],
            "created_since": iso,
        },
        "actor_id + status=completed": {"actor_id": "planner-7", "status": ["completed"]},
        "model + status=needs_human": {"model": "model-2", "status": ["needs_human"]},
        "run_id + status=completed": {"run_id": f"run-{mid}", "status": ["completed"]},
        "failed_step + catalogue": {"failed_step": "charge_payment", "catalogue": "catalogue-3"},
        "sort=updated order=asc": {"sort": "updated", "order": "asc"},
    }


async def timed(store: SQLiteStore, wanted: SagaFilter, times: int, pages: int = 1) -> float:
    """Median milliseconds of reading ``pages`` pages of ``PAGE`` (the last one timed)."""
    cursor = None
    for _ in range(pages - 1):
        cursor = (await store.search_sagas(wanted, PAGE, cursor)).next_cursor
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        await store.search_sagas(wanted, PAGE, cursor)
        spent.append((time.perf_counter() - start) * 1000)
    return statistics.median(spent)


def plan_of(path: Path, wanted: SagaFilter) -> str:
    """SQLite's plan of the search (each way, when the probe decides between two)."""
    conn = sqlite3.connect(path)
    try:
        rows = []
        ways = [None, *range(len(wanted.probes("sqlite")))]
        for lookup in ways:
            sql, params = wanted.sql("sqlite", PAGE + 1, None, lookup=lookup)
            rows += conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()
            rows.append((0, 0, 0, "|"))
    finally:
        conn.close()
    return "; ".join(str(r[3]) for r in rows)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sagas", type=int, default=1_000_000, help="sagas in the ledger")
    parser.add_argument("--times", type=int, default=15, help="runs of each query")
    parser.add_argument("--plans", action="store_true", help="print each query's plan")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        async with SQLiteStore(path):
            pass  # the schema, every migration applied
        start = time.perf_counter()
        fill(path, args.sagas)
        print(f"{args.sagas:,} sagas filled in {time.perf_counter() - start:.1f} s")
        now = T0 + (args.sagas + 1) * STEP
        async with SQLiteStore(path) as store:
            base = await timed(store, SagaFilter(), args.times)
            legacy = statistics.median(
                [await _legacy(store) for _ in range(args.times)]
            )  # list_sagas, as before
            print(f"{'query (a page of 50)':48} {'median ms':>10} {'ratio':>7}")
            print(f"{'unfiltered (the baseline)':48} {base:10.2f} {1.0:7.2f}")
            print(
                f"{'list_sagas(None, 50) (the old listing)':48} {legacy:10.2f} {legacy / base:7.2f}"
            )
            third = await timed(store, SagaFilter(), args.times, pages=3)
            print(f"{'unfiltered, third page by cursor':48} {third:10.2f} {third / base:7.2f}")
            for name, given in queries(args.sagas).items():
                wanted = SagaFilter.parse(given, now)
                spent = await timed(store, wanted, args.times)
                print(f"{name:48} {spent:10.2f} {spent / base:7.2f}")
                if args.plans:
                    print(f"    {plan_of(path, wanted)}")


async def _legacy(store: SQLiteStore) -> float:
    start = time.perf_counter()
    await store.list_sagas(None, PAGE)
    return (time.perf_counter() - start) * 1000


if __name__ == "__main__":
    asyncio.run(main())
