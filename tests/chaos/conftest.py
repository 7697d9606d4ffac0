"""Chaos fixtures: emptying the PostgreSQL ledger between runs, cheaply.

Every chaos run uses the one saga id ``SAGA_ID``; deleting that saga's rows (a few dozen)
is far cheaper than truncating every table, which dominated the cost of a run. The test
database also stops waiting for its WAL to reach the disk at each commit: the runs crash the
engine, never the database server, so durability against power loss is not under test.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import psycopg
import pytest

from pivotal.testing.chaos import SAGA_ID

Forget = Callable[[str], Awaitable[None]]

_BY_SAGA = (
    "events",
    "steps",
    "approvals",
    "dead_letters",
    "saga_subjects",
    "exposure",
    "sagas",
)  # children first
_TUNED: set[str] = set()


async def forget_chaos_saga(url: str) -> None:
    """Delete the chaos saga, its rows and the provenance no saga refers to any more."""
    if url not in _TUNED:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as admin:
            found = await (await admin.execute("SELECT current_database()")).fetchone()
            assert found is not None
            name = str(found[0]).replace('"', '""')
            await admin.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        _TUNED.add(url)
    async with await psycopg.AsyncConnection.connect(url, autocommit=False) as conn:
        async with conn.pipeline():
            for table in _BY_SAGA:
                await conn.execute(f"DELETE FROM {table} WHERE saga_id = %s", (SAGA_ID,))
            await conn.execute(
                "DELETE FROM provenance p WHERE NOT EXISTS "
                "(SELECT 1 FROM sagas s WHERE s.provenance_ref = p.ref)"
            )
        await conn.commit()


@pytest.fixture
def forget_saga() -> Forget:
    """``await forget_saga(url)`` empties the ledger at ``url`` of the chaos saga."""
    return forget_chaos_saga
