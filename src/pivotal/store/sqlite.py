"""The embedded ledger: SQLite in WAL mode, one writer thread per store."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from pivotal.errors import LeaseLost, SchemaMismatch, StoreError
from pivotal.plan import Plan, Provenance
from pivotal.state import ApprovalStatus, Event, SagaState, SagaStatus
from pivotal.store import rows
from pivotal.store.base import DeadLetter, PendingApproval, SagaSummary, StoredSaga
from pivotal.store.schema import SQLITE_MIGRATIONS

T = TypeVar("T")


class SQLiteStore:
    """A ledger in one SQLite file. Several processes may share the file."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pivotal-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None

    # -- plumbing -----------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite ledger {self.path}: {exc}") from exc

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """Reads run on their own connection in the caller's thread, as one snapshot."""
        if self._reader is None:
            return await self._call(lambda: fn(self.conn, *args))
        conn = self._reader
        try:
            conn.execute("BEGIN")
            try:
                return fn(conn, *args)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"sqlite ledger {self.path}: {exc}") from exc

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the store is not open; call open() first")
        return self._conn

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return out

    def _open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        self._conn = conn
        self._write(self._migrate)

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
            "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        current = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version").fetchone()[0]
        if current > len(SQLITE_MIGRATIONS):
            raise SchemaMismatch(
                f"ledger {self.path} has schema version {current}, newer than this Pivotal "
                f"knows ({len(SQLITE_MIGRATIONS)}); upgrade Pivotal"
            )
        for version in range(current + 1, len(SQLITE_MIGRATIONS) + 1):
            for statement in SQLITE_MIGRATIONS[version - 1].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    async def open(self) -> None:
        await self._call(self._open)
        if self.path != ":memory:":
            reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            reader.execute("PRAGMA busy_timeout = 10000")
            self._reader = reader

    async def close(self) -> None:
        def _close() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await self._call(_close)
        self._executor.shutdown(wait=True)
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    async def __aenter__(self) -> SQLiteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sagas --------------------------------------------------------------------------

    async def create(
        self, state: SagaState, plan: Plan, provenance: Provenance, events: Sequence[Event]
    ) -> bool:
        def txn(conn: sqlite3.Connection) -> bool:
            exists = conn.execute(
                "SELECT 1 FROM sagas WHERE saga_id = ?", (state.saga_id,)
            ).fetchone()
            if exists:
                return False
            conn.execute(
                "INSERT OR IGNORE INTO provenance (ref, body) VALUES (?, ?)",
                (state.provenance_ref, provenance.model_dump_json()),
            )
            conn.execute(
                "INSERT INTO sagas (saga_id, catalogue, plan, plan_digest, provenance_ref, "
                "status, reason, version, outcomes, created_at, updated_at, wake_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    state.saga_id,
                    state.catalogue,
                    plan.to_json(),
                    state.plan_digest,
                    state.provenance_ref,
                    state.status.value,
                    state.reason,
                    state.version,
                    state.outcomes,
                    state.created_at,
                    state.updated_at,
                    state.wake_at,
                ),
            )
            conn.executemany(
                f"INSERT INTO steps ({rows.STEP_COLUMNS}) VALUES ({_marks(15)})",
                [rows.step_row(state.saga_id, r) for r in state.steps],
            )
            self._insert_events(conn, state, events)
            return True

        return await self._call(self._write, txn)

    def _insert_events(
        self, conn: sqlite3.Connection, state: SagaState, events: Sequence[Event]
    ) -> None:
        conn.executemany(
            f"INSERT INTO events ({rows.EVENT_COLUMNS}) VALUES ({_marks(8)})",
            [rows.event_row(state.saga_id, state.provenance_ref, e) for e in events],
        )

    def _load(self, conn: sqlite3.Connection, saga_id: str) -> StoredSaga | None:
        row = conn.execute(
            f"SELECT {rows.SAGA_COLUMNS}, plan FROM sagas WHERE saga_id = ?", (saga_id,)
        ).fetchone()
        if row is None:
            return None
        steps = [
            rows.step_from_row(r)
            for r in conn.execute(
                f"SELECT {rows.STEP_COLUMNS} FROM steps WHERE saga_id = ? ORDER BY idx",
                (saga_id,),
            )
        ]
        a = conn.execute(
            f"SELECT {rows.APPROVAL_COLUMNS} FROM approvals WHERE saga_id = ?", (saga_id,)
        ).fetchone()
        approval = rows.approval_from_row(a) if a else None
        state = rows.saga_from_row(row, steps, approval)
        return StoredSaga(state, Plan.model_validate_json(row[10]))

    async def load(self, saga_id: str) -> StoredSaga | None:
        return await self._read(self._load, saga_id)

    async def commit(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int | None
    ) -> None:
        def txn(conn: sqlite3.Connection) -> None:
            fence = " AND lease_epoch = ?" if epoch is not None else ""
            params: tuple[Any, ...] = (
                after.status.value,
                after.reason,
                after.version,
                after.outcomes,
                after.updated_at,
                after.wake_at,
                after.saga_id,
                before.version,
            )
            cur = conn.execute(
                "UPDATE sagas SET status = ?, reason = ?, version = ?, outcomes = ?, "
                "updated_at = ?, wake_at = ? WHERE saga_id = ? AND version = ?" + fence,
                (*params, epoch) if epoch is not None else params,
            )
            if cur.rowcount != 1:
                raise LeaseLost(
                    f"saga {after.saga_id} changed under this writer (expected version "
                    f"{before.version}, lease epoch {epoch}); the write was refused"
                )
            changed = rows.changed_steps(before, after)
            if changed:
                conn.executemany(
                    f"INSERT OR REPLACE INTO steps ({rows.STEP_COLUMNS}) VALUES ({_marks(15)})",
                    [rows.step_row(after.saga_id, r) for r in changed],
                )
            if after.approval is not None and after.approval != before.approval:
                conn.execute(
                    f"INSERT OR REPLACE INTO approvals ({rows.APPROVAL_COLUMNS}) "
                    f"VALUES ({_marks(10)})",
                    rows.approval_row(after.saga_id, after.approval),
                )
            for sql, params in rows.dead_letter_changes(before, after, events):
                conn.execute(sql, params)
            self._insert_events(conn, after, events)

        await self._call(self._write, txn)

    async def events(self, saga_id: str) -> list[Event]:
        def read(conn: sqlite3.Connection) -> list[Event]:
            return [
                rows.event_from_row(r)
                for r in conn.execute(
                    f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE saga_id = ? ORDER BY seq",
                    (saga_id,),
                )
            ]

        return await self._read(read)

    async def provenance(self, ref: str) -> Provenance | None:
        def read(conn: sqlite3.Connection) -> Provenance | None:
            row = conn.execute("SELECT body FROM provenance WHERE ref = ?", (ref,)).fetchone()
            return Provenance.model_validate_json(row[0]) if row else None

        return await self._read(read)

    # -- leases -------------------------------------------------------------------------

    async def claim(self, saga_id: str, owner: str, ttl: float, now: float) -> int | None:
        def txn(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(
                "UPDATE sagas SET lease_owner = ?, lease_epoch = lease_epoch + 1, "
                "lease_expires_at = ? WHERE saga_id = ? AND (lease_owner IS NULL OR "
                "lease_owner = ? OR lease_expires_at < ?) RETURNING lease_epoch",
                (owner, now + ttl, saga_id, owner, now),
            ).fetchone()
            return None if row is None else int(row[0])

        return await self._call(self._write, txn)

    async def claim_next(
        self, owner: str, ttl: float, now: float, limit: int
    ) -> list[tuple[str, int]]:
        def txn(conn: sqlite3.Connection) -> list[tuple[str, int]]:
            found = conn.execute(
                "UPDATE sagas SET lease_owner = ?, lease_epoch = lease_epoch + 1, "
                "lease_expires_at = ? WHERE saga_id IN (SELECT saga_id FROM sagas WHERE "
                f"{rows.RUNNABLE} ORDER BY updated_at LIMIT ?) AND {rows.RUNNABLE} "
                "RETURNING saga_id, lease_epoch",
                (owner, now + ttl, now, now, now, limit, now, now, now),
            ).fetchall()
            return [(str(r[0]), int(r[1])) for r in found]

        return await self._call(self._write, txn)

    async def heartbeat(
        self, owner: str, leases: Mapping[str, int], ttl: float, now: float
    ) -> set[str]:
        def txn(conn: sqlite3.Connection) -> set[str]:
            held = set()
            for saga_id, epoch in leases.items():
                cur = conn.execute(
                    "UPDATE sagas SET lease_expires_at = ? WHERE saga_id = ? AND "
                    "lease_owner = ? AND lease_epoch = ?",
                    (now + ttl, saga_id, owner, epoch),
                )
                if cur.rowcount == 1:
                    held.add(saga_id)
            return held

        return await self._call(self._write, txn)

    async def expire_leases(self, now: float) -> list[str]:
        def txn(conn: sqlite3.Connection) -> list[str]:
            found = conn.execute(
                "UPDATE sagas SET lease_owner = NULL, lease_expires_at = NULL, "
                "lease_epoch = lease_epoch + 1 WHERE lease_owner IS NOT NULL AND "
                "lease_expires_at < ? RETURNING saga_id",
                (now,),
            ).fetchall()
            return [str(r[0]) for r in found]

        return await self._call(self._write, txn)

    async def release(self, saga_id: str, epoch: int) -> None:
        def txn(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE sagas SET lease_owner = NULL, lease_expires_at = NULL "
                "WHERE saga_id = ? AND lease_epoch = ?",
                (saga_id, epoch),
            )

        await self._call(self._write, txn)

    # -- operator views -----------------------------------------------------------------

    async def list_sagas(
        self, status: SagaStatus | None = None, limit: int = 100
    ) -> list[SagaSummary]:
        def read(conn: sqlite3.Connection) -> list[SagaSummary]:
            where, params = ("WHERE status = ?", (status.value,)) if status else ("", ())
            cur = conn.execute(
                "SELECT saga_id, catalogue, status, reason, created_at, updated_at FROM sagas "
                f"{where} ORDER BY created_at DESC, saga_id LIMIT ?",
                (*params, limit),
            )
            return [SagaSummary(r[0], r[1], SagaStatus(r[2]), r[3], r[4], r[5]) for r in cur]

        return await self._read(read)

    async def pending_approvals(self) -> list[PendingApproval]:
        def read(conn: sqlite3.Connection) -> list[PendingApproval]:
            cur = conn.execute(
                "SELECT "
                + ", ".join(f"a.{c.strip()}" for c in rows.APPROVAL_COLUMNS.split(","))
                + ", s.catalogue, st.name FROM approvals a JOIN sagas s USING (saga_id) "
                "JOIN steps st ON st.saga_id = a.saga_id AND st.idx = a.step "
                "WHERE a.status = ? ORDER BY a.requested_at",
                (ApprovalStatus.PENDING.value,),
            )
            return [PendingApproval(r[0], r[10], r[11], rows.approval_from_row(r)) for r in cur]

        return await self._read(read)

    async def dead_letters(
        self, status: str | None = "open", *, due_by: float | None = None, id: int | None = None
    ) -> list[DeadLetter]:
        def read(conn: sqlite3.Connection) -> list[DeadLetter]:
            clauses, params = rows.dead_letter_filter(status, due_by, id)
            cur = conn.execute(
                f"SELECT {rows.DEAD_LETTER_COLUMNS} FROM dead_letters {clauses} ORDER BY id",
                params,
            )
            return [DeadLetter(*r) for r in cur]

        return await self._read(read)


def _marks(n: int) -> str:
    return ", ".join("?" * n)
