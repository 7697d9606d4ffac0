"""What the MCP tests share: the agent's name, plans as JSON, reading tool results."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp_types import CallToolResult

from mcp import Client

AGENT = "planner-bot"
Call = Callable[..., Awaitable[CallToolResult]]
Connect = Callable[[], AbstractAsyncContextManager[Client]]


def checkout(order_id: str = "o-1", **extra: Any) -> dict[str, Any]:
    """A valid checkout plan as JSON."""
    return {
        "catalogue": "checkout",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {"order_id": order_id, "sku": "sku-1", "quantity": 1, "warehouse": "A"},
            },
            {"name": "charge_payment", "args": {"order_id": order_id, "amount": "10.00"}},
            {"name": "create_shipment", "args": {"order_id": order_id, "warehouse": "A"}},
        ],
        "rationale": "customer checkout",
        **extra,
    }


def data(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful result."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error(result: CallToolResult) -> dict[str, Any]:
    """The structured content of an error result, with its text checked to say the same."""
    assert result.is_error, result.structured_content
    assert result.structured_content is not None
    text = result.content[0]
    assert getattr(text, "text", "").startswith(f"error [{result.structured_content['error']}]")
    return result.structured_content
