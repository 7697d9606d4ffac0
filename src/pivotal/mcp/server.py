"""The MCP server: the planner's tools over an orchestrator, for stdio or streamable HTTP.

``build_server(orch)`` serves any MCP client in the same process or over stdio, naming the
caller by its client name. ``build_server(orch, url=...)`` requires a bearer token of role
``agent`` of the orchestrator's ledger on every request (for ``http_app``)."""

from __future__ import annotations

import sys
from io import TextIOWrapper
from typing import Any, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from starlette.applications import Starlette

from pivotal.mcp.auth import LedgerTokens, auth_settings
from pivotal.mcp.strict import StrictPlans, strict_lines
from pivotal.mcp.tools import PlannerTools
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.people.principals import Role
from pivotal.server.edge import Edge, caller_gate, default_hosts, ledger_tokens, mount

NAME = "pivotal"
PATH = "/mcp"
INSTRUCTIONS = """\
Pivotal carries out multi-step business transactions (sagas) from plans you propose. You \
choose catalogue steps, their arguments and their order; you never carry anything out \
yourself. Call list_catalogues, then describe_catalogue for the plan schema, write a plan, \
check it with validate_plan until it is valid, record it with submit_plan, and follow it \
with get_saga. Pivotal checks every plan again, stops for a person before the point of no \
return, and takes failed work back on its own: no tool does that, and none is needed.
"""

READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
RECORD = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
TOOL_NAMES = (
    "list_catalogues",
    "describe_catalogue",
    "validate_plan",
    "submit_plan",
    "get_saga",
)


def build_server(
    orchestrator: Orchestrator, *, url: str | None = None, version: str = ""
) -> MCPServer[Any]:
    """The MCP server offering the planner's tools over ``orchestrator``. With ``url``
    (where it is served over HTTP) callers must present a bearer token of role ``agent``
    of the orchestrator's ledger."""
    secured: dict[str, Any] = {}
    if url is not None:
        secured = {
            "token_verifier": LedgerTokens(orchestrator.store),
            "auth": auth_settings(url),
        }
    server: MCPServer[Any] = MCPServer(
        NAME,
        title="Pivotal",
        description="Propose plans to Pivotal and follow the sagas they become.",
        instructions=INSTRUCTIONS,
        version=version,
        **secured,
    )
    tools = PlannerTools(orchestrator, authenticated=url is not None)
    for name, title, hints in (
        ("list_catalogues", "List catalogues", READ),
        ("describe_catalogue", "Describe a catalogue", READ),
        ("validate_plan", "Validate a plan", READ),
        ("submit_plan", "Submit a plan", RECORD),
        ("get_saga", "Read a saga", READ),
    ):
        server.add_tool(getattr(tools, name), name=name, title=title, annotations=hints)
    return server


def http_app(
    orchestrator: Orchestrator,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    version: str = "",
    edge: Edge | None = None,
) -> tuple[MCPServer[Any], Starlette]:
    """The server and its streamable HTTP app (at ``/mcp``), bearer tokens required.
    Run the app's lifespan (uvicorn does) or ``server.session_manager.run()`` around it.

    The app stands behind ``edge`` (``server.edge``; by default one answering for
    ``host`` and loopback's names), as every listener does: a request without a token of
    role ``agent`` is refused before its body is read (401; 403 for another role), bad
    tokens are locked out, and bodies are capped and timed. The SDK's own Host and Origin
    check is off: the edge checks them, on any address."""
    chosen = edge if edge is not None else Edge(allowed_hosts=default_hosts(host))
    shown = f"[{host}]" if ":" in host else host
    server = build_server(orchestrator, url=f"http://{shown}:{port}", version=version)
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        host=host,
        max_request_body_size=max(chosen.max_body, 1),
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.add_middleware(StrictPlans)  # plans read as sent: a key given twice is refused
    mount(app, chosen, caller_gate(ledger_tokens(orchestrator.store, [Role.AGENT])))
    return server, app


async def run_stdio(server: MCPServer[Any]) -> None:
    """Serve ``server`` over this process's stdin and stdout, as ``run_stdio_async`` does,
    with every line read through ``plans_as_text``: plans are read as sent."""
    wire = TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    lines = strict_lines(aiter(anyio.wrap_file(wire)))
    async with stdio_server(stdin=cast(Any, lines)) as (read, write):
        low = server._lowlevel_server
        await low.run(read, write, low.create_initialization_options())
