"""Where planning runs and escalations are kept: a protocol, and the ledger that backs it."""

from __future__ import annotations

from typing import Protocol

from pivotal.errors import StoreError
from pivotal.planning.records import Escalation, EscalationStatus, PlanningMode, PlanningRun
from pivotal.store.base import Store


class PlanningLedger(Protocol):
    """Durable planning records. Every write is one transaction."""

    async def record_run(self, run: PlanningRun) -> None:
        """Keep a run and all its attempts."""
        ...

    async def escalate(self, run: PlanningRun, reason: str, at: float) -> Escalation:
        """Keep a run and open an escalation for it, in one transaction."""
        ...

    async def runs(
        self, mode: PlanningMode, batch_id: str | None = None, limit: int = 10_000
    ) -> list[PlanningRun]:
        """Runs of ``mode`` (of one batch when given), oldest first."""
        ...

    async def latest_batch(self, mode: PlanningMode = PlanningMode.SHADOW) -> str | None: ...

    async def escalations(
        self, status: EscalationStatus | None = EscalationStatus.OPEN, limit: int = 100
    ) -> list[Escalation]:
        """Escalations, newest first."""
        ...

    async def escalation(self, escalation_id: int) -> Escalation | None: ...

    async def resolve(
        self,
        escalation_id: int,
        by: str,
        resolution: str,
        at: float,
        saga_id: str | None = None,
    ) -> Escalation:
        """Close an open escalation; raise ``EscalationClosed`` if it is closed already."""
        ...


def planning_ledger(store: Store) -> PlanningLedger:
    """The planning records kept in the same ledger as ``store``'s sagas (any SQL ledger)."""
    from pivotal.store.sql import SQLStore
    from pivotal.store.sql_planning import SQLPlanningLedger

    if isinstance(store, SQLStore):
        return SQLPlanningLedger(store)
    raise StoreError(f"planning records are not available on a {type(store).__name__} ledger")
