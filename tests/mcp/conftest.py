"""The MCP server over the commerce app, driven by the SDK's own client in this process."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_support import AGENT, Call, Connect, open_order
from mcp_types import CallToolResult, Implementation

from mcp import Client
from pivotal import FakeClock, Orchestrator, SQLiteStore
from pivotal.examples.commerce import CommerceApp
from pivotal.mcp import build_server
from pivotal.store import Store


@pytest.fixture
def app(app: CommerceApp) -> CommerceApp:
    """The shared commerce app, with the order ``checkout()`` plans are for open."""
    open_order(app.services)
    return app


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    ledger = SQLiteStore(tmp_path / "ledger.db")
    await ledger.open()
    yield ledger
    await ledger.close()


@pytest.fixture
def orch(sqlite_store: SQLiteStore, app: CommerceApp, clock: FakeClock) -> Orchestrator:
    return Orchestrator(sqlite_store, app, clock=clock, rng=random.Random(0))


@pytest.fixture
def server(orch: Orchestrator) -> MCPServer[Any]:
    return build_server(orch)


@pytest.fixture
def connect(server: MCPServer[Any]) -> Connect:
    """``async with connect() as client``: the SDK's client, in this process, introducing
    itself as ``planner-bot`` (entered inside the test: its task group must stay in one
    task)."""

    def make() -> AbstractAsyncContextManager[Client]:
        return Client(server, client_info=Implementation(name=AGENT, version="1"))

    return make


@pytest.fixture
def call(connect: Connect) -> Call:
    """``call(tool, **arguments)``: the tool's result, through a client of its own."""

    async def run(tool: str, **arguments: Any) -> CallToolResult:
        async with connect() as client:
            result = await client.call_tool(tool, arguments)
        assert isinstance(result, CallToolResult)
        return result

    return run


OrchOver = Callable[[Store], AbstractAsyncContextManager[Client]]


@pytest.fixture
def orch_over(app: CommerceApp, clock: FakeClock) -> OrchOver:
    """``orch_over(store)``: a client of a server over an orchestrator on ``store``."""

    @asynccontextmanager
    async def connect(store: Store) -> AsyncIterator[Client]:
        orchestrator = Orchestrator(store, app, clock=clock, rng=random.Random(0))
        info = Implementation(name=AGENT, version="1")
        async with Client(build_server(orchestrator), client_info=info) as c:
            yield c

    return connect
