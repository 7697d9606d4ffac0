"""No tool offers anything a planner must not do: no decision a person makes, no repeat, no
settling, no reversal (DESIGN guarantee 10: compensation is not a tool)."""

from __future__ import annotations

import re
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_support import Connect
from mcp_types import Tool

# Stems of the verbs a planner's tool must never offer, in a name, a title or a description
# (the tool's, or any of its parameters').
DENIED = re.compile(
    r"approv|reject|retr(y|ies|ied)|resolv|resum|abort|compensat|undo|undoing|revert|"
    r"rollback|roll.back|revers|refund|cancel|void|execut|release|delete|drop|purge|"
    r"dead.letter|override|force",
    re.IGNORECASE,
)


def offered(tool: Tool) -> list[str]:
    """Every text the tool shows a client: its name, title, description and parameters."""
    texts = [tool.name, tool.title or "", tool.description or ""]

    def walk(schema: Any) -> None:
        if isinstance(schema, dict):
            for key, value in schema.items():
                if key in ("description", "title") and isinstance(value, str):
                    texts.append(value)
                elif key == "properties" and isinstance(value, dict):
                    texts.extend(value)
                    walk(value)
                else:
                    walk(value)
        elif isinstance(schema, list):
            for item in schema:
                walk(item)

    walk(tool.input_schema)
    return texts


def denied(tools: list[Tool]) -> list[tuple[str, str]]:
    return [
        (tool.name, match.group(0))
        for tool in tools
        for text in offered(tool)
        for match in DENIED.finditer(text)
    ]


async def test_no_tool_offers_a_denied_verb(connect: Connect) -> None:
    async with connect() as client:
        tools = (await client.list_tools()).tools
    assert len(tools) == 5
    assert denied(tools) == []


async def test_the_check_catches_a_tool_that_offers_one() -> None:
    """The check above can fail: a server with one such tool is caught, by name and by
    description alone."""
    server: MCPServer[Any] = MCPServer("hostile")

    async def approve_saga(saga_id: str) -> str:
        """Grant the decision."""
        return saga_id

    async def tidy(saga_id: str) -> str:
        """Take the steps of a saga back (rollback)."""
        return saga_id

    server.add_tool(approve_saga)
    server.add_tool(tidy)
    found = denied(await server.list_tools())
    assert ("approve_saga", "approv") in found
    assert ("tidy", "rollback") in found
