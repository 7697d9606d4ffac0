"""Orders the integration tests' own plans name: the shipped commerce catalogues bind
every plan to an open order of the order system (its amount, lines and recipient)."""

from __future__ import annotations

from typing import Any

from pivotal.examples.commerce import CommerceServices


def open_order(
    services: CommerceServices,
    order_id: str,
    *,
    amount: str,
    lines: list[tuple[str, int]],
    recipient: str | None = None,
    **details: Any,
) -> None:
    """Order ``order_id`` open for ``amount`` with ``lines`` (sku, quantity), confirmed to
    ``recipient`` (default ``<order_id>@example.com``); made, or reopened and replaced."""
    services.order(
        order_id,
        customer=f"c-{order_id}",
        amount=amount,
        lines=[{"sku": sku, "quantity": quantity} for sku, quantity in lines],
        recipient=recipient or f"{order_id}@example.com",
        **details,
    )
