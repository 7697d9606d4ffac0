"""What claims and sweeps read does not grow with the finished sagas in the ledger: their
statements search an index (never a scan of every saga), on a SQLite ledger as migrated."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pivotal import SQLiteStore
from pivotal.store import queries as q


async def plan_of(path: Path, sql: str, params: tuple[object, ...]) -> list[str]:
    """The plan SQLite picks for ``sql`` in a ledger of mostly finished sagas, with the
    statistics ``ANALYZE`` gathers (what a long-lived ledger has)."""
    async with SQLiteStore(path):
        pass  # migrated
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO sagas (saga_id, catalogue, plan, plan_digest, provenance_ref, status, "
            "version, created_at, updated_at, lease_owner, lease_expires_at) "
            "VALUES (?, 'c', '{}', 'd', 'p', ?, 1, 0, 0, ?, ?)",
            [
                (f"s{n}", "completed" if n % 100 else "running", None, None)
                if n % 50
                else (f"s{n}", "running", "w", 10.0)
                for n in range(3000)
            ],
        )
        conn.execute("ANALYZE")
        return [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


@pytest.mark.parametrize(
    ("name", "sql", "params"),
    [
        ("claim", q.SQLITE.claim_runnable, ("o", "t", 1.0, 1.0, 1.0, 1.0, 8, 1.0, 1.0, 1.0)),
        # a worker that serves some catalogues, passing over sagas it cannot serve
        ("claim served", *q.claim_next(q.SQLITE, ("o", "t", 1.0), 1.0, 8, ["c", "d"], ["s1"])),
        ("claim of a catalogue", *q.claim_next(q.SQLITE, ("o", "t", 1.0), 1.0, 8, ["c"], [])),
        ("expire leases", q.EXPIRE_LEASES, (1.0,)),
    ],
)
async def test_claims_and_sweeps_search_an_index(
    tmp_path: Path, name: str, sql: str, params: tuple[object, ...]
) -> None:
    steps = await plan_of(tmp_path / "ledger.db", sql, params)
    scans = [s for s in steps if s.startswith("SCAN sagas") and "USING INDEX" not in s]
    assert not scans, (name, steps)
    assert any("INDEX" in s for s in steps), (name, steps)
