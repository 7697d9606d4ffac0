"""``pivotal outbox``: list, relay (to a callable, to a signed webhook; until idle or until
SIGTERM), replay and new-secret, on a SQLite ledger of real sagas."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner, Result

from pivotal import Catalogue, FakeClock, Orchestrator, SQLiteStore, StepContext
from pivotal.cli import cli
from pivotal.declarations.plan import parse_plan
from pivotal.operations.webhooks import new_secret, verify

PIVOTAL = Path(sys.executable).parent / "pivotal"
SECRET = new_secret()
HANDLER = """
received = []

async def handle(message):
    received.append(message.id)
    with open({path!r}, "a") as f:
        f.write(message.id + "\\n")
"""


class Note(BaseModel):
    count: int = 1


@pytest.fixture
def ledger(tmp_path: Path) -> str:
    """A SQLite ledger holding 2 completed sagas: 4 messages, due now."""
    catalogue = Catalogue("announce")

    @catalogue.compensable()
    async def note(args: Note, ctx: StepContext) -> dict[str, int]:
        ctx.publish("note.made", {"n": 0})
        return {}

    @note.undo
    async def unnote(args: Note, result: Any, ctx: StepContext) -> None:
        return None

    async def make() -> None:
        async with SQLiteStore(tmp_path / "ledger.db") as store:
            orch = Orchestrator(store, catalogue, clock=FakeClock(time.time() - 1))
            plan = parse_plan({"catalogue": "announce", "steps": [{"name": "note", "args": {}}]})
            for i in range(2):
                await orch.execute(plan, saga_id=f"c-{i}")

    asyncio.run(make())
    return f"sqlite:///{tmp_path / 'ledger.db'}"


def pivotal(ledger: str, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["--db", ledger, *args], env=env)


@pytest.fixture
def handler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module ``outbox_handler`` whose ``handle`` writes each message id to a file."""
    received = tmp_path / "received.txt"
    (tmp_path / "outbox_handler.py").write_text(HANDLER.format(path=str(received)))
    monkeypatch.syspath_prepend(str(tmp_path))
    return received


def test_list_shows_the_messages_in_outbox_order(ledger: str) -> None:
    result = pivotal(ledger, "outbox", "list", "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [m["type"] for m in found] == ["note.made", "saga.completed"] * 2
    assert {m["status"] for m in found} == {"pending"}
    one = pivotal(ledger, "outbox", "list", "--saga", "c-1", "--status", "pending")
    assert one.exit_code == 0
    assert "c-1:" in one.stdout
    assert "c-0:" not in one.stdout


def test_relay_to_a_callable_until_idle(ledger: str, handler: Path) -> None:
    result = pivotal(
        ledger, "outbox", "relay", "--callable", "outbox_handler:handle", "--until-idle"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.count("delivered c-") == 4
    assert len(handler.read_text().split()) == 4
    listed = json.loads(pivotal(ledger, "outbox", "list", "--json").stdout)
    assert {m["status"] for m in listed} == {"delivered"}


def test_replay_makes_a_message_due_again(ledger: str, handler: Path) -> None:
    pivotal(ledger, "outbox", "relay", "--callable", "outbox_handler:handle", "--until-idle")
    first = json.loads(pivotal(ledger, "outbox", "list", "--json").stdout)[0]
    assert (first["type"], first["status"]) == ("note.made", "delivered")
    replayed = pivotal(ledger, "outbox", "replay", first["id"], "--json")
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.stdout) == {"id": first["id"], "status": "pending"}
    again = pivotal(
        ledger,
        "outbox",
        "relay",
        "--callable",
        "outbox_handler:handle",
        "--until-idle",
        "--json",
    )
    assert json.loads(again.stdout)["messages"] == [
        {"id": first["id"], "type": "note.made", "outcome": "delivered", "error": None}
    ]
    missing = pivotal(ledger, "outbox", "replay", "c-9:1")
    assert missing.exit_code == 2
    assert "message_not_found" in missing.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ([], "invalid_input"),
        (["--webhook", "https://hooks.example.com/x"], "invalid_input"),
        (["--webhook", "https://127.0.0.1/x", "--secret", SECRET], "webhook_unsafe"),
        (["--webhook", "https://hooks.example.com/x", "--secret", "nope"], "webhook_invalid"),
        (["--webhook", "https://h.example.com/x", "--secret-env", "NOT_SET_X"], "invalid_input"),
        (["--callable", "no_such_module_x:handle"], "invalid_input"),
    ],
)
def test_relay_refuses_what_it_cannot_deliver_to(ledger: str, args: list[str], code: str) -> None:
    result = pivotal(ledger, "outbox", "relay", "--until-idle", *args)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.stderr


def test_new_secret() -> None:
    result = CliRunner().invoke(cli, ["outbox", "new-secret"])
    assert result.exit_code == 0
    assert result.stdout.strip().startswith("whsec_")


class Receiver(BaseHTTPRequestHandler):
    got: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        verify(SECRET, dict(self.headers.items()), body)
        self.got.append(self.headers["webhook-id"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[str]]]:
    got: list[str] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (Receiver,), {"got": got}))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/in", got
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_relay_process_delivers_signed_webhooks_until_sigterm(
    ledger: str, receiver: tuple[str, list[str]]
) -> None:
    url, got = receiver
    env = {**os.environ, "HOOK_SECRET": SECRET}
    proc = subprocess.Popen(
        [
            PIVOTAL,
            "--db",
            ledger,
            "outbox",
            "relay",
            "--webhook",
            url,
            "--allow-insecure",
            "--secret-env",
            "HOOK_SECRET",
            "--poll",
            "0.05",
            "--json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30  # a bound against a hang, never a measure
        while len(got) < 4 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert len(got) == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    report = json.loads(out)
    assert report["totals"]["delivered"] == 4
    assert sorted(m["id"] for m in report["messages"]) == sorted(got)
