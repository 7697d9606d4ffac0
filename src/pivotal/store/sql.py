"""The ledger in SQL, once for every backend.

Backends supply two primitives: ``_batch`` runs statements in one write transaction, and
``_snapshot`` yields a fetch function reading one consistent snapshot. Statements are
written with ``?`` placeholders; a backend with another style translates them.
"""

from __future__ import annotations

import asyncio
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pivotal.errors import LeaseLost, VersionConflict
from pivotal.plan import Plan, Provenance
from pivotal.state import ApprovalStatus, Event, SagaState, SagaStatus
from pivotal.store import rows
from pivotal.store.base import DeadLetter, PendingApproval, SagaSummary, StoredSaga

T = TypeVar("T")
Row = tuple[Any, ...]
Fetch = Callable[[str, Sequence[Any]], Awaitable[list[Row]]]


@dataclass(frozen=True)
class Stmt:
    """One statement of a write batch."""

    sql: str
    params: Sequence[Any] = ()
    many: bool = False  # params is a sequence of parameter tuples
    fence: str | None = None  # must touch exactly one row, else LeaseLost(fence)
    guard: bool = False  # touching no row ends the batch early (what ran is kept)
    returning: bool = False  # collect the rows it returns

    def ends_batch(self, rowcount: int) -> bool:
        """Apply the fence and the guard to the rows this statement touched: a failed
        fence raises ``LeaseLost``; True when the guard ends the batch here."""
        if self.fence is not None and rowcount != 1:
            raise LeaseLost(self.fence)
        return self.guard and rowcount == 0


@dataclass
class BatchResult:
    stopped: bool = False  # a guard ended the batch
    rows: list[list[Row]] = field(default_factory=list)  # per returning statement


def _marks(n: int) -> str:
    return ", ".join("?" * n)


SAGA_INSERT = (
    "INSERT INTO sagas (saga_id, catalogue, plan, plan_digest, provenance_ref, status, reason, "
    "version, outcomes, created_at, updated_at, wake_at) VALUES (" + _marks(12) + ") "
    "ON CONFLICT (saga_id) DO NOTHING"
)
PROVENANCE_INSERT = "INSERT INTO provenance (ref, body) VALUES (?, ?) ON CONFLICT (ref) DO NOTHING"
STEP_UPSERT = (
    f"INSERT INTO steps ({rows.STEP_COLUMNS}) VALUES ({_marks(15)}) "
    "ON CONFLICT (saga_id, idx) DO UPDATE SET status = excluded.status, "
    "attempts = excluded.attempts, result = excluded.result, error = excluded.error, "
    "next_attempt_at = excluded.next_attempt_at, seq = excluded.seq, "
    "undo_status = excluded.undo_status, undo_attempts = excluded.undo_attempts, "
    "undo_error = excluded.undo_error, undo_next_attempt_at = excluded.undo_next_attempt_at"
)
APPROVAL_UPSERT = (
    f"INSERT INTO approvals ({rows.APPROVAL_COLUMNS}) VALUES ({_marks(10)}) "
    "ON CONFLICT (saga_id) DO UPDATE SET step = excluded.step, status = excluded.status, "
    "reason = excluded.reason, rationale = excluded.rationale, "
    "requested_at = excluded.requested_at, expires_at = excluded.expires_at, "
    "decided_at = excluded.decided_at, approver = excluded.approver, note = excluded.note"
)
EVENT_INSERT = f"INSERT INTO events ({rows.EVENT_COLUMNS}) VALUES ({_marks(8)})"
SAGA_UPDATE = (
    "UPDATE sagas SET status = ?, reason = ?, version = ?, outcomes = ?, updated_at = ?, "
    "wake_at = ?, idle_passes = 0, last_error = NULL WHERE saga_id = ? AND version = ?"
)
# A claim marks what it took with a token of its own, and reads back by that token: a claim
# retried after its reply was lost also gets back what its first try took.
CLAIMED = "SELECT saga_id, lease_epoch FROM sagas WHERE lease_token = ? ORDER BY saga_id"
FREE = "(lease_owner IS NULL OR lease_expires_at < ?)"


