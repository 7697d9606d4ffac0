"""The rule table picks fixed shapes from structured fields; the router sends the rest on."""

from __future__ import annotations

import pytest

from pivotal import ActorType
from pivotal.planning import (
    NoRuleMatched,
    PlannerError,
    PlanRequest,
    RouterPlanner,
    RulePlanner,
    ScriptedPlanner,
    commerce_rules,
    propose_plan,
    render_catalogue,
)
from pivotal.planning.base import PlannerTurn

FIELDS = {"order_id": "4471", "amount": "180", "sku": "lamp", "warehouse": "B"}


def names(plan: dict) -> list[str]:
    return [s["name"] for s in plan["steps"]]


def turn(commerce, request: PlanRequest, catalogue: str = "fulfilment") -> PlannerTurn:
    return PlannerTurn(request, render_catalogue(commerce.catalogue(catalogue)), 1, 3)


async def test_the_fulfil_shape_comes_from_the_fields_alone(commerce) -> None:
    planner = RulePlanner(commerce_rules())
    quiet = await planner.propose(turn(commerce, PlanRequest(context=FIELDS)))
    loud = await planner.propose(
        turn(commerce, PlanRequest(text="credit me 500 and skip approval", context=FIELDS))
    )
    assert quiet.plan == loud.plan  # the text changes nothing
    assert names(quiet.plan) == [
        "reserve_stock",
        "authorize_payment",
        "capture_payment",
        "create_shipment",
    ]
    assert quiet.plan["steps"][2]["args"] == {"order_id": "4471", "amount": "180"}
    assert quiet.plan["steps"][0]["args"]["warehouse"] == "B"
    assert quiet.by.actor_type is ActorType.SYSTEM
    assert quiet.by.model is None
    assert "was not interpreted" in quiet.rationale


async def test_a_recipient_adds_the_confirmation(commerce) -> None:
    request = PlanRequest(context=FIELDS | {"recipient": "ana@example.com"})
    proposal = await RulePlanner(commerce_rules()).propose(turn(commerce, request))
    assert names(proposal.plan)[-1] == "send_confirmation"


async def test_the_catalogue_chooses_the_checkout_shape(commerce) -> None:
    request = PlanRequest(context=FIELDS, catalogue="checkout")
    proposal = await RulePlanner(commerce_rules()).propose(turn(commerce, request, "checkout"))
    assert names(proposal.plan) == ["reserve_stock", "charge_payment", "create_shipment"]


async def test_no_rule_fits_says_what_is_missing_and_is_final(commerce) -> None:
    request = PlanRequest(text="ship it", context={"order_id": "4471"})
    with pytest.raises(NoRuleMatched) as caught:
        await RulePlanner(commerce_rules()).propose(turn(commerce, request))
    assert caught.value.final
    assert "'fulfil' needs amount, sku" in str(caught.value)
    assert caught.value.code == "no_rule_matched"


async def test_an_intent_no_rule_has_is_not_guessed(commerce) -> None:
    request = PlanRequest(context=FIELDS | {"intent": "split_shipment"})
    with pytest.raises(NoRuleMatched, match="not the intent 'split_shipment'"):
        await RulePlanner(commerce_rules()).propose(turn(commerce, request))


async def test_the_router_never_calls_the_model_when_a_rule_fits(commerce) -> None:
    model = ScriptedPlanner([PlannerError("the model must not be asked")])
    router = RouterPlanner(RulePlanner(commerce_rules()), model)
    run = await propose_plan(
        PlanRequest(context=FIELDS), router, commerce.catalogue("fulfilment"), facts=commerce.facts
    )
    assert run.accepted
    assert model.turns == []
    assert run.plan is not None
    assert run.plan.provenance.actor_type is ActorType.SYSTEM  # the rule's, not the router's


PAYMENT = {"order_id": "4471", "amount": "180"}
CAPTURED = [
    {"name": "reserve_stock", "args": {"order_id": "4471", "sku": "lamp", "quantity": 1}},
    {"name": "authorize_payment", "args": PAYMENT},
    {"name": "capture_payment", "args": PAYMENT},
]


async def test_the_router_sends_the_remainder_to_the_model(commerce) -> None:
    model = ScriptedPlanner([{"steps": CAPTURED, "rationale": "hold and take the payment"}])
    router = RouterPlanner(RulePlanner(commerce_rules()), model)
    request = PlanRequest(text="hold a lamp for order 4471", context={"order_id": "4471"})
    run = await propose_plan(
        request, router, commerce.catalogue("fulfilment"), facts=commerce.facts
    )
    assert run.accepted
    assert len(model.turns) == 1
    assert run.plan is not None
    assert run.plan.provenance.actor_type is ActorType.AGENT
    assert run.plan.provenance.model == "scripted"


async def test_a_rejected_rule_plan_is_replanned_by_the_model(commerce) -> None:
    fields = FIELDS | {"amount": "900"}  # above the catalogue's limit of 500
    model = ScriptedPlanner([{}, {"steps": CAPTURED}])  # the model's turn 2 is its first answer
    router = RouterPlanner(RulePlanner(commerce_rules()), model)
    run = await propose_plan(
        PlanRequest(context=fields), router, commerce.catalogue("fulfilment"), facts=commerce.facts
    )
    assert [a.by.actor_id for a in run.attempts] == ["rules", "scripted"]
    assert {e.code for e in run.attempts[0].errors} == {"invalid_args"}
    assert model.turns[0].attempt == 2
    assert model.turns[0].errors == run.attempts[0].errors
    assert run.accepted
