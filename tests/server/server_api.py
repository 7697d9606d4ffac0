"""What the HTTP API tests share: plans as JSON, role names, tokens in the ledger."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx

from commerce_plans import approval_plan as approval_plan  # the server tests take it here
from pivotal import FakeClock
from pivotal.examples.commerce import CommerceServices
from pivotal.people.principals import Role, hash_token
from pivotal.store import Store

ROLES = tuple(Role)
Clients = dict[Role, httpx.AsyncClient]
MakeClient = Callable[[str | None], httpx.AsyncClient]


# The orders ``plan_body`` names in these tests (o-0 .. o-9): each an open order of one
# sku-1 for 10.00, made in the test app by the ``api`` fixture (the shipped catalogues bind
# every plan to its order's facts).
PLAN_ORDERS = tuple(f"o-{n}" for n in range(10))


def open_plan_orders(services: CommerceServices) -> None:
    """Open the orders ``plan_body`` names, with the facts its plan matches."""
    for order_id in PLAN_ORDERS:
        services.order(
            order_id,
            customer=f"c-{order_id}",
            amount="10.00",
            sku="sku-1",
            quantity=1,
            warehouse="A",
            recipient=f"{order_id}@example.com",
        )


def plan_body(order_id: str = "o-1", **extra: Any) -> dict[str, Any]:
    """A valid checkout plan as JSON, for one of ``PLAN_ORDERS``."""
    return {
        "catalogue": "checkout",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {"order_id": order_id, "sku": "sku-1", "quantity": 1, "warehouse": "A"},
            },
            {"name": "charge_payment", "args": {"order_id": order_id, "amount": "10.00"}},
        ],
        "rationale": "customer checkout",
        **extra,
    }


def as_json(value: Any) -> bytes:
    return json.dumps(value).encode()


async def add_token(store: Store, name: str, role: Role, clock: FakeClock) -> str:
    secret = f"pvt_test_{name}_{role.value}"
    await store.create_token(name, role.value, hash_token(secret), clock.now())
    return secret


def csrf_of(html: str) -> str:
    """The CSRF token of the (first) form on a page."""
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)
