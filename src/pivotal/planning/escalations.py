"""Acting on an escalation: a person closes it, optionally with a plan of their own."""

from __future__ import annotations

from pivotal.declarations.plan import ActorType, Plan, Provenance
from pivotal.errors import InvalidInput
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.people.principals import names_someone
from pivotal.planning.errors import EscalationClosed, EscalationNotFound
from pivotal.planning.records import Escalation, EscalationStatus
from pivotal.sagas.state import SagaState
from pivotal.store.base import Store


async def resolve_escalation(
    orchestrator: Orchestrator,
    escalation_id: int,
    by: str,
    note: str = "",
    *,
    plan: Plan | None = None,
    run: bool = True,
    ledger: Store | None = None,
) -> tuple[Escalation, SagaState | None]:
    """Close an open escalation. With ``plan``, a person's own plan is validated and
    submitted first (as saga ``esc-{id}``, so a retry finds the same saga), recorded with
    that person as its author, and with ``run`` driven until it ends or waits for approval.
    """
    by = by.strip()
    if not names_someone(by):
        raise InvalidInput("resolving an escalation needs the name of the person doing it")
    ledger = ledger or orchestrator.store
    escalation = await ledger.escalation(escalation_id)
    if escalation is None:
        raise EscalationNotFound(f"no escalation {escalation_id}")
    if escalation.status is not EscalationStatus.OPEN:
        raise EscalationClosed(f"escalation {escalation_id} is already {escalation.status}")
    state = None
    if plan is not None:
        request = escalation.run.request
        provenance = Provenance(
            actor_type=ActorType.HUMAN,
            actor_id=by,
            run_id=escalation.run.run_id,
            source_document_id=request.source_document_id or request.request_id,
        )
        plan = plan.model_copy(update={"provenance": provenance})
        state = await orchestrator.submit(plan, saga_id=f"esc-{escalation_id}")
    resolution = note or ("settled with a plan of their own" if plan else "closed")
    closed = await ledger.close_escalation(
        escalation_id,
        by,
        resolution,
        orchestrator.clock.now(),
        saga_id=state.saga_id if state else None,
    )
    if state is not None and run:
        state = await orchestrator.run(state.saga_id)
    return closed, state
