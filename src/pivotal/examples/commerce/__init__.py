"""A commerce example: simulated services and the checkout and fulfilment catalogues."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pivotal.declarations.app import App
from pivotal.examples.commerce.catalogues import checkout_catalogue, fulfilment_catalogue
from pivotal.examples.commerce.faults import Fault, Faults
from pivotal.examples.commerce.services import CommerceServices

__all__ = [
    "CommerceApp",
    "CommerceServices",
    "Fault",
    "Faults",
    "checkout_catalogue",
    "create_app",
    "fulfilment_catalogue",
    "seed",
]

STATE_ENV = "PIVOTAL_COMMERCE_STATE"


class CommerceApp(App):
    """The two commerce catalogues bound to one set of simulated services."""

    def __init__(self, services: CommerceServices) -> None:
        super().__init__(
            [checkout_catalogue(services), fulfilment_catalogue(services)],
            name="commerce",
            sandbox=True,  # its services are simulations: a provider check may probe them
        )
        self.services = services

    def facts(self, context: Mapping[str, object]) -> dict[str, object]:
        """The order system's facts about the request's order (amount, items, tier)."""
        order = context.get("order_id")
        return self.services.order_facts(str(order)) if order else {}


def seed(services: CommerceServices) -> None:
    """Stock and orders the demo and the documents' examples use."""
    for warehouse in ("A", "B"):
        for sku in ("sku-1", "sku-2", "lamp"):
            services.stock(sku, warehouse, 50)
    services.order(
        "4471",
        customer="c-4471",
        tier="standard",
        amount="180",
        sku="lamp",
        quantity=1,
        warehouse="B",
        recipient="customer-4471@example.com",
    )
    services.order(  # the demo's order whose carrier keeps failing after the capture
        "4472",
        customer="c-4472",
        amount="90",
        sku="lamp",
        quantity=1,
        warehouse="B",
        recipient="customer-4472@example.com",
    )
    for n in range(1, 6):  # the demo's checkouts: two of sku-1 for 49.90 each
        services.order(
            f"order-{n}",
            customer=f"c-order-{n}",
            amount="49.90",
            lines=[{"sku": "sku-1", "quantity": 2}],
            recipient=f"order-{n}@example.com",
        )


def create_app(state: str | Path | None = None, faults: Faults | None = None) -> CommerceApp:
    """The commerce app over services kept in ``state`` (default: $PIVOTAL_COMMERCE_STATE
    or ``commerce.db``), seeded on first use."""
    path = state or os.environ.get(STATE_ENV, "commerce.db")
    services = CommerceServices(path, faults)
    if not services.rows("stock"):
        seed(services)
    return CommerceApp(services)
