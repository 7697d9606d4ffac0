"""Orders the contract tests' plans name: the shipped commerce catalogues bind every plan
to an open order of the order system (its amount and its lines)."""

from __future__ import annotations

from pivotal.examples.commerce import CommerceServices


def open_order(
    services: CommerceServices,
    order_id: str,
    *,
    amount: str = "10",
    sku: str = "sku-1",
    quantity: int = 1,
    warehouse: str = "A",
) -> None:
    """An open order of ``amount`` with the one line ``sku`` x ``quantity`` (made if new)."""
    if services.order_status(order_id) is not None:
        return
    services.order(
        order_id,
        customer=f"c-{order_id}",
        amount=amount,
        lines=[{"sku": sku, "quantity": quantity}],
        warehouse=warehouse,
        recipient=f"{order_id}@example.com",
    )
