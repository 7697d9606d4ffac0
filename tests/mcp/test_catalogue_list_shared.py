"""MCP's ``list_catalogues`` is made from the one catalogue description the HTTP API's
``GET /v1/catalogues`` lists (``pivotal.views.catalogue_view``), and its answer is what it was."""

from __future__ import annotations

from mcp_support import Call, data

from pivotal import Orchestrator
from pivotal.views.catalogue_view import describe_catalogue

NEXT = "Call describe_catalogue with one of these names before writing a plan."


async def test_list_catalogues_answers_exactly_as_before(call: Call, orch: Orchestrator) -> None:
    listed = data(await call("list_catalogues"))
    assert listed == {
        "catalogues": [
            {
                "catalogue": c.name,
                "description": c.description,
                "steps": [s.name for s in c],
            }
            for c in orch.app
        ],
        "next": NEXT,
    }
    checkout = listed["catalogues"][0]
    assert checkout == {
        "catalogue": "checkout",
        "description": "Place an order: reserve stock, charge, ship, then confirm by email.",
        "steps": ["reserve_stock", "charge_payment", "create_shipment", "send_confirmation"],
    }


async def test_it_agrees_with_the_shared_description(call: Call, orch: Orchestrator) -> None:
    listed = data(await call("list_catalogues"))["catalogues"]
    shared = [describe_catalogue(c) for c in orch.app]
    assert [(e["catalogue"], e["description"], e["steps"]) for e in listed] == [
        (d.name, d.description, [s.name for s in d.steps]) for d in shared
    ]
