"""Planning runs, their attempts and escalations in the SQLite ledger.

Uses an open ``SQLiteStore``'s connection helpers, so planning records share the ledger's
file, its writer thread and its transactions.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from pivotal.plan import Plan
from pivotal.planning.base import Attempt, AttemptError, PlannerInfo, PlanRequest
from pivotal.planning.errors import EscalationClosed, EscalationNotFound
from pivotal.planning.records import (
    Escalation,
    EscalationStatus,
    PlanningMode,
    PlanningOutcome,
    PlanningRun,
)
from pivotal.store.sqlite import SQLiteStore

_RUN_COLUMNS = (
    "run_id, mode, batch_id, request_id, request, catalogue, planner, outcome, attempts, "
    "plan, saga_id, created_at"
)
_ATTEMPT_COLUMNS = (
    "run_id, n, actor_type, actor_id, model, prompt_version, plan, rationale, errors, "
    "accepted, repeat_of, raw_reply, at"
)
_ESCALATION_COLUMNS = (
    "id, run_id, status, reason, created_at, resolved_at, resolved_by, resolution, saga_id"
)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


class SQLitePlanningLedger:
    """Planning records next to the sagas, in the same SQLite ledger."""

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    # -- writes -------------------------------------------------------------------------

    def _insert_run(self, conn: sqlite3.Connection, run: PlanningRun) -> None:
        conn.execute(
            f"INSERT INTO planning_runs ({_RUN_COLUMNS}) VALUES ({_marks(12)})",
            (
                run.run_id,
                run.mode.value,
                run.batch_id,
                run.request.request_id,
                run.request.model_dump_json(),
                run.catalogue,
                run.planner.model_dump_json(),
                run.outcome.value,
                len(run.attempts),
                run.plan.to_json() if run.plan is not None else None,
                run.saga_id,
                run.created_at,
            ),
        )
        conn.executemany(
            f"INSERT INTO planning_attempts ({_ATTEMPT_COLUMNS}) VALUES ({_marks(13)})",
            [
                (
                    run.run_id,
                    a.n,
                    a.by.actor_type.value,
                    a.by.actor_id,
                    a.by.model,
                    a.by.prompt_version,
                    None if a.plan is None else _dumps(a.plan),
                    a.rationale,
                    _dumps([e.model_dump() for e in a.errors]),
                    int(a.accepted),
                    a.repeat_of,
                    a.raw_reply,
                    a.at,
                )
                for a in run.attempts
            ],
        )

    async def record_run(self, run: PlanningRun) -> None:
        def txn(conn: sqlite3.Connection) -> None:
            self._insert_run(conn, run)

        await self.store._call(self.store._write, txn)

    async def escalate(self, run: PlanningRun, reason: str, at: float) -> Escalation:
        def txn(conn: sqlite3.Connection) -> int:
            self._insert_run(conn, run)
            row = conn.execute(
                "INSERT INTO escalations (run_id, status, reason, created_at) "
                "VALUES (?, ?, ?, ?) RETURNING id",
                (run.run_id, EscalationStatus.OPEN.value, reason, at),
            ).fetchone()
            return int(row[0])

        escalation_id = await self.store._call(self.store._write, txn)
        return Escalation(
            id=escalation_id,
            run=run.model_copy(update={"escalation_id": escalation_id}),
            status=EscalationStatus.OPEN,
            reason=reason,
            created_at=at,
        )

    async def resolve(
        self,
        escalation_id: int,
        by: str,
        resolution: str,
        at: float,
        saga_id: str | None = None,
    ) -> Escalation:
        def txn(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT status FROM escalations WHERE id = ?", (escalation_id,)
            ).fetchone()
            if row is None:
                raise EscalationNotFound(f"no escalation {escalation_id}")
            if row[0] != EscalationStatus.OPEN.value:
                raise EscalationClosed(f"escalation {escalation_id} is already {row[0]}")
            conn.execute(
                "UPDATE escalations SET status = ?, resolved_at = ?, resolved_by = ?, "
                "resolution = ?, saga_id = ? WHERE id = ?",
                (EscalationStatus.RESOLVED.value, at, by, resolution, saga_id, escalation_id),
            )

        await self.store._call(self.store._write, txn)
        found = await self.escalation(escalation_id)
        assert found is not None
        return found

    # -- reads --------------------------------------------------------------------------

    def _run(self, conn: sqlite3.Connection, row: Any, escalation_id: int | None) -> PlanningRun:
        attempts = [
            Attempt(
                n=a[1],
                by=PlannerInfo.model_validate(
                    {"actor_type": a[2], "actor_id": a[3], "model": a[4], "prompt_version": a[5]}
                ),
                plan=None if a[6] is None else json.loads(a[6]),
                rationale=a[7],
                errors=tuple(AttemptError.model_validate(e) for e in json.loads(a[8])),
                accepted=bool(a[9]),
                repeat_of=a[10],
                raw_reply=a[11],
                at=a[12],
            )
            for a in conn.execute(
                f"SELECT {_ATTEMPT_COLUMNS} FROM planning_attempts WHERE run_id = ? ORDER BY n",
                (row[0],),
            )
        ]
        return PlanningRun(
            run_id=row[0],
            mode=PlanningMode(row[1]),
            batch_id=row[2],
            request=PlanRequest.model_validate_json(row[4]),
            catalogue=row[5],
            planner=PlannerInfo.model_validate_json(row[6]),
            outcome=PlanningOutcome(row[7]),
            attempts=tuple(attempts),
            plan=None if row[9] is None else Plan.model_validate_json(row[9]),
            saga_id=row[10],
            escalation_id=escalation_id,
            created_at=row[11],
        )

    def _escalation(self, conn: sqlite3.Connection, row: Any) -> Escalation:
        run_row = conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM planning_runs WHERE run_id = ?", (row[1],)
        ).fetchone()
        return Escalation(
            id=row[0],
            run=self._run(conn, run_row, row[0]),
            status=EscalationStatus(row[2]),
            reason=row[3],
            created_at=row[4],
            resolved_at=row[5],
            resolved_by=row[6],
            resolution=row[7],
            saga_id=row[8],
        )

    async def runs(
        self, mode: PlanningMode, batch_id: str | None = None, limit: int = 10_000
    ) -> list[PlanningRun]:
        def read(conn: sqlite3.Connection) -> list[PlanningRun]:
            where, params = "WHERE r.mode = ?", [mode.value]
            if batch_id is not None:
                where += " AND r.batch_id = ?"
                params.append(batch_id)
            cols = ", ".join(f"r.{c.strip()}" for c in _RUN_COLUMNS.split(","))
            cur = conn.execute(
                f"SELECT {cols}, e.id FROM planning_runs r LEFT JOIN escalations e "
                f"USING (run_id) {where} ORDER BY r.created_at, r.rowid LIMIT ?",
                (*params, limit),
            )
            return [self._run(conn, r, r[12]) for r in cur.fetchall()]

        return await self.store._read(read)

    async def latest_batch(self, mode: PlanningMode = PlanningMode.SHADOW) -> str | None:
        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT batch_id FROM planning_runs WHERE mode = ? AND batch_id IS NOT NULL "
                "ORDER BY created_at DESC, rowid DESC LIMIT 1",
                (mode.value,),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self.store._read(read)

    async def escalations(
        self, status: EscalationStatus | None = EscalationStatus.OPEN, limit: int = 100
    ) -> list[Escalation]:
        def read(conn: sqlite3.Connection) -> list[Escalation]:
            where, params = ("WHERE status = ?", (status.value,)) if status else ("", ())
            cur = conn.execute(
                f"SELECT {_ESCALATION_COLUMNS} FROM escalations {where} "
                "ORDER BY created_at DESC, id DESC LIMIT ?",
                (*params, limit),
            )
            return [self._escalation(conn, r) for r in cur.fetchall()]

        return await self.store._read(read)

    async def escalation(self, escalation_id: int) -> Escalation | None:
        def read(conn: sqlite3.Connection) -> Escalation | None:
            row = conn.execute(
                f"SELECT {_ESCALATION_COLUMNS} FROM escalations WHERE id = ?", (escalation_id,)
            ).fetchone()
            return None if row is None else self._escalation(conn, row)

        return await self.store._read(read)


def _marks(n: int) -> str:
    return ", ".join("?" * n)
