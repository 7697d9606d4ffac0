"""The approvals queue shows the amount at stake with its currency, as the saga reserved it
when it was submitted (the step's declared currency argument, its default filled in)."""

from __future__ import annotations

from typing import Any

from cli_harness import InProcess


def fulfilment(order: str, amount: str) -> dict[str, Any]:
    payment = {"order_id": order, "amount": amount}  # no currency: the step's default, EUR
    steps = [
        {"name": "reserve_stock", "args": {"order_id": order, "sku": "lamp", "quantity": 1,
                                           "warehouse": "B"}},
        {"name": "authorize_payment", "args": payment},
        {"name": "capture_payment", "args": payment},
        {"name": "create_shipment", "args": {"order_id": order, "warehouse": "B"}},
        {"name": "send_confirmation",
         "args": {"order_id": order, "recipient": f"customer-{order}@example.com"}},
    ]  # fmt: skip
    return {"catalogue": "fulfilment", "steps": steps, "rationale": f"ship order {order}"}


def test_the_queue_shows_the_amount_and_its_currency(inproc: InProcess) -> None:
    inproc.ok("migrate")
    inproc.ok("submit", inproc.plan("s.json", fulfilment("4471", "180")), "--saga-id", "s2")
    inproc.ok("worker", "--until-idle", "--poll", "0.05")

    [pending] = inproc.json("approvals", "list")
    assert (pending["step"], pending["amount"], pending["currency"]) == (
        "capture_payment",
        "180",
        "EUR",
    )
    inproc.env["COLUMNS"] = "80"
    table = inproc.ok("approvals", "list")
    assert "EUR 180" in table
    inproc.env["COLUMNS"] = "200"
    assert "EUR 180" in inproc.ok("approvals", "list", "--wide")
