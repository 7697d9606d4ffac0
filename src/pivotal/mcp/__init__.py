"""Pivotal as tools for any agent: an MCP server (the official ``mcp`` SDK, 2.x).

It offers exactly what a planner may do: list and describe catalogues, validate a plan,
submit it (recorded as a saga, never run here), and read a saga. Nothing that decides,
repeats, settles or reverses anything is offered. ``pip install "pivotal[mcp]"``; this
package is the only one importing the SDK, and ``import pivotal`` does not import it.
"""

from __future__ import annotations

from pivotal.mcp.auth import Caller, LedgerTokens
from pivotal.mcp.server import INSTRUCTIONS, PATH, TOOL_NAMES, build_server, http_app
from pivotal.mcp.tools import PlannerTools

__all__ = [
    "INSTRUCTIONS",
    "PATH",
    "TOOL_NAMES",
    "Caller",
    "LedgerTokens",
    "PlannerTools",
    "build_server",
    "http_app",
]
