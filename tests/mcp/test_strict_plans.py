"""MCP reads a plan as strictly as the CLI and the HTTP API: over stdio and over HTTP, a plan
object reaches the tool as the JSON text it was sent as, so a key given twice is refused and
the same size limits hold (one parser, ``parse_plan``, for every surface): a plan over 256 KiB
is refused as ``plan_too_large`` by both tools, before the edge's 512 KiB body cap."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp_support import INITIALIZE, serving

from pivotal import Orchestrator, SQLiteStore, parse_plan
from pivotal.errors import PlanParseError
from pivotal.mcp.strict import plans_as_text
from pivotal.people.principals import hash_token

PIVOTAL = Path(sys.executable).parent / "pivotal"
DUPLICATE_PLAN = (
    '{"catalogue": "fulfilment", "steps": [{"name": "capture_payment", "args": '
    '{"order_id": "4471", "amount": "180", "amount": "1"}}]}'
)
# a plan over parse_plan's 256 KiB, well under the MCP transport's 4 MiB message cap
TOO_BIG_PLAN = json.dumps({"catalogue": "fulfilment", "steps": [], "rationale": "x" * 300_000})


def tool_call(n: int, tool: str, arguments: str) -> str:
    """A tools/call request written by hand, ``arguments`` as raw JSON text."""
    return (
        f'{{"jsonrpc": "2.0", "id": {n}, "method": "tools/call", '
        f'"params": {{"name": "{tool}", "arguments": {arguments}}}}}'
    )


def test_a_plan_object_reaches_the_tool_as_the_text_it_was_sent_as() -> None:
    raw = tool_call(3, "validate_plan", f'{{"plan": {DUPLICATE_PLAN}}}')
    rewritten = json.loads(plans_as_text(raw))
    plan = rewritten["params"]["arguments"]["plan"]
    assert isinstance(plan, str)
    with pytest.raises(PlanParseError, match="'amount' appears twice"):
        parse_plan(plan)
    # numbers and other messages pass exactly as sent
    exact = tool_call(4, "submit_plan", '{"plan": {"a": 1.10, "b": 1e400, "c": [1, -0]}}')
    assert json.loads(plans_as_text(exact))["params"]["arguments"]["plan"] == (
        '{"a":1.10,"b":1e400,"c":[1,-0]}'
    )
    other = tool_call(5, "get_saga", '{"saga_id": "s", "saga_id": "t"}')
    assert plans_as_text(other) == other
    assert plans_as_text("not json") == "not json"
    # an argument given twice: the plan read is refused, nothing else is guessed
    twice = tool_call(6, "submit_plan", '{"plan": {}, "plan": {"catalogue": "x"}}')
    with pytest.raises(PlanParseError, match="'plan' appears twice"):
        parse_plan(json.loads(plans_as_text(twice))["params"]["arguments"]["plan"])


def test_a_plan_over_the_size_limit_is_refused_as_a_mapping_too() -> None:
    huge = {"catalogue": "fulfilment", "steps": [], "rationale": "x" * 300_000}
    with pytest.raises(PlanParseError, match="at most 262144 are read"):
        parse_plan(huge)


async def _line(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdout is not None
    while True:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line, "the server closed its output"
        found: dict[str, Any] = json.loads(line)
        if "id" in found:
            return found


@pytest.mark.timeout(120)
async def test_pivotal_mcp_over_stdio_refuses_a_key_given_twice_and_a_plan_too_big(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    process = await asyncio.create_subprocess_exec(
        str(PIVOTAL),
        "--db",
        f"sqlite:///{tmp_path / 'ledger.db'}",
        "--example-app",
        "mcp",
        "--create",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )
    assert process.stdin is not None
    try:
        process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        assert "result" in await _line(process)
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for n, tool in ((2, "validate_plan"), (3, "submit_plan")):
            process.stdin.write(
                (tool_call(n, tool, f'{{"plan": {DUPLICATE_PLAN}}}') + "\n").encode()
            )
            answer = (await _line(process))["result"]
            text = answer["content"][0]["text"]
            assert "'amount' appears twice" in text, text
            assert "plan_malformed" in text
        for n, tool in ((4, "validate_plan"), (5, "submit_plan")):
            process.stdin.write((tool_call(n, tool, f'{{"plan": {TOO_BIG_PLAN}}}') + "\n").encode())
            answer = (await _line(process))["result"]
            text = answer["content"][0]["text"]
            assert "at most 262144 are read" in text, text[:500]
            assert "plan_too_large" in text
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)
    assert not (tmp_path / "ledger.db").exists() or await _no_sagas(tmp_path)


async def _no_sagas(folder: Path) -> bool:
    async with SQLiteStore(folder / "ledger.db") as ledger:
        return await ledger.list_sagas() == []


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a streamable HTTP reply (JSON, or an event stream)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        found: dict[str, Any] = response.json()
        return found
    for line in response.text.splitlines():
        if line.startswith("data:"):
            found = json.loads(line[5:])
            if "id" in found:
                return found
    raise AssertionError(response.text)


@pytest.mark.timeout(120)
async def test_pivotal_mcp_over_http_refuses_a_key_given_twice_and_a_plan_too_big(
    orchestrator: Orchestrator,
) -> None:
    secret = "pvt_test_http_agent"
    await orchestrator.store.create_token("http-agent", "agent", hash_token(secret), 0.0)
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {secret}",
        "MCP-Protocol-Version": "2025-06-18",
    }
    async with serving(orchestrator) as url, httpx.AsyncClient(timeout=20) as http:
        started = await http.post(url, json=INITIALIZE, headers=headers)
        assert started.status_code == 200, started.text
        session = started.headers.get("mcp-session-id")
        if session:
            headers["mcp-session-id"] = session
        await http.post(
            url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        body = tool_call(2, "submit_plan", f'{{"plan": {DUPLICATE_PLAN}}}')
        answer = _answer(await http.post(url, content=body, headers=headers))["result"]
        assert answer["isError"] is True
        assert "'amount' appears twice" in answer["content"][0]["text"]
        body = tool_call(3, "submit_plan", f'{{"plan": {TOO_BIG_PLAN}}}')
        answer = _answer(await http.post(url, content=body, headers=headers))["result"]
        assert answer["isError"] is True
        assert "at most 262144 are read" in answer["content"][0]["text"]
        assert "plan_too_large" in answer["content"][0]["text"]
        # a body over the cap is refused by its declared length, before a byte is sent
        assert (await _head_only(url, headers, 5 * 1024 * 1024)).startswith(b"HTTP/1.1 413 ")
    assert await orchestrator.store.list_sagas() == []


async def _head_only(url: str, headers: dict[str, str], length: int) -> bytes:
    """The status line the server answers a POST head declaring ``length`` bytes with,
    none of which is sent."""
    parts = httpx.URL(url)
    reader, writer = await asyncio.open_connection(parts.host, parts.port)
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.host}:{parts.port}"]
    lines += [f"{k}: {v}" for k, v in headers.items()] + [f"Content-Length: {length}"]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    try:
        return await reader.readline()
    finally:
        writer.close()
        await writer.wait_closed()
