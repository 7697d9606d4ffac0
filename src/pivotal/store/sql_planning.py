"""Planning runs, their attempts and escalations, in any SQL ledger.

Part of every ``SQLStore`` (SQLite and PostgreSQL alike), written once over the backend
primitives (``_batch`` for one write transaction, ``_reading`` for one snapshot), so
planning records share the ledger the sagas are in, and its transactions. The records are
the store's own (``pivotal.store.planning_records``); nothing here imports planning.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from pivotal.declarations.plan import Plan
from pivotal.errors import StoreError
from pivotal.store import queries as q
from pivotal.store.planning_records import (
    Attempt,
    AttemptError,
    Escalation,
    EscalationClosed,
    EscalationNotFound,
    EscalationStatus,
    PlannerInfo,
    PlanningMode,
    PlanningOutcome,
    PlanningRun,
    PlanRequest,
)
from pivotal.store.primitives import Fetch, Row, SQLPrimitives, Stmt


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _attempt(row: Row) -> Attempt:
    """An attempt from its ``ATTEMPT_COLUMNS`` row."""
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


def _escalation(row: Row, attempts: Sequence[Attempt]) -> Escalation:
    """An escalation from its ``ESCALATION_COLUMNS`` row followed by its run's row."""
    return Escalation(
        id=row[0],
        run=_run(row[9:], attempts, row[0]),
        status=EscalationStatus(row[2]),
        reason=row[3],
        created_at=row[4],
        resolved_at=row[5],
        resolved_by=row[6],
        resolution=row[7],
        saga_id=row[8],
    )


async def _attempts(fetch: Fetch, sql: str, params: Sequence[Any]) -> dict[str, list[Attempt]]:
    """Attempts read by ``sql`` (one of a ``Selection``), per run, in order."""
    out: dict[str, list[Attempt]] = defaultdict(list)
    for row in await fetch(sql, params):
        out[row[0]].append(_attempt(row))
    return out


class SQLPlanning(SQLPrimitives):
    """The planning operations of the ``Store`` protocol, over the SQL primitives."""

    # -- writes -------------------------------------------------------------------------

    @staticmethod
    def run_statements(run: PlanningRun) -> list[Stmt]:
        """The statements that keep ``run`` and its attempts (part of one transaction)."""
        stmts = [
            Stmt(
                q.INSERT_RUN,
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
            stmts.append(Stmt(q.INSERT_ATTEMPT, attempts, many=True))
        return stmts

    async def record_run(self, run: PlanningRun) -> None:
        """Keep ``run``; recording the very same run again (a retry whose first try landed
        before the link dropped) changes nothing, another run under its id is refused."""
        try:
            await self._batch(self.run_statements(run))
        except StoreError:
            if not await self._recorded(run):
                raise

    async def escalate(self, run: PlanningRun, reason: str, at: float) -> Escalation:
        """Keep ``run`` with an open escalation; idempotent like ``record_run``."""
        opened = Stmt(
            q.INSERT_ESCALATION,
            (run.run_id, EscalationStatus.OPEN.value, reason, at),
            returning=True,
        )
        try:
            result = await self._batch([*self.run_statements(run), opened])
        except StoreError:
            if not await self._recorded(run):
                raise
            found = await self._escalations(q.ESCALATION_OF_RUN, (run.run_id,))
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
        found = await self._fetch(q.SELECT_RUN_IDENTITY, (run.run_id,))
        return bool(found) and tuple(found[0]) == (
            run.request.model_dump_json(),
            run.outcome.value,
            len(run.attempts),
            run.created_at,
        )

    async def close_escalation(
        self,
        escalation_id: int,
        by: str,
        resolution: str,
        at: float,
        saga_id: str | None = None,
    ) -> Escalation:
        resolved, open_ = EscalationStatus.RESOLVED.value, EscalationStatus.OPEN.value
        params = (resolved, at, by, resolution, saga_id, escalation_id, open_)
        closed = await self._batch([Stmt(q.CLOSE_ESCALATION, params, guard=True)])
        if closed.stopped:  # no open escalation with that id: say why
            found = await self._fetch(q.SELECT_ESCALATION_STATUS, (escalation_id,))
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
        chosen, params = (
            (q.RUNS, (mode.value, limit))
            if batch_id is None
            else (q.RUNS_OF_BATCH, (mode.value, batch_id, limit))
        )

        async def read(fetch: Fetch) -> list[PlanningRun]:
            found = await fetch(chosen.rows, params)
            attempts = await _attempts(fetch, chosen.attempts, params)
            return [_run(r, attempts[r[0]], r[12]) for r in found]

        return await self._reading(read)

    async def run(self, run_id: str) -> PlanningRun | None:
        async def read(fetch: Fetch) -> list[PlanningRun]:
            found = await fetch(q.RUN.rows, (run_id, 1))
            attempts = await _attempts(fetch, q.RUN.attempts, (run_id, 1))
            return [_run(r, attempts[r[0]], r[12]) for r in found]

        found = await self._reading(read)
        return found[0] if found else None

    async def escalation_of_run(self, run_id: str) -> Escalation | None:
        found = await self._escalations(q.ESCALATION_OF_RUN, (run_id,))
        return found[0] if found else None

    async def latest_batch(self, mode: PlanningMode = PlanningMode.SHADOW) -> str | None:
        found = await self._fetch(q.LATEST_BATCH, (mode.value,))
        return None if not found else str(found[0][0])

    async def _escalations(self, chosen: q.Selection, params: Sequence[Any]) -> list[Escalation]:
        async def read(fetch: Fetch) -> list[Escalation]:
            found = await fetch(chosen.rows, params)
            attempts = await _attempts(fetch, chosen.attempts, params)
            return [_escalation(row, attempts[row[1]]) for row in found]

        return await self._reading(read)

    async def escalations(
        self, status: EscalationStatus | None = EscalationStatus.OPEN, limit: int = 100
    ) -> list[Escalation]:
        if status is None:
            return await self._escalations(q.ESCALATIONS, (limit,))
        return await self._escalations(q.ESCALATIONS_WITH_STATUS, (status.value, limit))

    async def escalation(self, escalation_id: int) -> Escalation | None:
        found = await self._escalations(q.ESCALATION, (escalation_id,))
        return found[0] if found else None
