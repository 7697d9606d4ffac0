"""Sagas written straight through a store, as their submission (and end) left them: what the
search tests of every surface list."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pivotal import Plan, Provenance, SagaStatus
from pivotal.sagas.state import Event, EventType, StepStatus, apply
from pivotal.store import Store

NOW = 1_800_000_000.0
DAY = 86_400.0


async def make(
    store: Store,
    saga_id: str,
    *,
    at: float,
    updated: float | None = None,
    catalogue: str = "checkout",
    status: SagaStatus = SagaStatus.COMPLETED,
    reason: str | None = None,
    failed: str | None = None,
    subjects: dict[str, list[str]] | None = None,
    **provenance: Any,
) -> None:
    """A saga written straight through the store, as a submission would have left it."""
    prov = Provenance.model_validate(
        {"actor_type": "agent", "actor_id": "planner-7", "model": "m-1"} | provenance
    )
    names = ["reserve_stock", "charge_payment", "ship"]
    submitted = Event(
        type=EventType.SAGA_SUBMITTED,
        at=at,
        seq=1,
        data={
            "saga_id": saga_id,
            "catalogue": catalogue,
            "plan_digest": "d",
            "provenance_ref": prov.ref(),
            "steps": [{"name": n, "kind": "compensable"} for n in names],
            "subjects": subjects or {},
        },
    )
    state = apply(None, submitted)
    steps = tuple(
        replace(s, status=StepStatus.FAILED) if s.name == failed else s for s in state.steps
    )
    state = replace(
        state, status=status, reason=reason, steps=steps, updated_at=updated or at, version=2
    )
    plan = Plan.model_validate(
        {"catalogue": catalogue, "steps": [{"name": "ship"}], "provenance": prov.model_dump()}
    )
    assert await store.create(state, plan, prov, [submitted])


async def six(store: Store) -> Store:
    """Six sagas, one a day up to a day before ``NOW``, each different in every filter."""
    await make(store, "a", at=NOW - 6 * DAY, subjects={"order_id": ["4471"]})
    await make(
        store,
        "b",
        at=NOW - 5 * DAY,
        updated=NOW - 1 * DAY,
        status=SagaStatus.COMPENSATED,
        reason="charge_payment failed: Card DECLINED by the issuer",
        failed="charge_payment",
        subjects={"order_id": ["4471", "4472"]},
        actor_id="planner-8",
        run_id="run-1",
        prompt_version="v2",
    )
    await make(
        store,
        "c",
        at=NOW - 4 * DAY,
        catalogue="fulfilment",
        status=SagaStatus.NEEDS_HUMAN,
        reason="ship unknown: carrier timed out",
        failed="ship",
        model="m-2",
        on_behalf_of="ana@example.com",
        source_document_id="doc-9",
    )
    await make(store, "d", at=NOW - 3 * DAY, status=SagaStatus.RUNNING, actor_type="human")
    await make(
        store,
        "e",
        at=NOW - 2 * DAY,
        catalogue="fulfilment",
        status=SagaStatus.COMPENSATED,
        reason="reserve_stock failed: out of stock",
        failed="reserve_stock",
        subjects={"order_id": ["4472"]},
    )
    await make(store, "f", at=NOW - 1 * DAY, status=SagaStatus.AWAITING_APPROVAL)
    return store
