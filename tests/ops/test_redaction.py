"""Secrets never reach a terminal, a log record or an HTTP answer: a ledger URL's password
(in its userinfo or as ``?password=``), a webhook URL's ``user:password@`` and query token.

``pivotal.redaction`` is the one place that hides them; these tests run every command and
log line that prints a ledger URL, the relay's failure lines, the outbox's stored errors and
``/readyz`` over URLs holding ``s3cret`` / ``hunter2`` / ``abc123``, and assert that none
appears anywhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from typer.testing import CliRunner, Result

from pivotal import Catalogue, FakeClock, Orchestrator, SQLiteStore, StepContext
from pivotal.cli import cli
from pivotal.declarations.plan import parse_plan
from pivotal.errors import StoreError
from pivotal.examples.commerce import CommerceApp
from pivotal.operations.relay import Relay
from pivotal.redaction import MASK, redact, redact_url
from pivotal.sagas.outbox import Message
from pivotal.server import create_app
from secret_forms import FORMS

SECRET = "s3cret"
LEDGER = f"postgresql://u:{SECRET}@127.0.0.1:5432/db?password={SECRET}"
UNREACHABLE = f"postgresql://u:{SECRET}@127.0.0.1:1/db?password={SECRET}"
WEBHOOK = "https://u:hunter2@example.invalid/hook?token=abc123"
WEBHOOK_SECRETS = ("hunter2", "abc123")


# -- redact_url and redact -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (LEDGER, "postgresql://u:***@127.0.0.1:5432/db?password=***"),
        (WEBHOOK, "https://u:***@example.invalid/hook?token=***"),
        ("https://tok_live_123@example.com/x", "https://***@example.com/x"),
        ("postgresql://app@db.internal/ledger", "postgresql://app@db.internal/ledger"),
        ("postgresql://u:p@h/db?sslmode=require", "postgresql://u:***@h/db?sslmode=require"),
        (
            "https://h.example/hook?sig=a&api_key=b&x=c",
            "https://h.example/hook?sig=***&api_key=***&x=***",
        ),
        ("https://h.example/cb#access_token=zzz", "https://h.example/cb#***"),
        ("sqlite:///var/lib/pivotal.db", "sqlite:///var/lib/pivotal.db"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("postgresql://u:p@h:99999/db?password=p", "postgresql://u:***@h:99999/db?password=***"),
        ("postgresql://u:p@[::1/db", "postgresql://u:***@[::1/db"),
    ],
)
def test_redact_url_hides_credentials_and_keeps_the_target(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        f"connection failed: host=127.0.0.1 port=1 user=u password={SECRET} dbname=db",
        f"connection failed: host=127.0.0.1 password='{SECRET} with spaces' dbname=db",
        f"cannot reach {UNREACHABLE}: Connection refused",
        f"cannot reach '{LEDGER}'.",
        f'{{"password": "{SECRET}", "api_key": "{SECRET}"}}',
        f"PGPASSWORD={SECRET} token={SECRET}&secret={SECRET}",
        f"see ({WEBHOOK.replace('abc123', SECRET).replace('hunter2', SECRET)})",
    ],
)
def test_redact_hides_every_secret_in_free_text(text: str) -> None:
    shown = redact(text)
    assert SECRET not in shown
    assert MASK in shown


@pytest.mark.parametrize(("text", "secret"), FORMS)
def test_every_form_of_a_secret_is_hidden(text: str, secret: str) -> None:
    shown = redact(text)
    assert secret not in shown, shown
    assert MASK in shown
    assert redact(shown) == shown  # idempotent


@pytest.mark.parametrize(
    "text",
    [
        "saga s-1 step 2 key=s-1:2 failed: card declined (retry in 3 s); see http://h/x",
        "this server needs a bearer token of role agent (Authorization: Bearer <token>)",
        "Bearer tokens are kept as hashes; the token was revoked",
        "Basic plan: two steps",
        "error [invalid_token]: unknown or revoked token",
    ],
)
def test_redact_leaves_ordinary_text_alone(text: str) -> None:
    assert redact(text) == text


# -- the command line ----------------------------------------------------------------------


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def assert_hidden(result: Result, caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    records = [
        r.getMessage() + json.dumps(getattr(r, "fields", {}), default=str) for r in caplog.records
    ]
    for secret in secrets or (SECRET,):
        assert secret not in result.stdout, result.stdout
        assert secret not in result.stderr, result.stderr
        assert not [r for r in records if secret in r], records


@pytest.fixture
def secret_url(postgres_empty_url: str) -> str:
    """A reachable, empty PostgreSQL database, named with a password twice (the server
    trusts local connections: the password is only there to leak)."""
    rest = postgres_empty_url.split("://", 1)[1].split("@", 1)[1]
    return f"postgresql://postgres:{SECRET}@{rest}?password={SECRET}&sslmode=disable"


COMMANDS = [
    ("migrate",),
    ("migrate", "--json"),
    ("serve", "--check"),
    ("serve", "--check", "--json"),
    ("serve", "--check", "--log-format", "json"),
    ("worker", "--until-idle", "--poll", "0.01", "--migrate"),
    ("worker", "--until-idle", "--poll", "0.01", "--migrate", "--log-format", "json", "--json"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_commands_never_print_the_ledger_password(
    secret_url: str, command: tuple[str, ...], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO)
    env = {"PIVOTAL_COMMERCE_STATE": str(tmp_path / "commerce.db")}
    if command[0] != "migrate":
        assert invoke("--db", secret_url, "migrate").exit_code == 0
    result = invoke("--db", secret_url, "--example-app", *command, env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "postgresql://postgres:***@" in result.stdout + result.stderr + caplog.text
    assert_hidden(result, caplog)


@pytest.mark.parametrize(
    "command",
    [
        ("migrate",),
        ("migrate", "--json"),
        ("sagas", "list"),
        ("serve", "--check", "--json"),
        ("worker", "--until-idle"),
        ("submit", "plan.json"),
    ],
    ids=" ".join,
)
@pytest.mark.parametrize("url", [UNREACHABLE, LEDGER + "&bogus=1", f"mysql://u:{SECRET}@h/db"])
def test_errors_never_print_the_ledger_password(
    url: str, command: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    result = invoke("--db", url, *command)
    assert result.exit_code != 0
    if "--json" in command:  # under --json the error is one JSON object
        assert json.loads(result.stderr)["error"]
    else:
        assert "error [" in result.stderr
    assert_hidden(result, caplog)


def test_a_command_refusing_for_want_of_an_app_names_the_ledger_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    result = invoke("--db", LEDGER, "sweep")
    assert result.exit_code != 0
    assert "postgresql://u:***@127.0.0.1:5432/db?password=***" in result.stderr
    assert_hidden(result, caplog)


# -- the relay -----------------------------------------------------------------------------


class Leaky:
    """A sink named by its URL whose client error quotes the URL, like an HTTP client's."""

    name = WEBHOOK

    async def deliver(self, message: Message) -> None:
        raise OSError(f"cannot connect to {WEBHOOK}: name does not resolve")


