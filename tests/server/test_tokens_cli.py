"""``pivotal tokens create/list/revoke``: the token is printed once, only its hash is kept,
and a revoked token is refused by the API."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from pivotal.cli import cli
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import hash_token
from pivotal.server import create_app
from pivotal.store import SQLiteStore


def pivotal(ledger: Path, *args: str) -> tuple[int, str, str]:
    """The command line over ``ledger``; the first ``tokens create`` makes it (--create)."""
    made = ["--create"] if args[:2] == ("tokens", "create") and not ledger.exists() else []
    done = CliRunner().invoke(cli, ["--db", f"sqlite:///{ledger}", *args, *made])
    return done.exit_code, done.stdout, done.stderr


def test_tokens_create_list_revoke_and_a_revoked_token_is_401(
    tmp_path: Path, app: CommerceApp
) -> None:
    ledger = tmp_path / "ledger.db"
    status, out, err = pivotal(ledger, "tokens", "create", "--name", "alice", "--role", "approver")
    assert status == 0, err
    assert "shown only now" in out
    status, out, err = pivotal(
        ledger, "tokens", "create", "--name", "bot", "--role", "agent", "--json"
    )
    assert status == 0, err
    created = json.loads(out)
    assert created["name"] == "bot"
    assert created["role"] == "agent"
    secret = created["token"]
    assert secret.startswith("pvt_")

    status, out, _ = pivotal(ledger, "tokens", "list", "--json")
    listed = json.loads(out)
    assert [(t["name"], t["role"], t["revoked_at"]) for t in listed] == [
        ("alice", "approver", None),
        ("bot", "agent", None),
    ]
    assert secret not in out
    with sqlite3.connect(ledger) as db:  # only the hash is kept
        kept = [row[0] for row in db.execute("SELECT hash FROM tokens")]
    assert hash_token(secret) in kept
    assert secret not in ledger.read_bytes().decode("latin-1")
    assert "alice" in pivotal(ledger, "tokens", "list")[1]

    async def through_the_api() -> None:
        async with SQLiteStore(ledger) as store:
            api = create_app(store, app)
            headers = {"Authorization": f"Bearer {secret}"}
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=api), base_url="http://pivotal", headers=headers
            ) as client:
                assert (await client.get("/v1/catalogues/checkout")).status_code == 200
                await asyncio.to_thread(revoke)
                refused = await client.get("/v1/catalogues/checkout")
                assert refused.status_code == 401

    def revoke() -> None:
        status, out, err = pivotal(ledger, "tokens", "revoke", created["id"], "--json")
        assert status == 0, err
        assert json.loads(out)["revoked_at"] is not None

    asyncio.run(through_the_api())
    status, _, err = pivotal(ledger, "tokens", "revoke", "tok_nope")
    assert status == 2
    assert err.startswith("error [invalid_input]: no token")
    status, _, err = pivotal(ledger, "tokens", "create", "--name", "x", "--role", "root")
    assert status == 2
    status, _, err = pivotal(ledger, "tokens", "create", "--name", " ", "--role", "viewer")
    assert status == 2
    assert "error [invalid_input]" in err


def listed(ledger: Path) -> list[dict[str, object]]:
    status, out, err = pivotal(ledger, "tokens", "list", "--json")
    assert status == 0, err
    found: list[dict[str, object]] = json.loads(out)
    return found


def test_a_name_that_folds_to_a_live_principal_needs_same_person(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    status, out, err = pivotal(
        ledger, "tokens", "create", "--name", "alice", "--role", "approver", "--json"
    )
    assert status == 0, err
    first = json.loads(out)
    for spelling in ("alice", " ALICE ", "\uff41lice", "Alice"):
        status, out, err = pivotal(
            ledger, "tokens", "create", "--name", spelling, "--role", "agent"
        )
        assert status == 2, (spelling, out)
        assert err.startswith("error [name_taken]"), err
        assert "--same-person" in err
        assert "pvt_" not in out  # nothing was made, nothing shown
    # an invisible character is not printable: refused before it is compared
    status, _, err = pivotal(ledger, "tokens", "create", "--name", "alice\u200b", "--role", "agent")
    assert status == 2
    assert err.startswith("error [invalid_input]")
    assert [t["name"] for t in listed(ledger)] == ["alice"]
    # a second token for the same person, asked for
    status, out, err = pivotal(
        ledger, "tokens", "create", "--name", "Alice", "--role", "approver", "--same-person"
    )
    assert status == 0, err
    assert [t["name"] for t in listed(ledger)] == ["alice", "Alice"]
    # a name whose tokens are all revoked is free again
    status, out, err = pivotal(ledger, "tokens", "create", "--name", "bob", "--role", "viewer")
    assert status == 0, err
    [bob] = [t for t in listed(ledger) if t["name"] == "bob"]
    assert pivotal(ledger, "tokens", "revoke", str(bob["id"]))[0] == 0
    status, out, err = pivotal(ledger, "tokens", "create", "--name", "Bob", "--role", "viewer")
    assert status == 0, err
    assert first["require_on_behalf_of"] is False


def test_an_agent_token_may_require_on_behalf_of(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    status, out, err = pivotal(
        ledger,
        "tokens",
        "create",
        "--name",
        "strict-bot",
        "--role",
        "agent",
        "--require-on-behalf-of",
        "--json",
    )
    assert status == 0, err
    assert json.loads(out)["require_on_behalf_of"] is True
    [kept] = listed(ledger)
    assert kept["require_on_behalf_of"] is True
    assert "required" in pivotal(ledger, "tokens", "list")[1]
    status, out, err = pivotal(
        ledger, "tokens", "create", "--name", "ann", "--role", "approver", "--require-on-behalf-of"
    )
    assert status == 2
    assert err.startswith("error [invalid_input]")
    assert [t["name"] for t in listed(ledger)] == ["strict-bot"]


def test_serve_check_builds_the_api_without_listening(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    missing = CliRunner().invoke(
        cli, ["--db", f"sqlite:///{ledger}", "--example-app", "serve", "--check", "--create"]
    )
    assert missing.exit_code == 2  # --check never makes a ledger
    assert missing.stderr.startswith(f"error [ledger_not_found]: no ledger at {ledger}: ")
    assert not ledger.exists()
    assert CliRunner().invoke(cli, ["--db", f"sqlite:///{ledger}", "migrate"]).exit_code == 0
    done = CliRunner().invoke(
        cli, ["--db", f"sqlite:///{ledger}", "--example-app", "serve", "--check"]
    )
    assert done.exit_code == 0, done.stderr
    assert "ready to serve" in done.stderr
    refused = CliRunner().invoke(cli, ["--db", f"sqlite:///{ledger}", "serve", "--check"])
    assert refused.exit_code == 2
    assert refused.stderr.startswith("error [app_required]")


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("999.1.1.1", False),
        ("1.2.3", False),
        ("::g", False),
        ("exa mple.com", False),
        ("-bad.example.com", False),
        ("127.0.0.1", True),
        ("::1", True),
        ("0.0.0.0", True),
        ("localhost", True),
        ("api.example.com", True),
    ],
)
def test_serve_check_reads_the_host_as_an_address(tmp_path: Path, host: str, ok: bool) -> None:
    ledger = tmp_path / "ledger.db"
    assert CliRunner().invoke(cli, ["--db", f"sqlite:///{ledger}", "migrate"]).exit_code == 0
    done = CliRunner().invoke(
        cli,
        ["--db", f"sqlite:///{ledger}", "--example-app", "serve", "--check", "--host", host],
    )
    if ok:
        assert done.exit_code == 0, done.stderr
        return
    assert done.exit_code == 2
    assert done.stderr.startswith("error [usage]: Invalid value for --host: "), done.stderr
    assert "not an IP address" in done.stderr or "nor a host name" in done.stderr
