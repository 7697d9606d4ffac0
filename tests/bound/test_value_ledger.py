"""Value as a declared quantity: what a plan moves is read from its parsed, defaulted
arguments, and counted where every policy and the rollout read it."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Annotated

import pytest
from pydantic import BaseModel, ConfigDict

from pivotal import (
    Catalogue,
    ExposurePolicy,
    FakeClock,
    Orchestrator,
    Rollout,
    SagaStatus,
    StepContext,
    parse_plan,
)
from pivotal.errors import RolloutShadowed
from pivotal.identity import MONEY, CustomerId
from pivotal.plan import ActorType, Plan
from pivotal.store import Store


class Credit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: CustomerId
    amount: Annotated[Decimal, MONEY] = Decimal("300")  # left out, it is 300


def goodwill(credited: list[tuple[str, Decimal]]) -> Catalogue:
    """A goodwill credit: a person approves above 150, agents run only what is below 50."""
    catalogue = Catalogue(
        "goodwill",
        approval=ExposurePolicy(threshold=150),
        rollout=Rollout(execute_below=Decimal("50")),
    )

    @catalogue.pivot()
    async def credit(args: Credit, ctx: StepContext) -> None:
        """Credit the customer's account."""
        credited.append((args.customer, args.amount))

    return catalogue


def credit_plan(customer: str, actor: ActorType, **amount: str) -> Plan:
    return parse_plan(
        {
            "catalogue": "goodwill",
            "steps": [{"name": "credit", "args": {"customer": customer, **amount}}],
            "provenance": {"actor_type": actor.value, "actor_id": "someone"},
        }
    )


async def test_a_defaulted_amount_counts_for_the_approval_policy(
    store: Store, clock: FakeClock
) -> None:
    credited: list[tuple[str, Decimal]] = []
    orch = Orchestrator(store, goodwill(credited), clock=clock, rng=random.Random(0))
    state = await orch.execute(credit_plan("c-1", ActorType.HUMAN), saga_id="g")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert credited == []  # 300 waits for a person


async def test_a_defaulted_amount_counts_for_the_rollout(store: Store, clock: FakeClock) -> None:
    credited: list[tuple[str, Decimal]] = []
    orch = Orchestrator(store, goodwill(credited), clock=clock, rng=random.Random(0))
    with pytest.raises(RolloutShadowed):
        await orch.execute(credit_plan("c-1", ActorType.AGENT), saga_id="g")
    assert credited == []
    assert await store.load("g") is None
    small = await orch.execute(credit_plan("c-1", ActorType.AGENT, amount="20"), saga_id="s")
    assert small.status is SagaStatus.COMPLETED
    assert credited == [("c-1", Decimal("20"))]