class Note(BaseModel):
    count: int = 1


async def _announcing_ledger(path: Path) -> None:
    catalogue = Catalogue("announce")

    @catalogue.compensable()
    async def note(args: Note, ctx: StepContext) -> dict[str, int]:
        return {}

    @note.undo
    async def unnote(args: Note, result: Any, ctx: StepContext) -> None:
        return None

    async with SQLiteStore(path) as store:
        orch = Orchestrator(store, catalogue, clock=FakeClock(time.time() - 1))
        plan = parse_plan({"catalogue": "announce", "steps": [{"name": "note", "args": {}}]})
        await orch.execute(plan, saga_id="c-0")


def test_the_relay_logs_and_keeps_a_failed_webhook_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    settled: list[str | None] = []

    async def work() -> list[Message]:
        await _announcing_ledger(tmp_path / "ledger.db")
        async with SQLiteStore(tmp_path / "ledger.db") as store:
            relay = Relay(store, [Leaky()], on_settled=lambda m, o, e: settled.append(e))
            report = await relay.run_once()
            assert report.claimed == 1
            return await store.messages(None, None, 10)

    [message] = asyncio.run(work())
    assert message.last_error
    assert "example.invalid/hook" in message.last_error
    kept = [message.last_error, *(e or "" for e in settled)]
    logged = [r.getMessage() for r in caplog.records]
    assert any("example.invalid" in line for line in logged), logged
    for secret in WEBHOOK_SECRETS:
        assert not [t for t in kept + logged if secret in t], (kept, logged)
    listed = invoke("--db", f"sqlite:///{tmp_path / 'ledger.db'}", "outbox", "list")
    assert listed.exit_code == 0
    assert not [s for s in WEBHOOK_SECRETS if s in listed.stdout]


def test_outbox_relay_to_a_webhook_never_prints_its_credentials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    asyncio.run(_announcing_ledger(tmp_path / "ledger.db"))
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    from pivotal.operations.webhooks import new_secret

    env = {"HOOK_SECRET": new_secret()}
    for extra in ([], ["--allow-insecure"]):
        result = invoke(
            "--db",
            ledger,
            "outbox",
            "relay",
            "--webhook",
            WEBHOOK,
            "--secret-env",
            "HOOK_SECRET",
            "--until-idle",
            "--timeout",
            "2",
            *extra,
            env=env,
        )
        assert_hidden(result, caplog, *WEBHOOK_SECRETS)
    listed = invoke("--db", ledger, "outbox", "list", "--json")
    assert not [s for s in WEBHOOK_SECRETS if s in listed.stdout]


# -- /readyz -------------------------------------------------------------------------------


async def test_readyz_says_only_that_the_ledger_is_unreachable(
    tmp_path: Path,
    app: CommerceApp,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO)
    async with SQLiteStore(tmp_path / "ledger.db") as store:

        async def unreachable() -> tuple[int, int]:
            raise StoreError(f"cannot connect to {UNREACHABLE}: password={SECRET} refused")

        monkeypatch.setattr(store, "schema_versions", unreachable)
        api = create_app(store, app)
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://pivotal") as client:
            reply = await client.get("/readyz")
    assert reply.status_code == 503
    body = reply.json()
    assert body["error"]["code"].startswith("store_")
    assert body["error"]["message"] == "ledger unreachable"
    assert SECRET not in reply.text
    logged = [r.getMessage() for r in caplog.records if "readyz" in r.getMessage()]
    assert logged
    assert "127.0.0.1:1" in logged[0]
    assert not [line for line in logged if SECRET in line]


# -- the log formatters --------------------------------------------------------------------


def test_log_lines_are_redacted_and_stay_one_line() -> None:
    from pivotal.observability.logs import JsonLines, TextLines

    record = logging.LogRecord(
        "pivotal.test", logging.WARNING, __file__, 1, "step failed: %s", None, None
    )
    record.args = (f"cannot reach {LEDGER}\nforged: yes \x1b[2J\u202e",)
    text = TextLines().format(record)
    assert SECRET not in text
    assert "\n" not in text
    assert "\x1b" not in text
    assert "\u202e" not in text
    assert "\\nforged: yes \\x1b[2J\\u202e" in text
    line = json.loads(JsonLines().format(record))
    assert SECRET not in line["message"]
    assert "postgresql://u:***@127.0.0.1:5432/db?password=***" in line["message"]
