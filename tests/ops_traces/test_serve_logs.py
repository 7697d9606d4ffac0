"""`pivotal serve --log-format`: the server's lines, uvicorn's and one line per request go
through Pivotal's formatter."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from typer.testing import CliRunner

from pivotal.cli import cli
from pivotal.cli.serve import uvicorn_config
from pivotal.examples.commerce import CommerceApp
from pivotal.observability.logs import LogFormat, RequestLog, configure_logging
from pivotal.server import create_app
from pivotal.store import SQLiteStore

BOUND = 30.0  # only turns a hang into a failure


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_serve_check_with_json_log_lines(tmp_path: Path) -> None:
    args = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--example-app", "serve", "--check"]
    assert CliRunner().invoke(cli, [*args[:2], "migrate"]).exit_code == 0  # --check makes none
    done = CliRunner().invoke(cli, [*args, "--log-format", "json"])
    assert done.exit_code == 0, done.stderr
    [ready] = [line for line in json_lines(done.stderr) if line.get("event") == "serve_ready"]
    assert "ready to serve at http://127.0.0.1:8000" in ready["message"]
    assert (ready["logger"], ready["url"], ready["check"]) == (
        "pivotal.serve",
        "http://127.0.0.1:8000",
        True,
    )

    proxy = ["--trust-proxy-header", "X-User", "--trusted-proxy", "127.0.0.1"]
    trusted = [*args, *proxy, "--log-format", "json", "--json"]
    done = CliRunner().invoke(cli, trusted)
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["ready"] is True  # stdout keeps the command's answer
    warning, _ready = json_lines(done.stderr)
    assert warning["level"] == "warning"
    assert warning["event"] == "serve_trusts_header"
    assert "strips it from clients" in warning["message"]


def test_serve_check_with_text_log_lines(tmp_path: Path) -> None:
    args = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--example-app", "serve", "--check"]
    assert CliRunner().invoke(cli, [*args[:2], "migrate"]).exit_code == 0  # --check makes none
    done = CliRunner().invoke(cli, [*args, "--log-format", "text"])
    assert done.exit_code == 0, done.stderr
    assert " pivotal.serve the API over " in done.stderr
    assert "ready to serve" in done.stderr
    refused = CliRunner().invoke(cli, [*args, "--log-format", "xml"])
    assert refused.exit_code == 2


async def test_uvicorn_and_request_lines_are_json_lines(tmp_path: Path, app: CommerceApp) -> None:
    buffer = io.StringIO()
    async with SQLiteStore(tmp_path / "ledger.db") as store:
        with configure_logging(LogFormat.JSON, stream=buffer):
            config = uvicorn_config(create_app(store, app), "127.0.0.1", 0)
            assert config.log_config is None
            assert isinstance(config.app, RequestLog)
            server = uvicorn.Server(config)
            serving = asyncio.create_task(server.serve())
            async with asyncio.timeout(BOUND):
                # uvicorn offers a flag, not an event, for "listening"
                while not server.started and not serving.done():  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            assert server.started, serving.exception()
            port = server.servers[0].sockets[0].getsockname()[1]
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                assert (await client.get("/healthz")).status_code == 200
                token = {"Authorization": "Bearer not-a-real-token"}
                denied = await client.get("/v1/sagas/big?x=1", headers=token)
                assert denied.status_code == 401
            server.should_exit = True
            await asyncio.wait_for(serving, BOUND)

    text = buffer.getvalue()
    assert "not-a-real-token" not in text
    lines = json_lines(text)  # every line is JSON
    loggers = {line["logger"] for line in lines}
    assert "uvicorn.error" in loggers  # uvicorn's own lines, through our formatter
    assert "uvicorn.access" not in loggers  # RequestLog says it instead
    requests = [line for line in lines if line.get("event") == "http_request"]
    assert [(r["method"], r["path"], r["status"], r.get("saga_id")) for r in requests] == [
        ("GET", "/healthz", 200, None),
        ("GET", "/v1/sagas/big", 401, "big"),
    ]
