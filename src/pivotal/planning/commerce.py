"""The rule table for the bundled commerce example: its two common plan shapes.

Requests these rules fit never reach a model; the router sends only the remainder on.
"""

from __future__ import annotations

from typing import Any

from pivotal.planning.base import PlanRequest
from pivotal.planning.rules import Rule


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": {k: v for k, v in args.items() if v not in (None, "")}}


def _payment(request: PlanRequest) -> dict[str, Any]:
    return {
        "order_id": request.get("order_id"),
        "amount": request.get("amount"),
        "currency": request.get("currency"),
    }


def _reserve(request: PlanRequest) -> dict[str, Any]:
    return _call(
        "reserve_stock",
        order_id=request.get("order_id"),
        sku=request.get("sku"),
        quantity=request.get("quantity") or 1,
        warehouse=request.get("warehouse"),
    )


def _checkout(request: PlanRequest) -> list[dict[str, Any]]:
    return [
        _reserve(request),
        _call("charge_payment", **_payment(request)),
        _call(
            "create_shipment", order_id=request.get("order_id"), warehouse=request.get("warehouse")
        ),
    ]


def _fulfil(request: PlanRequest) -> list[dict[str, Any]]:
    steps = [
        _reserve(request),
        _call("authorize_payment", **_payment(request)),
        _call("capture_payment", **_payment(request)),
        _call(
            "create_shipment", order_id=request.get("order_id"), warehouse=request.get("warehouse")
        ),
    ]
    if request.get("recipient"):
        steps.append(
            _call(
                "send_confirmation",
                order_id=request.get("order_id"),
                recipient=request.get("recipient"),
            )
        )
    return steps


def commerce_rules() -> tuple[Rule, ...]:
    """``fulfil`` for the fulfilment catalogue, ``checkout`` for the checkout catalogue."""
    needs = ("order_id", "amount", "sku")
    return (
        Rule(
            "fulfil",
            "fulfilment",
            needs,
            _fulfil,
            "reserve, authorise, capture, ship, and confirm when a recipient is known",
        ),
        Rule("checkout", "checkout", needs, _checkout, "reserve, charge, ship"),
    )
