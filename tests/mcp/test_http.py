"""The streamable HTTP transport under uvicorn on a free port: only bearer tokens of role
``agent`` of this ledger get in, and the token's principal is who the plan is recorded as
coming from."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp_support import INITIALIZE, checkout, data, error, serving
from mcp_types import CallToolResult

from mcp import Client
from pivotal import Orchestrator
from pivotal.mcp import PATH, TOOL_NAMES
from pivotal.people.principals import hash_token
from pivotal.views.saga_scope import scoped

PIVOTAL = Path(sys.executable).parent / "pivotal"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def token(orch: Orchestrator, name: str, role: str) -> tuple[str, str]:
    """A new token's secret and id, kept in the ledger as the CLI keeps it."""
    secret = f"pvt_test_{name}_{role}"
    made = await orch.store.create_token(name, role, hash_token(secret), 0.0)
    return secret, made.id


@asynccontextmanager
async def agent(url: str, secret: str) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, sending the bearer token."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=20)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def call(client: Client, tool: str, **arguments: object) -> CallToolResult:
    result = await client.call_tool(tool, dict(arguments))
    assert isinstance(result, CallToolResult)
    return result


async def test_an_agent_token_gets_the_tools_and_is_the_proposer(orch: Orchestrator) -> None:
    secret, _ = await token(orch, "scheduler-bot", "agent")
    other, _ = await token(orch, "other-bot", "agent")
    async with serving(orch) as url:
        async with agent(url, secret) as client:
            assert {t.name for t in (await client.list_tools()).tools} == set(TOOL_NAMES)
            assert data(await call(client, "validate_plan", plan=checkout()))["valid"] is True
            plan = checkout(provenance={"actor_type": "agent", "actor_id": "admin"})
            submitted = data(await call(client, "submit_plan", plan=plan, saga_id="sg-http"))
            assert submitted["submitted_by"] == "scheduler-bot"
            seen = data(await call(client, "get_saga", saga_id="sg-http"))
            assert seen["status"] == "submitted"
        async with agent(url, other) as client:
            # another agent neither sees the saga nor takes over its id: the id is its own
            hidden = error(await call(client, "get_saga", saga_id="sg-http"))
            assert hidden["error"] == "saga_not_found"
            own = data(await call(client, "submit_plan", plan=plan, saga_id="sg-http"))
            assert (own["created"], own["saga_id"]) == (True, "sg-http")
    stored = await orch.get(scoped("scheduler-bot", "sg-http"))
    assert stored.plan.provenance.actor_id == "scheduler-bot"
    theirs = await orch.get(scoped("other-bot", "sg-http"))
    assert theirs.plan.provenance.actor_id == "other-bot"


async def test_a_token_that_requires_on_behalf_of_refuses_a_plan_without_it(
    orch: Orchestrator,
) -> None:
    secret = "pvt_test_strict_bot"
    await orch.store.create_token(
        "strict-bot", "agent", hash_token(secret), 0.0, require_on_behalf_of=True
    )
    async with serving(orch) as url, agent(url, secret) as client:
        checked = data(await call(client, "validate_plan", plan=checkout()))
        assert checked["valid"] is False
        assert [e["code"] for e in checked["errors"]] == ["on_behalf_of_required"]
        refused = error(await call(client, "submit_plan", plan=checkout(), saga_id="sg-1"))
        assert refused["error"] == "on_behalf_of_required"
        assert await orch.store.load(scoped("strict-bot", "sg-1")) is None
        plan = checkout(provenance={"on_behalf_of": "ana"})
        submitted = data(await call(client, "submit_plan", plan=plan, saga_id="sg-1"))
        assert submitted["submitted_by"] == "strict-bot"
    stored = await orch.get(scoped("strict-bot", "sg-1"))
    assert stored.plan.provenance.on_behalf_of == "ana"


@pytest.mark.parametrize(
    ("role", "revoked", "status"),
    [
        (None, False, 401),  # no token at all
        ("agent", True, 401),  # revoked
        ("viewer", False, 403),
        ("approver", False, 403),
        ("admin", False, 403),
    ],
)
async def test_other_callers_are_refused(
    orch: Orchestrator, role: str | None, revoked: bool, status: int
) -> None:
    headers = dict(HEADERS)
    if role is not None:
        secret, token_id = await token(orch, "someone", role)
        if revoked:
            assert await orch.store.revoke_token(token_id, 1.0) is not None
        headers["Authorization"] = f"Bearer {secret}"
    async with serving(orch) as url, httpx.AsyncClient(timeout=20) as http:
        refused = await http.post(url, json=INITIALIZE, headers=headers)
        assert refused.status_code == status, refused.text
        assert refused.headers["www-authenticate"].startswith("Bearer")
        forged = await http.post(
            url, json=INITIALIZE, headers=HEADERS | {"Authorization": "Bearer pvt_forged"}
        )
        assert forged.status_code == 401
        good, _ = await token(orch, "good-bot", "agent")
        accepted = await http.post(
            url, json=INITIALIZE, headers=HEADERS | {"Authorization": f"Bearer {good}"}
        )
        assert accepted.status_code == 200, accepted.text
    assert await orch.store.list_sagas(None, 10) == []


def test_the_command_serves_http_with_ledger_tokens(tmp_path: Path) -> None:
    """``pivotal mcp --transport http``: ready once uvicorn says so on stderr; a token from
    ``pivotal tokens create --role agent`` gets in, none does not."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    ledger = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}"]
    create = ["tokens", "create", "--name", "cli-bot", "--role", "agent", "--json", "--create"]
    made = subprocess.run(
        [str(PIVOTAL), *ledger, *create],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    secret = json.loads(made.stdout)["token"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(PIVOTAL), *ledger, "--example-app", "mcp", "--transport", "http"]
    served = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert served.stderr is not None
        seen = []
        for line in served.stderr:  # the per-test timeout bounds this wait
            seen.append(line)
            if "Application startup complete" in line:
                break
        else:
            pytest.fail(f"the server ended before it was ready: {''.join(seen)}")
        url = f"http://127.0.0.1:{port}{PATH}"
        with httpx.Client(timeout=20) as http:
            assert http.post(url, json=INITIALIZE, headers=HEADERS).status_code == 401
            auth = HEADERS | {"Authorization": f"Bearer {secret}"}
            assert http.post(url, json=INITIALIZE, headers=auth).status_code == 200
    finally:
        served.terminate()
        served.wait(timeout=30)
        if served.stderr is not None:
            served.stderr.close()
