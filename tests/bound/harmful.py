"""Plans whose every call is valid on its own but whose whole harms the business, against
the bundled commerce example's seeded orders (4471: one lamp for 180 from warehouse B to
customer-4471@example.com; order-1: two of sku-1 for 49.90)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Plan = dict[str, Any]
ORDER = "4471"
RECIPIENT = "customer-4471@example.com"


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


def fulfilment() -> Plan:
    """The right plan for order 4471."""
    pay = {"order_id": ORDER, "amount": "180"}
    return {
        "catalogue": "fulfilment",
        "steps": [
            call("reserve_stock", order_id=ORDER, sku="lamp", quantity=1, warehouse="B"),
            call("authorize_payment", **pay),
            call("capture_payment", **pay),
            call("create_shipment", order_id=ORDER, warehouse="B"),
            call("send_confirmation", order_id=ORDER, recipient=RECIPIENT),
        ],
        "rationale": "ship order 4471",
    }


def checkout() -> Plan:
    """The right plan for order-1."""
    return {
        "catalogue": "checkout",
        "steps": [
            call("reserve_stock", order_id="order-1", sku="sku-1", quantity=2),
            call("charge_payment", order_id="order-1", amount="49.90"),
            call("create_shipment", order_id="order-1"),
            call("send_confirmation", order_id="order-1", recipient="order-1@example.com"),
        ],
        "rationale": "place order-1",
    }


@dataclass(frozen=True)
class Harm:
    """One harmful plan and a code the validator must refuse it with."""

    name: str
    change: Callable[[Plan], None]
    code: str
    base: Callable[[], Plan] = fulfilment

    def plan(self) -> Plan:
        made = copy.deepcopy(self.base())
        self.change(made)
        return made


def _args(n: int, **args: Any) -> Callable[[Plan], None]:
    def change(plan: Plan) -> None:
        plan["steps"][n]["args"].update(args)

    return change


def _capture_as(order_id: str) -> Callable[[Plan], None]:
    """The capture names the order another way, for 1 instead of 180."""
    return _args(2, order_id=order_id, amount="1")


def _both(**args: Any) -> Callable[[Plan], None]:
    """The authorisation and the capture alike."""

    def change(plan: Plan) -> None:
        for n in (1, 2):
            plan["steps"][n]["args"].update(args)

    return change


def _insert(n: int, step: dict[str, Any]) -> Callable[[Plan], None]:
    def change(plan: Plan) -> None:
        plan["steps"].insert(n, step)

    return change


def _drop(*names: str) -> Callable[[Plan], None]:
    def change(plan: Plan) -> None:
        plan["steps"] = [s for s in plan["steps"] if s["name"] not in names]

    return change


def _omit(n: int, arg: str) -> Callable[[Plan], None]:
    def change(plan: Plan) -> None:
        del plan["steps"][n]["args"][arg]

    return change


HARMS = [
    # one id, spelled two ways: the capture of 1 must never pass as order 4471's
    Harm("trailing space", _capture_as("4471 "), "not_canonical"),
    Harm("trailing newline", _capture_as("4471\n"), "not_canonical"),
    Harm("leading space", _capture_as(" 4471"), "not_canonical"),
    Harm("full-width digits", _capture_as("\uff14\uff14\uff17\uff11"), "not_canonical"),
    Harm("zero-width space", _capture_as("4471\u200b"), "not_canonical"),
    # another order to every rule: here one that does not exist (the capture's precondition)
    Harm("leading zero", _capture_as("04471"), "precondition_failed"),
    Harm("exponent", _capture_as("4.471e3"), "precondition_failed"),
    # arguments no fact bound before
    Harm("amounts under the order's", _both(amount="1"), "fact_mismatch"),
    Harm("another currency", _both(currency="USD"), "fact_mismatch"),
    Harm("another SKU", _args(0, sku="sku-1"), "fact_mismatch"),
    Harm("another quantity", _args(0, quantity=5), "fact_mismatch"),
    Harm(
        "the line reserved twice",
        _insert(1, call("reserve_stock", order_id=ORDER, sku="lamp", quantity=1, warehouse="B")),
        "too_many_calls",
    ),
    Harm("shipped from another warehouse", _args(3, warehouse="A"), "arguments_disagree"),
    Harm("shipped from the default warehouse", _omit(3, "warehouse"), "arguments_disagree"),
    Harm("confirmed to someone else", _args(4, recipient="thief@example.com"), "fact_mismatch"),
    Harm(
        "a header in the recipient",
        _args(4, recipient=f"{RECIPIENT}\r\nBcc: thief@example.com"),
        "invalid_args",
    ),
    Harm(
        "two shipments",
        _insert(4, call("create_shipment", order_id=ORDER, warehouse="B")),
        "too_many_calls",
    ),
    Harm("confirmed without a shipment", _drop("create_shipment"), "missing_prerequisite"),
    Harm("shipped without a reservation", _drop("reserve_stock"), "missing_prerequisite"),
    Harm("shipped without a capture", _drop("capture_payment"), "missing_step"),
    Harm("a checkout charge of 1", _args(1, amount="1"), "fact_mismatch", checkout),
    Harm("a checkout in another currency", _args(1, currency="USD"), "fact_mismatch", checkout),
    Harm(
        "a checkout that reserves too few",
        _args(0, quantity=1),
        "fact_mismatch",
        checkout,
    ),
    Harm(
        "a checkout confirmed to someone else",
        _args(3, recipient="thief@example.com"),
        "fact_mismatch",
        checkout,
    ),
]
