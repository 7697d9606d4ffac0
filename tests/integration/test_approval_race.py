"""Two people decide the same approval at once: the one whose commit lands second is told
that another person decided first, and by whom; nothing of theirs is recorded. On either
ledger: PostgreSQL's check that a refused write was not in fact our own, landed by a try
whose reply was lost, compares the whole last event (two decisions of one kind at one
moment are not the same write)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from pivotal import FakeClock, Orchestrator, Plan
from pivotal.errors import ApprovalError
from pivotal.examples.commerce import CommerceApp
from pivotal.sagas.state import EventType, SagaStatus
from pivotal.store import Store

PlanBuilder = Callable[..., Plan]


@pytest.mark.parametrize("second", ["approve", "reject"])
async def test_the_later_of_two_decisions_hears_who_decided_first(
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    orchestrator: Orchestrator,
    fulfilment_plan: PlanBuilder,
    second: str,
) -> None:
    waiting = await orchestrator.execute(fulfilment_plan("4471"), saga_id="r1")
    assert waiting.status is SagaStatus.AWAITING_APPROVAL
    other = Orchestrator(store, app, clock=clock, rng=random.Random(1))
    late = Orchestrator(store, app, clock=clock, rng=random.Random(2))
    read = late.get

    async def read_then_lose(saga_id: str) -> Any:
        stored = await read(saga_id)  # the late one has read the saga as pending ...
        await other.approve(saga_id, "olga", run=False)  # ... when olga's decision lands
        late.get = read  # type: ignore[method-assign]
        return stored

    late.get = read_then_lose  # type: ignore[method-assign]
    decide = late.approve if second == "approve" else late.reject
    with pytest.raises(ApprovalError) as raised:
        await decide("r1", "bob", run=False)

    said = str(raised.value)
    assert said.startswith("another person decided saga r1 first: ")
    assert "approved by olga" in said
    assert "changed under this writer" not in said
    events = await store.events("r1")
    decided = [
        e
        for e in events
        if e.type.value.startswith("approval_") and e.type is not EventType.APPROVAL_REQUESTED
    ]
    assert [(e.type, e.data.get("approver")) for e in decided] == [
        (EventType.APPROVAL_GRANTED, "olga")
    ]
