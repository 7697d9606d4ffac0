"""Catalogue rules over the whole plan: each rule accepts and refuses, with the codes and JSON
paths an agent needs to fix its plan; strict parsing and size limits."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict

from pivotal import App, Catalogue, CatalogueError, PlanParseError, StepContext, parse_plan
from pivotal.admission.validation import validate
from pivotal.declarations.exposure import Exposure, Moves, moved_by
from pivotal.declarations.identity import MONEY, OrderId
from pivotal.declarations.plan import Plan, PlanLimits
from pivotal.declarations.policy import ExposurePolicy, ThresholdPolicy
from pivotal.declarations.rules import Agree, AtMost, Check, FromFact, Required, RequiresEarlier
from pivotal.planning import render_catalogue


class Order(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId


class Money(Order):
    amount: Annotated[Decimal, MONEY]


PAYS = Moves("amount", currency="EUR", per="order_id")  # what authorize and capture move


class Items(Order):
    quantity: int


def shop(*rules: Any, **options: Any) -> Catalogue:
    catalogue = Catalogue("shop", rules=rules, **options)

    async def undo(args: Any, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo)
    async def reserve(args: Items, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo, moves=PAYS)
    async def authorize(args: Money, ctx: StepContext) -> None:
        return None

    @catalogue.pivot(moves=PAYS)
    async def capture(args: Money, ctx: StepContext) -> None:
        return None

    @catalogue.retriable()
    async def ship(args: Order, ctx: StepContext) -> None:
        return None

    return catalogue


def plan(*calls: tuple[str, dict[str, Any]] | list[tuple[str, dict[str, Any]]]) -> Plan:
    steps: list[Any] = []
    for c in calls:
        if isinstance(c, list):
            steps.append({"parallel": [{"name": n, "args": a} for n, a in c]})
        else:
            steps.append({"name": c[0], "args": c[1]})
    return parse_plan({"catalogue": "shop", "steps": steps})


def codes(errors: list[Any]) -> list[tuple[str, int | None, str | None]]:
    return [(e.code.value, e.index, e.path) for e in errors]


ORDER = {"order_id": "o1"}
PAY = {"order_id": "o1", "amount": "180"}
FULL = plan(
    ("reserve", ORDER | {"quantity": 1}), ("authorize", PAY), ("capture", PAY), ("ship", ORDER)
)


def test_required_steps() -> None:
    rules = shop(Required("capture"))
    assert validate(FULL, rules) == []
    skipped = plan(("reserve", ORDER | {"quantity": 1}), ("authorize", PAY), ("ship", ORDER))
    assert codes(validate(skipped, rules)) == [("missing_step", None, "steps")]


def test_a_step_that_requires_another_before_it() -> None:
    rules = shop(RequiresEarlier("ship", "capture"))
    assert validate(FULL, rules) == []
    early = plan(("authorize", PAY), ("ship", ORDER))
    assert codes(validate(early, rules)) == [("missing_prerequisite", 1, "steps[1]")]


def test_a_prerequisite_beside_the_step_in_a_parallel_group_does_not_count() -> None:
    rules = shop(RequiresEarlier("authorize", "reserve"))
    together = plan([("reserve", ORDER | {"quantity": 1}), ("authorize", PAY)])
    assert codes(validate(together, rules)) == [("missing_prerequisite", 1, "steps[0].parallel[1]")]
    assert validate(plan(("reserve", ORDER | {"quantity": 1}), ("authorize", PAY)), rules) == []


def test_at_most_n_calls() -> None:
    rules = shop(AtMost("authorize", 1))
    assert validate(FULL, rules) == []
    twice = plan(("authorize", PAY), ("authorize", PAY), ("capture", PAY))
    assert codes(validate(twice, rules)) == [("too_many_calls", 1, "steps[1]")]


def test_arguments_agree_across_every_step() -> None:
    rules = shop(Agree("order_id"))
    assert validate(FULL, rules) == []
    two_orders = plan(("authorize", PAY), ("capture", PAY), ("ship", {"order_id": "o2"}))
    [error] = validate(two_orders, rules)
    assert codes([error]) == [("arguments_disagree", 2, "steps[2].args.order_id")]
    assert '"o2"' in error.message
    assert '"o1"' in error.message


def test_arguments_agree_between_named_steps_by_value() -> None:
    rules = shop(Agree("amount", steps=["authorize", "capture"]))
    same = plan(("authorize", PAY), ("capture", {"order_id": "o1", "amount": "180.00"}))
    assert validate(same, rules) == []
    less = plan(("authorize", PAY), ("capture", {"order_id": "o1", "amount": "18"}))
    assert codes(validate(less, rules)) == [("arguments_disagree", 1, "steps[1].args.amount")]


def facts_for(context: Mapping[str, object]) -> Mapping[str, object]:
    return {"amount": "180"} if context.get("order_id") == "o1" else {}


@pytest.mark.parametrize("amount", ["18", "1800", "180.01"])
def test_arguments_bound_to_trusted_facts(amount: str) -> None:
    rules = shop(FromFact("amount", steps=["authorize", "capture"]))
    assert validate(FULL, rules, facts=facts_for) == []
    wrong = plan(("authorize", {"order_id": "o1", "amount": amount}), ("capture", PAY))
    [error] = validate(wrong, rules, facts=facts_for)
    assert codes([error]) == [("fact_mismatch", 0, "steps[0].args.amount")]
    assert '"180"' in error.message


def test_a_plan_whose_facts_are_unknown_is_refused() -> None:
    rules = shop(FromFact("amount"))
    unknown = plan(("authorize", {"order_id": "o9", "amount": "180"}))
    assert [e.code.value for e in validate(unknown, rules, facts=facts_for)] == ["fact_unavailable"]
    assert [e.code.value for e in validate(unknown, rules)] == ["fact_unavailable"]

    def broken(context: Mapping[str, object]) -> Mapping[str, object]:
        raise ConnectionError("order system down")

    found = [(e.code.value, e.index) for e in validate(FULL, rules, facts=broken)]
    # asked once; each call whose amount cannot be checked says so at its own argument
    assert found == [("facts_error", None), ("fact_unavailable", 1), ("fact_unavailable", 2)]


def test_a_plan_check_function_and_a_raising_one() -> None:
    def at_most_two_calls(p: Plan, facts: Mapping[str, object] | None) -> str | None:
        return "keep it short" if len(p.calls()) > 2 else None

    def broken(p: Plan, facts: Mapping[str, object] | None) -> None:
        raise KeyError("oops")

    assert [e.code.value for e in validate(FULL, shop(Check(at_most_two_calls, "short")))] == [
        "plan_check_failed"
    ]
    [error] = validate(FULL, shop(Check(broken, "never raises")))
    assert error.code.value == "plan_check_error"
    assert "KeyError" in error.message


def test_rules_naming_unknown_steps_are_refused_when_the_app_is_built() -> None:
    with pytest.raises(CatalogueError, match="capure"):
        App([shop(Required("capure"))])


def test_a_policy_that_can_never_fire_is_refused_when_the_app_is_built() -> None:
    with pytest.raises(CatalogueError, match="can never fire"):
        App([shop(approval=ThresholdPolicy(field="amount", steps=frozenset({"refund"})))])
    with pytest.raises(CatalogueError, match="can never fire"):
        App([shop(approval=ThresholdPolicy(field="price"))])
    with pytest.raises(CatalogueError, match="can never fire"):
        App([shop(approval=ExposurePolicy(always=frozenset({"teleport"})))])
    App([shop(approval=ThresholdPolicy(field="amount"))])


def test_exposure_counts_the_whole_plan_and_names_steps_always_seen() -> None:
    policy = ExposurePolicy(threshold=300, counted=frozenset({"authorize", "capture"}))
    catalogue = shop(approval=policy)
    args = catalogue["capture"].parse_args(PAY)

    def moved(p: Plan) -> Exposure:
        return Exposure(tuple(moved_by(p.calls(), catalogue)))

    assert policy("capture", args, FULL, exposure=moved(FULL)) is not None  # 180 + 180
    small = plan(("capture", PAY))
    assert policy("capture", args, small, exposure=moved(small)) is None
    always = ExposurePolicy(threshold=None, always=frozenset({"ship"}))
    need = always("capture", args, FULL, exposure=moved(FULL))
    assert need is not None
    assert "ship" in need.reason


@pytest.mark.parametrize(
    ("value", "why"),
    [(True, "a boolean is not a quantity"), ("2", "text is not a number"), (2.0, "not an int")],
)
def test_arguments_are_not_coerced(value: object, why: str) -> None:
    bad = plan(("reserve", ORDER | {"quantity": value}))
    assert [e.code.value for e in validate(bad, shop())] == ["invalid_args"], why


def test_a_step_may_opt_out_of_strict_arguments() -> None:
    catalogue = Catalogue("lax")

    @catalogue.retriable(strict=False)
    async def count(args: Items, ctx: StepContext) -> None:
        return None

    lax = parse_plan(
        {"catalogue": "lax", "steps": [{"name": "count", "args": ORDER | {"quantity": "2"}}]}
    )
    assert validate(lax, catalogue) == []


@pytest.mark.parametrize(
    "text",
    [
        '{"catalogue": "shop", "catalogue": "other", "steps": []}',
        '{"catalogue": "shop", "steps": [{"name": "capture", "name": "ship", "args": {}}]}',
        '{"catalogue": "shop", "steps": [{"name": "capture", "args": '
        '{"order_id": "o1", "amount": 400, "amount": 100}}]}',
    ],
)
def test_duplicate_keys_are_refused_at_any_level(text: str) -> None:
    with pytest.raises(PlanParseError, match="appears twice"):
        parse_plan(text)


def test_size_limits_have_stable_codes() -> None:
    limits = PlanLimits(max_steps=3, max_rationale=10, max_argument=20, max_bytes=2000)
    catalogue = shop(limits=limits)
    many = plan(*[("ship", ORDER)] * 4)
    assert codes(validate(many, catalogue)) == [("too_many_steps", None, "steps")]
    wordy = parse_plan(
        {"catalogue": "shop", "steps": [{"name": "ship", "args": ORDER}], "rationale": "x" * 11}
    )
    assert [e.code.value for e in validate(wordy, catalogue)] == ["rationale_too_long"]
    big = plan(("ship", {"order_id": "o" * 30}))
    assert codes(validate(big, catalogue)) == [("argument_too_large", 0, "steps[0].args.order_id")]
    with pytest.raises(PlanParseError) as too_big:
        parse_plan('{"catalogue": "shop", "steps": []}' + " " * 3000, limits=limits)
    assert too_big.value.code == "plan_too_large"


def test_ten_thousand_steps_are_refused_without_reading_them() -> None:
    steps = [{"name": "ship", "args": ORDER}] * 10_000
    # parse_plan measures a mapping as the JSON it would be: this one is refused unread
    with pytest.raises(PlanParseError) as too_big:
        parse_plan({"catalogue": "shop", "steps": steps})
    assert too_big.value.code == "plan_too_large"
    # a Plan made some other way is refused by the validator, by its count of steps alone
    huge = Plan.model_validate({"catalogue": "shop", "steps": steps})
    assert codes(validate(huge, shop())) == [("too_many_steps", None, "steps")]


def test_the_rendered_catalogue_states_the_rules() -> None:
    catalogue = shop(
        Required("capture"),
        RequiresEarlier("ship", "capture"),
        AtMost("capture"),
        Agree("order_id"),
        FromFact("amount", steps=["authorize", "capture"]),
    )
    view = render_catalogue(catalogue)
    assert "every plan must call capture" in view.text
    assert "ship may only come after capture" in view.text
    assert "capture at most once" in view.text
    assert "order_id must be the same in every call" in view.text
    assert "trusted amount" in view.text
    steps = view.schema["properties"]["steps"]
    assert steps["maxItems"] == 100
    assert "Rule: every plan must call capture." in steps["description"]
