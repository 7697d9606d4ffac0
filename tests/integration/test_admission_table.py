"""Admission's table, row by row: each row of ``pivotal.admission.TABLE`` is what ``admit``
decides for a plan that finds it, and the orchestrator writes what the row says."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from pivotal import (
    App,
    Catalogue,
    FakeClock,
    Orchestrator,
    PlanRejected,
    Rollout,
    StepContext,
    parse_plan,
)
from pivotal.admission import (
    TABLE,
    Above,
    Admission,
    Finding,
    Given,
    Row,
    Verdict,
    admit,
    decide,
)
from pivotal.declarations.exposure import Moves
from pivotal.declarations.identity import MONEY, CustomerId
from pivotal.declarations.plan import ActorType, Plan
from pivotal.declarations.policy import Window
from pivotal.errors import RolloutRefused, RolloutShadowed
from pivotal.store import Store
from pivotal.store.planning_records import PlanningMode


class Credit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: CustomerId
    amount: Annotated[Decimal, MONEY]


def goodwill(rollout: Rollout | None, currency: str = "EUR") -> Catalogue:
    catalogue = Catalogue("goodwill", rollout=rollout)

    @catalogue.pivot(moves=Moves(currency=currency, per="customer"))
    async def credit(args: Credit, ctx: StepContext) -> None:
        """Credit the customer's account."""

    return catalogue


def credit(amount: str, actor: ActorType = ActorType.AGENT) -> Plan:
    return parse_plan(
        {
            "catalogue": "goodwill",
            "steps": [{"name": "credit", "args": {"customer": "c-1", "amount": amount}}],
            "provenance": {"actor_type": actor.value, "actor_id": "someone"},
        }
    )


def limit(above: Literal["shadow", "refuse"] = "shadow") -> Rollout:
    return Rollout(
        execute_below=Decimal(50), above=above, currency="EUR", across=Window("customer")
    )


Case = Callable[[Store, FakeClock], Awaitable[Admission]]


async def _admit(
    store: Store, clock: FakeClock, catalogue: Catalogue, plan: Plan, saga_id: str | None = None
) -> Admission:
    app = App([catalogue])
    trace: Callable[[str], dict[str, str]] = lambda saga: {}  # noqa: E731
    given = Given(
        plan,
        plan.digest(),
        saga_id,
        catalogue,
        "build",
        clock.now(),
        app.facts,
        app.rates,
        store,
        trace,
    )
    return await admit(given)


async def invalid(store: Store, clock: FakeClock) -> Admission:
    return await _admit(store, clock, goodwill(limit()), credit("-5"))


async def recorded(store: Store, clock: FakeClock) -> Admission:
    catalogue = goodwill(limit())
    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    await orch.submit(credit("300", ActorType.HUMAN), saga_id="g")
    return await _admit(store, clock, catalogue, credit("300"), "g")


async def not_an_agent(store: Store, clock: FakeClock) -> Admission:
    return await _admit(store, clock, goodwill(limit()), credit("300", ActorType.HUMAN))


async def no_rollout(store: Store, clock: FakeClock) -> Admission:
    return await _admit(store, clock, goodwill(None), credit("300"))


async def below(store: Store, clock: FakeClock) -> Admission:
    return await _admit(store, clock, goodwill(limit()), credit("20"))


async def not_below_shadow(store: Store, clock: FakeClock) -> Admission:
    return await _admit(store, clock, goodwill(limit("shadow")), credit("50"))


async def not_below_refuse(store: Store, clock: FakeClock) -> Admission:
    return await _admit(store, clock, goodwill(limit("refuse")), credit("50"))


async def uncountable_shadow(store: Store, clock: FakeClock) -> Admission:
    return await _admit(store, clock, goodwill(limit("shadow"), currency="USD"), credit("1"))


async def uncountable_refuse(store: Store, clock: FakeClock) -> Admission:
    return await _admit(store, clock, goodwill(limit("refuse"), currency="USD"), credit("1"))


CASES: dict[str, Case] = {
    "invalid/*": invalid,
    "recorded/*": recorded,
    "not_an_agent/*": not_an_agent,
    "no_rollout/*": no_rollout,
    "below/*": below,
    "not_below/shadow": not_below_shadow,
    "not_below/refuse": not_below_refuse,
    "uncountable/shadow": uncountable_shadow,
    "uncountable/refuse": uncountable_refuse,
}


def test_every_row_has_a_case_and_every_finding_and_setting_a_row() -> None:
    assert list(CASES) == [row.id for row in TABLE]
    for finding in Finding:
        for above in (Above.SHADOW, Above.REFUSE):
            assert decide(finding, above).finding is finding


@pytest.mark.parametrize("row", TABLE, ids=[row.id for row in TABLE])
async def test_the_row_is_what_admission_decides(row: Row, store: Store, clock: FakeClock) -> None:
    admission = await CASES[row.id](store, clock)

    assert admission.row is row
    if row.verdict is Verdict.ADMIT:
        assert admission.event is not None
        assert admission.run is None
        return
    assert admission.event is None
    refusal = admission.refusal()
    assert refusal.code == row.code
    if row.finding is not Finding.INVALID:
        assert admission.run is not None
        assert admission.run.outcome.value == (
            "accepted" if row.verdict is Verdict.SHADOW else "rejected"
        )


@pytest.mark.parametrize(
    ("case", "raised"),
    [
        (invalid, PlanRejected),
        (not_below_shadow, RolloutShadowed),
        (not_below_refuse, RolloutRefused),
    ],
)
async def test_the_orchestrator_writes_what_a_refusal_says(
    case: Case, raised: type[Exception], store: Store, clock: FakeClock
) -> None:
    admission = await case(store, clock)
    assert await store.runs(PlanningMode.SHADOW) == []  # admission itself writes nothing
    catalogue = goodwill(limit("refuse" if raised is RolloutRefused else "shadow"))
    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    plan = credit("-5" if raised is PlanRejected else "50")

    with pytest.raises(raised):
        await orch.submit(plan, saga_id="s")

    assert await store.load("s") is None
    kept = await store.runs(PlanningMode.SHADOW)
    assert len(kept) == (0 if raised is PlanRejected else 1)
    assert type(admission.refusal()) is raised
