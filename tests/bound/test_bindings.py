"""Every argument bound or declared free: what a catalogue says of each argument of money or
identity, checked when it loads; and the rules that bind a plan to its order's lines."""

from __future__ import annotations

import warnings
from decimal import Decimal
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict

from pivotal import App, Catalogue, CatalogueError, StepContext, parse_plan, validate
from pivotal.declarations.catalogue import UnboundArgument
from pivotal.declarations.identity import MONEY, ArgKind, Email, OrderId, Sku
from pivotal.declarations.rules import Agree, AtMost, Free, FromFact, FromFactRows
from pivotal.examples.commerce import CommerceApp


class Line(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId
    sku: Sku
    quantity: int


class Pay(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId
    amount: Annotated[Decimal, MONEY]


class Mail(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId
    to: Email
    note: str = ""


def shop(*rules: Any, unbound: Any = "refuse", once: bool = True) -> Catalogue:
    bounded = (AtMost("pay"),) if once else ()  # it moves money: one call per plan
    catalogue = Catalogue("shop", rules=(*rules, *bounded), unbound=unbound)

    async def undo(args: Any, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo)
    async def reserve(args: Line, ctx: StepContext) -> None:
        return None

    @catalogue.pivot()
    async def pay(args: Pay, ctx: StepContext) -> None:
        return None

    @catalogue.retriable()
    async def mail(args: Mail, ctx: StepContext) -> None:
        return None

    return catalogue


BOUND = (
    Agree("order_id"),
    FromFactRows("reserve", fields=("sku", "quantity")),
    FromFact("amount"),
    FromFact("to", "email", steps=["mail"]),
)


def test_a_catalogue_binding_everything_loads_and_says_what_is_unbound_otherwise() -> None:
    App([shop(*BOUND)])
    loose = shop(*BOUND[:2], unbound="allow")
    assert loose.unbound_arguments() == [
        ("pay", "amount", ArgKind.MONEY),
        ("mail", "to", ArgKind.IDENTITY),
    ]
    with pytest.raises(CatalogueError, match=r"no rule binds pay\.amount \(money\), mail\.to"):
        App([shop(*BOUND[:2])])
    with pytest.warns(UnboundArgument, match="pay.amount"):
        App([shop(*BOUND[:2], unbound="warn")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        App([shop(*BOUND[:2], Free("amount"), Free("to", why="any address"), unbound="warn")])
    with pytest.raises(CatalogueError, match="unbound must be"):
        Catalogue("x", unbound="sometimes")  # type: ignore[arg-type]


def test_the_shipped_catalogues_bind_every_argument(app: CommerceApp) -> None:
    for catalogue in app:
        assert catalogue.unbound == "refuse"
        assert catalogue.unbound_arguments() == []
        assert catalogue.unbounded_value() == []  # each step moving value: AtMost


def test_a_step_moving_value_that_a_plan_may_repeat_is_refused() -> None:
    with pytest.raises(CatalogueError, match="bounds how often a plan may call pay"):
        App([shop(*BOUND, once=False)])


def lines_plan(*reserved: tuple[str, int]) -> Any:
    steps: list[dict[str, Any]] = [
        {"name": "reserve", "args": {"order_id": "o-1", "sku": sku, "quantity": n}}
        for sku, n in reserved
    ]
    steps.append({"name": "pay", "args": {"order_id": "o-1", "amount": "30"}})
    return parse_plan({"catalogue": "shop", "steps": steps})


def order_system(context: Any) -> dict[str, object]:
    if context.get("order_id") != "o-1":
        return {}
    return {"amount": "30", "lines": [{"sku": "cup", "quantity": 2}, {"sku": "pot", "quantity": 1}]}


@pytest.mark.parametrize(
    ("reserved", "found"),
    [
        ((("cup", 2), ("pot", 1)), []),
        ((("pot", 1), ("cup", 2)), []),  # any order
        ((("cup", 2),), [("missing_step", None)]),  # a line left out
        ((("cup", 2), ("pot", 1), ("cup", 2)), [("too_many_calls", 2)]),  # a line twice
        ((("cup", 3), ("pot", 1)), [("fact_mismatch", 0)]),  # another quantity
        ((("mug", 2), ("pot", 1)), [("fact_mismatch", 0)]),  # another product
    ],
)
def test_each_reservation_is_one_of_the_order_s_lines_once(
    reserved: tuple[tuple[str, int], ...], found: list[tuple[str, int | None]]
) -> None:
    catalogue = shop(*BOUND, unbound="allow")
    errors = validate(lines_plan(*reserved), catalogue, facts=order_system)
    assert [(e.code.value, e.index) for e in errors] == found


def test_lines_of_an_unknown_order_are_unavailable() -> None:
    catalogue = shop(*BOUND, unbound="allow")
    errors = validate(lines_plan(("cup", 2)), catalogue, facts=lambda context: {})
    assert {e.code.value for e in errors} == {"fact_unavailable"}