class SQLStore(ABC):
    """Every store operation, over the two backend primitives."""

    skip_locked = ""  # appended to candidate selection where the backend supports it

    @abstractmethod
    async def _batch(self, stmts: Sequence[Stmt]) -> BatchResult: ...

    @abstractmethod
    def _snapshot(self) -> AbstractAsyncContextManager[Fetch]: ...

    async def _reading(self, read: Callable[[Fetch], Awaitable[T]]) -> T:
        """Run ``read`` against one snapshot (a backend may retry it after a lost link)."""
        async with self._snapshot() as fetch:
            return await read(fetch)

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return await self._reading(lambda fetch: fetch(sql, params))

    def _notify(self, saga_id: str) -> list[Stmt]:
        """Statements telling idle workers that ``saga_id`` may be runnable (if supported)."""
        return []

    async def wait_for_work(self, seconds: float) -> None:
        """Return when new work may be runnable, or after ``seconds`` (polling)."""
        await asyncio.sleep(seconds)

    # -- sagas --------------------------------------------------------------------------

    async def create(
        self, state: SagaState, plan: Plan, provenance: Provenance, events: Sequence[Event]
    ) -> bool:
        saga = (
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
        )
        result = await self._batch(
            [
                Stmt(PROVENANCE_INSERT, (state.provenance_ref, provenance.model_dump_json())),
                Stmt(SAGA_INSERT, saga, guard=True),
                Stmt(
                    STEP_UPSERT, [rows.step_row(state.saga_id, r) for r in state.steps], many=True
                ),
                self._events(state, events),
                *self._notify(state.saga_id),
            ]
        )
        return not result.stopped

    @staticmethod
    def _events(state: SagaState, events: Sequence[Event]) -> Stmt:
        return Stmt(
            EVENT_INSERT,
            [rows.event_row(state.saga_id, state.provenance_ref, e) for e in events],
            many=True,
        )

    async def load(self, saga_id: str) -> StoredSaga | None:
        async def read(fetch: Fetch) -> tuple[list[Row], list[Row], list[Row]]:
            found = await fetch(
                f"SELECT {rows.SAGA_COLUMNS}, plan, idle_passes, last_error FROM sagas "
                "WHERE saga_id = ?",
                (saga_id,),
            )
            if not found:
                return [], [], []
            steps = await fetch(
                f"SELECT {rows.STEP_COLUMNS} FROM steps WHERE saga_id = ? ORDER BY idx",
                (saga_id,),
            )
            approval = await fetch(
                f"SELECT {rows.APPROVAL_COLUMNS} FROM approvals WHERE saga_id = ?", (saga_id,)
            )
            return found, steps, approval

        found, steps, approval = await self._reading(read)
        if not found:
            return None
        state = rows.saga_from_row(
            found[0],
            [rows.step_from_row(r) for r in steps],
            rows.approval_from_row(approval[0]) if approval else None,
        )
        row = found[0]
        return StoredSaga(state, Plan.model_validate_json(row[10]), int(row[11]), row[12])

    async def commit(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int | None
    ) -> None:
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
        fence = (
            f"saga {after.saga_id} changed under this writer (expected version "
            f"{before.version}, lease epoch {epoch}); the write was refused"
        )
        stmts = [
            Stmt(SAGA_UPDATE + " AND lease_epoch = ?", (*params, epoch), fence=fence)
            if epoch is not None
            else Stmt(SAGA_UPDATE, params, fence=fence)
        ]
        changed = rows.changed_steps(before, after)
        if changed:
            stmts.append(
                Stmt(STEP_UPSERT, [rows.step_row(after.saga_id, r) for r in changed], many=True)
            )
        if after.approval is not None and after.approval != before.approval:
            stmts.append(Stmt(APPROVAL_UPSERT, rows.approval_row(after.saga_id, after.approval)))
        stmts += [Stmt(sql, p) for sql, p in rows.dead_letter_changes(after, events)]
        stmts.append(self._events(after, events))
        if epoch is None:  # a decision from outside a worker (approval, operator)
            stmts += self._notify(after.saga_id)
        try:
            await self._batch(stmts)
        except LeaseLost as exc:
            if await self._landed(after, events, epoch):
                return
            raise await self._refusal(before, epoch, exc) from exc

    async def _landed(self, after: SagaState, events: Sequence[Event], epoch: int | None) -> bool:
        """Whether a refused write is in fact our own, landed by an earlier try whose reply
        was lost (only a backend that retries after a lost link can meet one)."""
        return False

    async def _refusal(self, before: SagaState, epoch: int | None, exc: LeaseLost) -> Exception:
        """Tell a lost lease (the epoch moved on) from a version conflict (reload)."""
        found = await self._fetch(
            "SELECT version, lease_epoch FROM sagas WHERE saga_id = ?", (before.saga_id,)
        )
        if found and (epoch is None or int(found[0][1]) == epoch):
            return VersionConflict(
                f"saga {before.saga_id} changed under this writer (version {found[0][0]}, "
                f"expected {before.version}); the write was refused"
            )
        return exc

    async def events(self, saga_id: str) -> list[Event]:
        found = await self._fetch(
            f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE saga_id = ? ORDER BY seq", (saga_id,)
        )
        return [rows.event_from_row(r) for r in found]

    async def provenance(self, ref: str) -> Provenance | None:
        found = await self._fetch("SELECT body FROM provenance WHERE ref = ?", (ref,))
        return Provenance.model_validate_json(found[0][0]) if found else None

    # -- leases -------------------------------------------------------------------------

    async def claim(self, saga_id: str, owner: str, ttl: float, now: float) -> int | None:
        token = uuid.uuid4().hex
        result = await self._batch(
            [
                Stmt(
                    "UPDATE sagas SET lease_owner = ?, lease_token = ?, "
                    "lease_epoch = lease_epoch + 1, lease_expires_at = ?, "
                    f"idle_passes = idle_passes + 1 WHERE saga_id = ? AND {FREE}",
                    (owner, token, now + ttl, saga_id, now),
                ),
                Stmt(CLAIMED, (token,), returning=True),
            ]
        )
        found = result.rows[0]
        return int(found[0][1]) if found else None

    async def claim_next(
        self, owner: str, ttl: float, now: float, limit: int
    ) -> list[tuple[str, int]]:
        token = uuid.uuid4().hex
        result = await self._batch(
            [
                Stmt(
                    "UPDATE sagas SET lease_owner = ?, lease_token = ?, "
                    "lease_epoch = lease_epoch + 1, lease_expires_at = ?, "
                    "idle_passes = idle_passes + 1 WHERE saga_id IN (SELECT saga_id FROM sagas "
                    f"WHERE {rows.RUNNABLE} ORDER BY updated_at LIMIT ?{self.skip_locked}) AND "
                    f"{rows.RUNNABLE}",
                    (owner, token, now + ttl, now, now, now, limit, now, now, now),
                ),
                Stmt(CLAIMED, (token,), returning=True),
            ]
        )
        return [(str(r[0]), int(r[1])) for r in result.rows[0]]

    async def heartbeat(
        self, owner: str, leases: Mapping[str, int], ttl: float, now: float
    ) -> set[str]:
        sql = (
            "UPDATE sagas SET lease_expires_at = ? WHERE saga_id = ? AND lease_owner = ? AND "
            "lease_epoch = ? RETURNING saga_id"
        )
        result = await self._batch(
            [
                Stmt(sql, (now + ttl, saga_id, owner, epoch), returning=True)
                for saga_id, epoch in leases.items()
            ]
        )
        return {str(r[0]) for found in result.rows for r in found}

    async def expire_leases(self, now: float) -> list[str]:
        result = await self._batch(
            [
                Stmt(
                    "UPDATE sagas SET lease_owner = NULL, lease_expires_at = NULL, "
                    "lease_epoch = lease_epoch + 1 WHERE lease_owner IS NOT NULL AND "
                    "lease_expires_at < ? RETURNING saga_id",
                    (now,),
                    returning=True,
                )
            ]
        )
        return [str(r[0]) for r in result.rows[0]]

    async def release(self, saga_id: str, epoch: int, error: str | None = None) -> None:
        # A pass that ended well resets the count of passes without progress; one that
        # failed keeps it, with its reason.
        ended = "idle_passes = 0, last_error = NULL" if error is None else "last_error = ?"
        params = (saga_id, epoch) if error is None else (error[:2000], saga_id, epoch)
        await self._batch(
            [
                Stmt(
                    "UPDATE sagas SET lease_owner = NULL, lease_token = NULL, "
                    f"lease_expires_at = NULL, {ended} WHERE saga_id = ? AND lease_epoch = ?",
                    params,
                ),
                *self._notify(saga_id),
            ]
        )

    # -- operator views -----------------------------------------------------------------

    async def lease_of(self, saga_id: str) -> tuple[str | None, int, float | None] | None:
        """(owner, epoch, expires at) of the saga's lease; owner None when free."""
        found = await self._fetch(
            "SELECT lease_owner, lease_epoch, lease_expires_at FROM sagas WHERE saga_id = ?",
            (saga_id,),
        )
        return (found[0][0], int(found[0][1]), found[0][2]) if found else None

    async def list_sagas(
        self, status: SagaStatus | None = None, limit: int = 100
    ) -> list[SagaSummary]:
        where, params = ("WHERE status = ?", (status.value,)) if status else ("", ())
        found = await self._fetch(
            "SELECT saga_id, catalogue, status, reason, created_at, updated_at FROM sagas "
            f"{where} ORDER BY created_at DESC, saga_id LIMIT ?",
            (*params, limit),
        )
        return [SagaSummary(r[0], r[1], SagaStatus(r[2]), r[3], r[4], r[5]) for r in found]

    async def pending_approvals(self) -> list[PendingApproval]:
        columns = ", ".join(f"a.{c.strip()}" for c in rows.APPROVAL_COLUMNS.split(","))
        found = await self._fetch(
            f"SELECT {columns}, s.catalogue, st.name FROM approvals a "
            "JOIN sagas s ON s.saga_id = a.saga_id "
            "JOIN steps st ON st.saga_id = a.saga_id AND st.idx = a.step "
            "WHERE a.status = ? ORDER BY a.requested_at",
            (ApprovalStatus.PENDING.value,),
        )
        return [PendingApproval(r[0], r[10], r[11], rows.approval_from_row(r)) for r in found]

    async def dead_letters(
        self, status: str | None = "open", *, due_by: float | None = None, id: int | None = None
    ) -> list[DeadLetter]:
        clauses, params = rows.dead_letter_filter(status, due_by, id)
        found = await self._fetch(
            f"SELECT {rows.DEAD_LETTER_COLUMNS} FROM dead_letters {clauses} ORDER BY id", params
        )
        return [DeadLetter(*r) for r in found]
