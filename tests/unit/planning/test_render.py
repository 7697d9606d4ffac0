"""The catalogue as a planner sees it: forward steps only, each name tied to its arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from pivotal import Catalogue, ErrorCode, StepContext, parse_plan, validate
from pivotal.planning import RulePlanner, commerce_rules, render_catalogue
from pivotal.planning.base import PlannerTurn, PlanRequest


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


def fulfil_steps(order: str = "4471", amount: float = 180) -> list[dict[str, Any]]:
    return [
        call("reserve_stock", order_id=order, sku="lamp", quantity=1, warehouse="B"),
        call("authorize_payment", order_id=order, amount=amount),
        call("capture_payment", order_id=order, amount=amount),
        call("create_shipment", order_id=order, warehouse="B"),
        call("send_confirmation", order_id=order, recipient="ana@example.com"),
    ]


def plan(catalogue: str, steps: list[Any], rationale: str = "r") -> dict[str, Any]:
    return {"catalogue": catalogue, "steps": steps, "rationale": rationale}


@pytest.mark.parametrize("name", ["checkout", "fulfilment"])
def test_nothing_that_reverses_looks_up_or_checks_a_step_reaches_the_planner(
    commerce, name
) -> None:
    catalogue: Catalogue = commerce.catalogue(name)
    view = render_catalogue(catalogue)
    shown = view.text + "\n" + view.schema_json()
    hidden = set()
    for step in catalogue:
        for fn in (step.undo, step.lookup, step.precondition):
            if fn is not None:
                hidden.add(fn.__name__)
    # the catalogues really have undos to hide: the test would pass vacuously otherwise
    assert {"release_stock"} <= hidden
    assert ("refund_payment" in hidden) == (name == "checkout")
    assert ("void_authorization" in hidden) == (name == "fulfilment")
    for fn_name in hidden:
        assert fn_name not in shown
    for word in ("undo", "compensation", "compensate", "lookup", "precondition"):
        assert word not in shown.lower()
    assert set(view.steps) == {s.name for s in catalogue}


def test_the_schema_ties_each_step_name_to_its_own_arguments(fulfilment, schema_errors) -> None:
    schema = render_catalogue(fulfilment).schema
    assert schema_errors(schema, plan("fulfilment", fulfil_steps())) == []

    # create_shipment called with reserve_stock's arguments
    swapped = fulfil_steps()
    swapped[3] = call("create_shipment", order_id="4471", sku="lamp", quantity=1)
    assert schema_errors(schema, plan("fulfilment", swapped))

    # bounds are part of the schema: at most 500, at least 1 unit, at most 64 characters
    for bad in (
        call("capture_payment", order_id="4471", amount=900),
        call("reserve_stock", order_id="4471", sku="lamp", quantity=0),
        call("create_shipment", order_id="x" * 65),
        call("send_confirmation", order_id="4471", recipient="not an address"),
    ):
        assert schema_errors(schema, plan("fulfilment", [bad])), bad
    # a missing required argument, an unknown step, an undo, another catalogue
    assert schema_errors(schema, plan("fulfilment", [call("capture_payment", order_id="1")]))
    assert schema_errors(schema, plan("fulfilment", [call("apply_goodwill_credit", amount=20)]))
    assert schema_errors(schema, plan("fulfilment", [call("release_stock", order_id="1")]))
    assert schema_errors(schema, plan("checkout", fulfil_steps()))
    assert schema_errors(schema, plan("fulfilment", []))


def test_amount_bounds_are_visible_as_numbers(fulfilment) -> None:
    schema = render_catalogue(fulfilment).schema
    amount = schema["$defs"]["call_capture_payment"]["properties"]["args"]["properties"]["amount"]
    assert amount["type"] == "number"
    assert amount["maximum"] == 500
    assert amount["exclusiveMinimum"] == 0
    assert "anyOf" not in amount


def test_parallel_groups_hold_only_compensable_calls(fulfilment, schema_errors) -> None:
    schema = render_catalogue(fulfilment).schema
    steps = fulfil_steps()
    grouped = [{"parallel": steps[:2]}, *steps[2:]]
    assert schema_errors(schema, plan("fulfilment", grouped)) == []
    bad = [{"parallel": [steps[0], steps[2]]}, *steps[3:]]
    assert schema_errors(schema, plan("fulfilment", bad))


@pytest.mark.parametrize(
    ("order", "code"),
    [
        ([2, 0, 1, 3, 4], ErrorCode.KIND_ORDER),  # the pivot placed first
        ([0, 1, 3, 2, 4], ErrorCode.KIND_ORDER),  # a retriable step before the pivot
        ([0, 1, 2, 2, 3], ErrorCode.MULTIPLE_PIVOTS),
    ],
)
def test_a_plan_of_the_right_shape_is_still_judged_by_the_validator(
    fulfilment, schema_errors, order, code
) -> None:
    steps = fulfil_steps()
    data = plan("fulfilment", [steps[i] for i in order])
    assert schema_errors(render_catalogue(fulfilment).schema, data) == []
    errors = validate(parse_plan(data), fulfilment)
    assert code in {e.code for e in errors}


def test_a_precondition_is_the_validators_too(fulfilment, schema_errors) -> None:
    steps = fulfil_steps(order="no-such-order")
    data = plan("fulfilment", steps)
    assert schema_errors(render_catalogue(fulfilment).schema, data) == []
    codes = {e.code for e in validate(parse_plan(data), fulfilment)}
    assert codes == {ErrorCode.PRECONDITION_FAILED}


async def test_rule_plans_conform_to_the_schema_and_validate(commerce, schema_errors) -> None:
    planner = RulePlanner(commerce_rules())
    # the seeded order 4471 as the order system knows it, which the catalogues bind to
    fields = {
        "order_id": "4471",
        "amount": 180,
        "sku": "lamp",
        "warehouse": "B",
        "recipient": "customer-4471@example.com",
    }
    for name in ("fulfilment", "checkout"):
        catalogue = commerce.catalogue(name)
        view = render_catalogue(catalogue)
        request = PlanRequest(context=fields, catalogue=name)
        proposal = await planner.propose(PlannerTurn(request, view, 1, 3))
        data = proposal.plan | {"rationale": proposal.rationale}
        assert schema_errors(view.schema, data) == []
        assert validate(parse_plan(data), catalogue, facts=commerce.facts) == []


def test_the_text_names_steps_kinds_bounds_and_the_ordering_rule(fulfilment) -> None:
    text = render_catalogue(fulfilment).text
    for line in (
        "- reserve_stock [compensable]:",
        "- authorize_payment [compensable]:",
        "- capture_payment [pivot]:",
        "- create_shipment [retriable]:",
        "- send_confirmation [retriable]:",
    ):
        assert line in text
    assert "amount (number, > 0, <= 500; required)" in text
    assert "quantity (integer, >= 1, <= 100; required)" in text
    assert 'currency (one of "EUR"|"USD"; default "EUR")' in text
    assert "compensable steps first, then at most one pivot, then the retriable steps" in text
    assert len(text) < 4000  # concise enough to sit in a prompt


def test_the_schema_is_plain_json(fulfilment) -> None:
    view = render_catalogue(fulfilment)
    assert json.loads(view.schema_json()) == view.schema
    assert view.schema["properties"]["catalogue"] == {"type": "string", "const": "fulfilment"}
    assert view.schema["required"] == ["catalogue", "steps", "rationale"]


class Line(BaseModel):
    sku: str = Field(max_length=8)
    quantity: int = Field(ge=1)


class Lines(BaseModel):
    lines: list[Line] = Field(min_length=1)


def test_nested_argument_models_are_hoisted_and_resolve(schema_errors) -> None:
    catalogue = Catalogue("nested")

    @catalogue.retriable()
    async def pack(args: Lines, ctx: StepContext) -> None:
        """Pack the lines."""

    schema = render_catalogue(catalogue).schema
    assert "args_pack__Line" in schema["$defs"]
    good = plan("nested", [call("pack", lines=[{"sku": "a", "quantity": 2}])])
    assert schema_errors(schema, good) == []
    bad_call = call("pack", lines=[{"sku": "too-long-sku", "quantity": 0}])
    assert schema_errors(schema, plan("nested", [bad_call]))
    pack_alone = schema["$defs"]["call_pack"] | {"$defs": schema["$defs"]}
    assert len(schema_errors(pack_alone, bad_call)) == 2  # both bounds of the nested model
    assert "parallel_group" not in schema["$defs"]  # no compensable step to group
