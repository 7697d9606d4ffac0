"""What the MCP tests share: the agent's name, plans as JSON, reading tool results."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import uvicorn
from mcp_types import CallToolResult

from mcp import Client
from pivotal import Orchestrator
from pivotal.examples.commerce import CommerceServices
from pivotal.mcp import PATH, http_app

AGENT = "planner-bot"
Call = Callable[..., Awaitable[CallToolResult]]
Connect = Callable[[], AbstractAsyncContextManager[Client]]


def open_order(services: CommerceServices, order_id: str = "o-1") -> None:
    """The order a ``checkout(order_id)`` plan is for, open in the order system: the
    shipped catalogues bind every plan to its order's amount and lines."""
    services.order(
        order_id,
        customer=f"c-{order_id}",
        amount="10.00",
        lines=[{"sku": "sku-1", "quantity": 1}],
    )


def checkout(order_id: str = "o-1", **extra: Any) -> dict[str, Any]:
    """A valid checkout plan as JSON, for an order opened with ``open_order``."""
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


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}


@asynccontextmanager
async def serving(orch: Orchestrator) -> AsyncIterator[str]:
    """The MCP endpoint's URL, served by uvicorn on a free port until the block ends."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    _, app = http_app(orch, host="127.0.0.1", port=port)
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(20):
            while not server.started:  # readiness, not a guess: uvicorn sets it once bound
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}{PATH}"
    finally:
        server.should_exit = True
        await task
        sock.close()
