"""What the HTTP API tests share: plans as JSON, role names, tokens in the ledger."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from pivotal import FakeClock
from pivotal.principals import Role, hash_token
from pivotal.store import Store

ROLES = tuple(Role)
Clients = dict[Role, httpx.AsyncClient]
MakeClient = Callable[[str | None], httpx.AsyncClient]


def plan_body(order_id: str = "o-1", **extra: Any) -> dict[str, Any]:
    """A valid checkout plan as JSON."""
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


def approval_plan(order_id: str = "4471", amount: str = "180.00") -> dict[str, Any]:
    """A fulfilment whose capture of 180 waits for a person."""
    payment = {"order_id": order_id, "amount": amount}
    return {
        "catalogue": "fulfilment",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {"order_id": order_id, "sku": "sku-1", "quantity": 1, "warehouse": "A"},
            },
            {"name": "authorize_payment", "args": payment},
            {"name": "capture_payment", "args": payment},
            {"name": "create_shipment", "args": {"order_id": order_id}},
            {
                "name": "send_confirmation",
                "args": {"order_id": order_id, "recipient": "ana@example.com"},
            },
        ],
        "rationale": "ship order 4471",
    }


def as_json(value: Any) -> bytes:
    return json.dumps(value).encode()


async def add_token(store: Store, name: str, role: Role, clock: FakeClock) -> str:
    secret = f"pvt_test_{name}_{role.value}"
    await store.create_token(name, role.value, hash_token(secret), clock.now())
    return secret
