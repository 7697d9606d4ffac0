"""What operations read from any SQL ledger: counts and ages for gauges, worker beats.

Part of every ``SQLStore`` (SQLite and PostgreSQL alike), written once over the backend
primitives. Every read is one aggregate over an indexed column (``dead_letters(status, …)``,
``approvals(status)``, ``outbox(status, …)``), the small ``workers`` table and the sagas'
counts by status (``Dialect.sagas_by_status``: a table SQLite keeps, whatever the ledger's
size), all in one read snapshot, so the figures agree with each other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from pivotal.store.base import MISSED_BEATS, UNKNOWN_BEAT_SPAN, OpsSnapshot, WorkerInfo
from pivotal.store.primitives import Fetch, SQLPrimitives, Stmt
from pivotal.store.queries import Dialect

OPEN_DEAD_LETTERS = "SELECT COUNT(*), MIN(created_at) FROM dead_letters WHERE status = 'open'"
PENDING_APPROVALS = (
    "SELECT COUNT(*), MIN(requested_at), MIN(expires_at) FROM approvals WHERE status = 'pending'"
)
OUTBOX_BACKLOG = (
    "SELECT status, COUNT(*), MIN(created_at) FROM outbox "
    "WHERE status IN ('pending', 'dead') GROUP BY status"
)
# alive: beat recently and did not say it stopped; the newest beat of any running worker
WORKERS = (
    "SELECT COALESCE(SUM(CASE WHEN heartbeat_at >= ? THEN 1 ELSE 0 END), 0), MAX(heartbeat_at) "
    "FROM workers WHERE stopped_at IS NULL"
)
# The first beat of a name records its start; a stop is recorded with a last beat; a beat
# after a stop is a restart under the same name: it starts again and is running again.
BEAT_WORKER = (
    "INSERT INTO workers (name, started_at, heartbeat_at, stopped_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, "
    "stopped_at = excluded.stopped_at, started_at = CASE "
    "WHEN workers.stopped_at IS NOT NULL AND excluded.stopped_at IS NULL "
    "THEN excluded.started_at ELSE workers.started_at END"
)
# A start takes the name unless its worker is live: not stopped, and its last beat not
# older than a few of its beat intervals (see ``WorkerInfo.state``). One statement, so two
# workers starting at once under one name cannot both take it.
START_WORKER = (
    "INSERT INTO workers (name, started_at, heartbeat_at, stopped_at, version, catalogues, "
    "beat_every) VALUES (?, ?, ?, NULL, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET started_at = excluded.started_at, "
    "heartbeat_at = excluded.heartbeat_at, stopped_at = NULL, version = excluded.version, "
    "catalogues = excluded.catalogues, beat_every = excluded.beat_every "
    "WHERE workers.stopped_at IS NOT NULL "
    "OR workers.heartbeat_at < ? - COALESCE(? * workers.beat_every, ?) "
    "RETURNING name"
)
WORKER_COLUMNS = "name, started_at, heartbeat_at, stopped_at, version, catalogues, beat_every"
WORKER_NAMED = f"SELECT {WORKER_COLUMNS} FROM workers WHERE name = ?"
LIST_WORKERS = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY heartbeat_at DESC, name LIMIT ?"
# by the partial index on held leases: the sagas still leased, whoever holds them
HELD_LEASES = (
    "SELECT lease_owner, saga_id FROM sagas "
    "WHERE lease_owner IS NOT NULL AND lease_expires_at > ? ORDER BY saga_id"
)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _worker(row: Any, leases: Sequence[str] = ()) -> WorkerInfo:
    try:
        served = json.loads(row[5] or "[]")
    except ValueError:
        served = []
    return WorkerInfo(
        name=str(row[0]),
        started_at=float(row[1]),
        heartbeat_at=float(row[2]),
        stopped_at=_float(row[3]),
        version=None if row[4] is None else str(row[4]),
        catalogues=tuple(str(c) for c in served) if isinstance(served, list) else (),
        beat_every=_float(row[6]),
        leases=tuple(leases),
    )


class SQLOps(SQLPrimitives):
    """Operations views over the backend primitives."""

    dialect: ClassVar[Dialect]  # the store's (``SQLStore`` sets it)

    async def ops_snapshot(self, now: float, alive_within: float = 60.0) -> OpsSnapshot:
        """Counts and ages for gauges (every saga status that has sagas); a worker is alive
        when it beat within ``alive_within`` seconds and has not said it stopped."""

        async def read(fetch: Fetch) -> OpsSnapshot:
            by_status = {str(s): int(n) for s, n in await fetch(self.dialect.sagas_by_status, ())}
            [(letters, oldest_letter)] = await fetch(OPEN_DEAD_LETTERS, ())
            [(approvals, oldest_request, soonest_expiry)] = await fetch(PENDING_APPROVALS, ())
            outbox = {str(r[0]): (int(r[1]), r[2]) for r in await fetch(OUTBOX_BACKLOG, ())}
            [(alive, newest_beat)] = await fetch(WORKERS, (now - alive_within,))
            pending, oldest_message = outbox.get("pending", (0, None))
            return OpsSnapshot(
                at=now,
                sagas_by_status=by_status,
                open_dead_letters=int(letters),
                oldest_open_dead_letter_at=_float(oldest_letter),
                pending_approvals=int(approvals),
                oldest_approval_requested_at=_float(oldest_request),
                soonest_approval_expires_at=_float(soonest_expiry),
                outbox_pending=pending,
                outbox_dead=outbox.get("dead", (0, None))[0],
                oldest_pending_message_at=_float(oldest_message),
                workers_alive=int(alive),
                last_worker_heartbeat_at=_float(newest_beat),
            )

        return await self._reading(read)

    async def beat_worker(self, name: str, now: float, *, stopped: bool = False) -> None:
        """Record that worker ``name`` is alive at ``now`` (or, with ``stopped``, that it
        stopped); the first beat of a name records when it started, and so does the first
        beat after it stopped (a restart under the same name)."""
        await self._batch([Stmt(BEAT_WORKER, (name, now, now, now if stopped else None))])

    async def start_worker(
        self,
        name: str,
        now: float,
        *,
        version: str,
        catalogues: Sequence[str],
        beat_every: float,
    ) -> WorkerInfo | None:
        """Record that worker ``name`` starts at ``now``, unless a live worker has that
        name: then nothing is written and that worker is returned."""
        served = json.dumps(sorted(catalogues))
        terms = (name, now, now, version, served, beat_every, now, MISSED_BEATS)
        stmt = Stmt(START_WORKER, (*terms, UNKNOWN_BEAT_SPAN), returning=True)
        result = await self._batch([stmt])
        if result.rows and result.rows[0]:
            return None
        rows = await self._fetch(WORKER_NAMED, (name,))
        if not rows:  # pragma: no cover - a row kept the name, and rows are never deleted
            return None
        return _worker(rows[0])

    async def list_workers(self, now: float, limit: int = 100) -> list[WorkerInfo]:
        """The workers recorded, the latest heartbeat first, each with the sagas whose
        lease it holds at ``now``."""

        async def read(fetch: Fetch) -> list[WorkerInfo]:
            rows = await fetch(LIST_WORKERS, (limit,))
            held: dict[str, list[str]] = {}
            for owner, saga_id in await fetch(HELD_LEASES, (now,)):
                held.setdefault(str(owner), []).append(str(saga_id))
            return [_worker(r, held.get(str(r[0]), ())) for r in rows]

        return await self._reading(read)
