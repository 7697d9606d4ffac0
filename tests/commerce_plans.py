"""Plans of the bundled commerce example that tests in several folders submit."""

from __future__ import annotations

from typing import Any


def approval_plan(
    order_id: str = "4471", amount: str = "180.00", recipient: str | None = None
) -> dict[str, Any]:
    """A fulfilment whose capture of 180 waits for a person: the seeded order 4471 (one
    lamp from warehouse B, for 180, to customer-4471@example.com, or ``recipient``)."""
    payment = {"order_id": order_id, "amount": amount}
    return {
        "catalogue": "fulfilment",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {"order_id": order_id, "sku": "lamp", "quantity": 1, "warehouse": "B"},
            },
            {"name": "authorize_payment", "args": payment},
            {"name": "capture_payment", "args": payment},
            {"name": "create_shipment", "args": {"order_id": order_id, "warehouse": "B"}},
            {
                "name": "send_confirmation",
                "args": {
                    "order_id": order_id,
                    "recipient": recipient or f"customer-{order_id}@example.com",
                },
            },
        ],
        "rationale": "ship order 4471",
    }
