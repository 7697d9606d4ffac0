"""``pivotal mcp --transport stdio`` as a subprocess, driven by the SDK's stdio client the way
an agent's host starts it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mcp.client.stdio import StdioServerParameters
from mcp_support import checkout, data, open_order
from mcp_types import CallToolResult, Implementation

from mcp import Client
from pivotal import ActorType, SagaStatus, SQLiteStore
from pivotal.examples.commerce import CommerceServices
from pivotal.mcp import TOOL_NAMES
from pivotal.views.saga_scope import scoped

PIVOTAL = Path(sys.executable).parent / "pivotal"


def parameters(tmp_path: Path, *extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    return StdioServerParameters(
        command=str(PIVOTAL),
        args=["--db", ledger, *extra, "mcp", "--transport", "stdio", "--create"],
        env=env,
        cwd=str(tmp_path),
    )


async def test_stdio_serves_the_tools_and_names_the_client(tmp_path: Path) -> None:
    services = CommerceServices(tmp_path / "commerce.db")  # the example's, beside the ledger
    open_order(services)
    services.close()
    info = Implementation(name="desktop-agent", version="3")
    async with Client(parameters(tmp_path, "--example-app"), client_info=info) as client:
        assert client.server_info is not None
        assert client.server_info.name == "pivotal"
        assert {t.name for t in (await client.list_tools()).tools} == set(TOOL_NAMES)
        bad = checkout()
        bad["steps"][1]["args"]["amount"] = "9999"
        checked = await client.call_tool("validate_plan", {"plan": bad})
        assert isinstance(checked, CallToolResult)
        errors = data(checked)["errors"]
        assert [(e["code"], e["path"]) for e in errors] == [
            ("invalid_args", "steps[1].args.amount")
        ]
        submitted = await client.call_tool("submit_plan", {"plan": checkout(), "saga_id": "sg-io"})
        assert isinstance(submitted, CallToolResult)
        assert data(submitted)["submitted_by"] == "desktop-agent"
    async with SQLiteStore(tmp_path / "ledger.db") as store:
        stored = await store.load(scoped("desktop-agent", "sg-io"))
    assert stored is not None
    assert stored.state.status is SagaStatus.SUBMITTED
    assert stored.plan.provenance.actor_type is ActorType.AGENT
    assert stored.plan.provenance.actor_id == "desktop-agent"


def test_stdio_without_an_app_refuses_to_start(tmp_path: Path) -> None:
    """The command writes to the ledger: like every such command it needs an app named
    (or the example chosen on purpose). It says so on stderr; stdout, the protocol's
    channel, stays empty."""
    params = parameters(tmp_path)
    done = subprocess.run(
        [params.command, *params.args],
        env=params.env,
        cwd=params.cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error [app_required]")
