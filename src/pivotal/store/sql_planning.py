"""Planning runs, their attempts and escalations, in any SQL ledger.

Written once over ``SQLStore``'s primitives (``_batch`` for one write transaction,
``_reading`` for one snapshot), so planning records share the ledger the sagas are in, and
its transactions, on every backend.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pivotal.errors import StoreError
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
from pivotal.store.sql import Fetch, Row, SQLStore, Stmt

RUN_COLUMNS = (
    "run_id, mode, batch_id, request_id, request, catalogue, planner, outcome, attempts, "
    "plan, saga_id, created_at"
)
ATTEMPT_COLUMNS = (
    "run_id, n, actor_type, actor_id, model, prompt_version, plan, rationale, errors, "
    "accepted, repeat_of, raw_reply, at"
)
ESCALATION_COLUMNS = (
    "id, run_id, status, reason, created_at, resolved_at, resolved_by, resolution, saga_id"
)
_RUNS = ", ".join(f"r.{c.strip()}" for c in RUN_COLUMNS.split(","))
_ESCALATIONS = ", ".join(f"e.{c.strip()}" for c in ESCALATION_COLUMNS.split(","))

RUN_INSERT = (
    f"INSERT INTO planning_runs ({RUN_COLUMNS}, seq) VALUES ({', '.join('?' * 12)}, "
    "(SELECT COALESCE(MAX(seq), 0) + 1 FROM planning_runs))"
)
ATTEMPT_INSERT = f"INSERT INTO planning_attempts ({ATTEMPT_COLUMNS}) VALUES ({', '.join('?' * 13)})"
ESCALATION_INSERT = (
    "INSERT INTO escalations (run_id, status, reason, created_at) VALUES (?, ?, ?, ?) RETURNING id"
)
ESCALATION_CLOSE = (
    "UPDATE escalations SET status = ?, resolved_at = ?, resolved_by = ?, resolution = ?, "
    "saga_id = ? WHERE id = ? AND status = ?"
)
RUN_ORDER = "r.created_at, r.seq, r.run_id"  # oldest first, then in the order recorded
ESCALATION_ORDER = "e.created_at DESC, e.id DESC"  # newest first


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _attempt(row: Row) -> Attempt:
    return Attempt(
        n=row[1],
        by=PlannerInfo.model_validate(
            {"actor_type": row[2], "actor_id": row[3], "model": row[4], "prompt_version": row[5]}
        ),
        plan=None if row[6] is None else json.loads(row[6]),
        rationale=row[7],
        errors=tuple(AttemptError.model_validate(e) for e in json.loads(row[8])),
        accepted=bool(row[9]),
        repeat_of=row[10],
        raw_reply=row[11],
        at=row[12],
    )


def _run(row: Row, attempts: Sequence[Attempt], escalation_id: int | None) -> PlanningRun:
    """A run from its ``RUN_COLUMNS`` row."""
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


async def _attempts(fetch: Fetch, runs: str, params: Sequence[Any]) -> dict[str, list[Attempt]]:
    """The attempts of the runs whose ids ``runs`` (a subquery) selects, per run, in order."""
    found = await fetch(
        f"SELECT {ATTEMPT_COLUMNS} FROM planning_attempts WHERE run_id IN ({runs}) "
        "ORDER BY run_id, n",
        params,
    )
    out: dict[str, list[Attempt]] = defaultdict(list)
    for row in found:
        out[row[0]].append(_attempt(row))
    return out


class SQLPlanningLedger:
    """Planning records next to the sagas, in the same SQL ledger (SQLite or PostgreSQL)."""

    def __init__(self, store: SQLStore) -> None:
        self.store = store

    # -- writes -------------------------------------------------------------------------

    @staticmethod
    def run_statements(run: PlanningRun) -> list[Stmt]:
        """The statements that keep ``run`` and its attempts (part of one transaction)."""
        stmts = [
            Stmt(
                RUN_INSERT,
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
        ]
        if run.attempts:
            attempts = [
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
            ]
            stmts.append(Stmt(ATTEMPT_INSERT, attempts, many=True))
        return stmts

    async def record_run(self, run: PlanningRun) -> None:
        """Keep ``run``; recording the very same run again (a retry whose first try landed
        before the link dropped) changes nothing, another run under its id is refused."""
        try:
            await self.store._batch(self.run_statements(run))
        except StoreError:
            if not await self._recorded(run):
                raise

    async def escalate(self, run: PlanningRun, reason: str, at: float) -> Escalation:
        """Keep ``run`` with an open escalation; idempotent like ``record_run``."""
        opened = Stmt(
            ESCALATION_INSERT,
            (run.run_id, EscalationStatus.OPEN.value, reason, at),
            returning=True,
        )
        try:
            result = await self.store._batch([*self.run_statements(run), opened])
        except StoreError:
            if not await self._recorded(run):
                raise
            found = await self._escalations("WHERE e.run_id = ?", (run.run_id,))
            if not found:
                raise
            return found[0]
        escalation_id = int(result.rows[0][0][0])
        return Escalation(
            id=escalation_id,
            run=run.model_copy(update={"escalation_id": escalation_id}),
            status=EscalationStatus.OPEN,
            reason=reason,
            created_at=at,
        )

    async def _recorded(self, run: PlanningRun) -> bool:
        """Whether the ledger already holds this very run (not just its id)."""
        found = await self.store._fetch(
            "SELECT request, outcome, attempts, created_at FROM planning_runs WHERE run_id = ?",
            (run.run_id,),
        )
        return bool(found) and tuple(found[0]) == (
            run.request.model_dump_json(),
            run.outcome.value,
            len(run.attempts),
            run.created_at,
        )

    async def resolve(
        self,
        escalation_id: int,
        by: str,
        resolution: str,
        at: float,
        saga_id: str | None = None,
    ) -> Escalation:
        resolved, open_ = EscalationStatus.RESOLVED.value, EscalationStatus.OPEN.value
        params = (resolved, at, by, resolution, saga_id, escalation_id, open_)
        closed = await self.store._batch([Stmt(ESCALATION_CLOSE, params, guard=True)])
        if closed.stopped:  # no open escalation with that id: say why
            found = await self.store._fetch(
                "SELECT status FROM escalations WHERE id = ?", (escalation_id,)
            )
            if not found:
                raise EscalationNotFound(f"no escalation {escalation_id}")
            raise EscalationClosed(f"escalation {escalation_id} is already {found[0][0]}")
        escalation = await self.escalation(escalation_id)
        assert escalation is not None
        return escalation

    # -- reads --------------------------------------------------------------------------

    async def runs(
        self, mode: PlanningMode, batch_id: str | None = None, limit: int = 10_000
    ) -> list[PlanningRun]:
        where, params = "WHERE r.mode = ?", [mode.value]
        if batch_id is not None:
            where += " AND r.batch_id = ?"
            params.append(batch_id)
        chosen = f"FROM planning_runs r {where} ORDER BY {RUN_ORDER} LIMIT ?"

        async def read(fetch: Fetch) -> list[PlanningRun]:
            found = await fetch(
                f"SELECT {_RUNS}, e.id FROM planning_runs r "
                f"LEFT JOIN escalations e ON e.run_id = r.run_id {where} "
                f"ORDER BY {RUN_ORDER} LIMIT ?",
                (*params, limit),
            )
            attempts = await _attempts(fetch, f"SELECT r.run_id {chosen}", (*params, limit))
            return [_run(r, attempts[r[0]], r[12]) for r in found]

        return await self.store._reading(read)

    async def latest_batch(self, mode: PlanningMode = PlanningMode.SHADOW) -> str | None:
        found = await self.store._fetch(
            "SELECT batch_id FROM planning_runs WHERE mode = ? AND batch_id IS NOT NULL "
            "ORDER BY created_at DESC, seq DESC, run_id DESC LIMIT 1",
            (mode.value,),
        )
        return None if not found else str(found[0][0])

    async def _escalations(self, where: str, params: Sequence[Any]) -> list[Escalation]:
        """Escalations chosen by ``where`` (on ``escalations e``, with its ORDER/LIMIT)."""

        async def read(fetch: Fetch) -> list[Escalation]:
            found = await fetch(
                f"SELECT {_ESCALATIONS}, {_RUNS} FROM escalations e "
                f"JOIN planning_runs r ON r.run_id = e.run_id {where}",
                params,
            )
            attempts = await _attempts(fetch, f"SELECT e.run_id FROM escalations e {where}", params)
            return [
                Escalation(
                    id=row[0],
                    run=_run(row[9:], attempts[row[1]], row[0]),
                    status=EscalationStatus(row[2]),
                    reason=row[3],
                    created_at=row[4],
                    resolved_at=row[5],
                    resolved_by=row[6],
                    resolution=row[7],
                    saga_id=row[8],
                )
                for row in found
            ]

        return await self.store._reading(read)

    async def escalations(
        self, status: EscalationStatus | None = EscalationStatus.OPEN, limit: int = 100
    ) -> list[Escalation]:
        where, params = ("WHERE e.status = ?", (status.value,)) if status else ("", ())
        return await self._escalations(
            f"{where} ORDER BY {ESCALATION_ORDER} LIMIT ?", (*params, limit)
        )

    async def escalation(self, escalation_id: int) -> Escalation | None:
        found = await self._escalations("WHERE e.id = ?", (escalation_id,))
        return found[0] if found else None
