"""The plan is about the request: the planning loop records what the request it answers is
about, and every surface's validation refuses a plan acting on another order or for another
customer."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Annotated, Any

import httpx
import pytest
from harmful import checkout, fulfilment
from pydantic import BaseModel, ConfigDict

from pivotal import (
    App,
    Catalogue,
    CatalogueError,
    FakeClock,
    Orchestrator,
    PlanRejected,
    StepContext,
    parse_plan,
)
from pivotal.declarations.exposure import Moves
from pivotal.declarations.identity import MONEY, Currency, CustomerId
from pivotal.errors import SubjectRequired
from pivotal.examples.commerce import CommerceServices
from pivotal.planning import PlanningOutcome, PlanRequest, ScriptedPlanner, plan_and_submit
from pivotal.store import Store
from pivotal.store.planning_records import PlanningMode


def asked(**context: Any) -> PlanRequest:
    return PlanRequest(text="where is my lamp?", context=context, catalogue="fulfilment")


async def test_the_accepted_plan_carries_what_the_request_is_about(
    orchestrator: Orchestrator,
) -> None:
    request = asked(order_id="4471", customer="c-4471", intent="fulfil", amount="180")
    run = await plan_and_submit(request, ScriptedPlanner([fulfilment()]), orchestrator)
    assert run.outcome is PlanningOutcome.ACCEPTED, run.attempts[-1].errors
    assert run.saga_id is not None
    stored = await orchestrator.get(run.saga_id)
    # only what names the plan's subject, as the catalogue says (its about=)
    assert stored.plan.provenance.about == {"order_id": "4471", "customer": "c-4471"}


@pytest.mark.parametrize(
    ("context", "plan", "where"),
    [
        ({"order_id": "4472"}, fulfilment(), "steps[0].args.order_id"),  # another order
        ({"order_id": "4471", "customer": "c-9"}, fulfilment(), "steps[0]"),  # not theirs
        ({"customer": "c-9"}, fulfilment(), "steps[0]"),
    ],
    ids=["another order", "another customer's order", "no order named"],
)
async def test_a_plan_for_another_order_or_customer_is_escalated(
    context: dict[str, Any],
    plan: dict[str, Any],
    where: str,
    orchestrator: Orchestrator,
    services: CommerceServices,
    store: Store,
) -> None:
    planner = ScriptedPlanner([plan])
    run = await plan_and_submit(asked(**context), planner, orchestrator, max_replans=0)
    assert run.outcome is PlanningOutcome.ESCALATED
    errors = run.attempts[-1].errors
    assert ("request_mismatch", where) in [(e.code, e.path) for e in errors]
    assert await store.list_sagas() == []
    assert services.calls() == []


async def test_every_surface_refuses_a_plan_against_its_recorded_subject(
    orchestrator: Orchestrator, store: Store, agent: httpx.AsyncClient
) -> None:
    """``provenance.about`` only narrows: an agent that sends it is held to it as well."""
    body = checkout() | {"provenance": {"about": {"order_id": "4471"}}}
    with pytest.raises(PlanRejected) as refused:
        await orchestrator.submit(parse_plan(body))
    assert [e.code.value for e in refused.value.errors] == ["request_mismatch"] * 4
    answer = await agent.post("/v1/sagas", json=body)
    assert answer.status_code == 422
    assert {e["code"] for e in answer.json()["error"]["errors"]} == {"request_mismatch"}
    assert await store.list_sagas() == []


@pytest.mark.parametrize("context", [{}, {"intent": "fulfil"}, {"order_id": ""}])
async def test_a_request_that_names_no_subject_is_refused_before_any_plan(
    context: dict[str, Any],
    orchestrator: Orchestrator,
    services: CommerceServices,
    store: Store,
) -> None:
    # "I own order 4471" in the text only: nothing trusted says whose order the plan may
    # touch, so no plan is asked for, none is recorded and nothing runs.
    planner = ScriptedPlanner([fulfilment()])
    request = PlanRequest(text="I own order 4471, ship it", context=context, catalogue="fulfilment")
    with pytest.raises(SubjectRequired, match="names none of order_id, customer"):
        await plan_and_submit(request, planner, orchestrator)
    assert planner.turns == []
    assert await store.runs(PlanningMode.LIVE) == []
    assert await store.list_sagas() == []
    assert services.calls() == []


# -- subjects are declared, never guessed: a currency is no one -------------------------------


class _Refund(BaseModel):
    model_config = ConfigDict(extra="forbid")
    customer: CustomerId
    amount: Annotated[Decimal, MONEY]
    currency: Currency


def _refunds(refunded: list[str], **options: Any) -> Catalogue:
    catalogue = Catalogue("refunds", **options)

    @catalogue.pivot(moves=Moves(currency_arg="currency", per="customer"))
    async def refund(args: _Refund, ctx: StepContext) -> None:
        """Refund the customer."""
        refunded.append(args.customer)

    return catalogue


def test_a_catalogues_subjects_are_what_its_steps_move_value_for() -> None:
    assert _refunds([]).subject_keys() == ("customer",)  # never its currency


async def test_a_request_naming_only_a_currency_names_no_one(
    store: Store, clock: FakeClock
) -> None:
    refunded: list[str] = []
    orch = Orchestrator(store, _refunds(refunded), clock=clock, rng=random.Random(0))
    plan = {
        "catalogue": "refunds",
        "steps": [
            {"name": "refund", "args": {"customer": "c-9", "amount": "40", "currency": "EUR"}}
        ],
    }
    planner = ScriptedPlanner([plan])
    request = PlanRequest(
        text="refund c-9, I am c-9", context={"currency": "EUR"}, catalogue="refunds"
    )
    with pytest.raises(SubjectRequired, match="names none of customer"):
        await plan_and_submit(request, planner, orch)
    assert planner.turns == []
    assert refunded == []
    assert await store.list_sagas() == []


@pytest.mark.parametrize("options", [{"about": ("currency",)}, {"about": ("customer", "currency")}])
def test_a_currency_is_never_declared_a_subject(options: dict[str, Any]) -> None:
    with pytest.raises(CatalogueError, match="never a currency"):
        App([_refunds([], **options)])


def test_value_is_never_moved_per_currency() -> None:
    catalogue = Catalogue("refunds")
    with pytest.raises(CatalogueError, match="never for a currency"):

        @catalogue.pivot(moves=Moves(currency_arg="currency", per="currency"))
        async def refund(args: _Refund, ctx: StepContext) -> None:
            """Refund."""
