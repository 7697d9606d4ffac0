"""Every command that prints a table has ``--wide`` (the table at its full width) and
``--json``; ``--json`` given before the command works as after it."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import time
from pathlib import Path

import pytest
import typer
from cli_harness import InProcess, commands
from typer.testing import CliRunner

from pivotal import SQLiteStore
from pivotal.cli import build
from pivotal.cli._shared import new_group

TABLES = {  # the commands that print a table, or a view made of tables
    "sagas list",
    "sagas show",
    "sagas events",
    "searches list",
    "approvals list",
    "dead-letters list",
    "tokens list",
    "workers",
    "outbox list",
    "report",
    "escalations list",
    "escalations show",
    "shadow run",
    "shadow report",
    "shadow show",
    "plan",
    "execute",
    "check-provider",
}
OPTIONS = {" ".join(path): {o for p in c.params for o in p.opts} for path, c in commands()}


@pytest.mark.parametrize("command", sorted(TABLES))
def test_a_table_command_has_wide_and_json(command: str) -> None:
    assert {"--wide", "--json"} <= OPTIONS[command]


def test_every_command_that_has_wide_is_listed_here() -> None:
    assert {name for name, options in OPTIONS.items() if "--wide" in options} == TABLES


def _ledger(inproc: InProcess) -> None:
    inproc.ok("migrate")
    name = "tok-" + "x" * 40  # long enough that a table at 80 columns must squeeze it
    inproc.ok("tokens", "create", "--name", name, "--role", "approver")
    inproc.ok("tokens", "create", "--name", "planner-bot", "--role", "agent")
    inproc.ok("searches", "save", "stuck", "status=needs_human")

    async def start() -> None:
        async with SQLiteStore(inproc.ledger) as store:
            await store.start_worker(
                "w-1", time.time(), version="0.9", catalogues=["checkout"], beat_every=10.0
            )

    asyncio.run(start())


READS = [
    ("sagas", "list"),
    ("searches", "list"),
    ("approvals", "list"),
    ("dead-letters", "list"),
    ("tokens", "list"),
    ("outbox", "list"),
    ("escalations", "list"),
]


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_json_before_the_command_is_json_after_it(
    inproc: InProcess, command: tuple[str, ...]
) -> None:
    _ledger(inproc)
    before = inproc.raw("--db", inproc.url, "--json", *command)
    assert before.exit_code == 0, before.stderr
    after = inproc.ok(*command, "--json")
    assert json.loads(before.stdout) == json.loads(after)


def test_json_before_workers_and_before_the_global_options(inproc: InProcess) -> None:
    _ledger(inproc)
    done = inproc.raw("--json", "--db", inproc.url, "workers")
    assert done.exit_code == 0, done.stderr
    assert [w["name"] for w in json.loads(done.stdout)] == ["w-1"]


def test_json_before_the_command_makes_its_error_json(inproc: InProcess) -> None:
    _ledger(inproc)
    done = inproc.raw("--db", inproc.url, "--json", "sagas", "show", "nope")
    assert done.exit_code == 2
    assert json.loads(done.stderr)["error"] == "saga_not_found"


def test_wide_keeps_every_token_on_one_line(inproc: InProcess) -> None:
    _ledger(inproc)
    inproc.env["COLUMNS"] = "80"
    ids = [t["id"] for t in inproc.json("tokens", "list")]
    wide = inproc.ok("tokens", "list", "--wide").splitlines()
    for token_id in ids:
        row = next(line for line in wide if token_id in line)
        assert ("tok-" + "x" * 40 in row) or ("planner-bot" in row)
    narrow = inproc.ok("tokens", "list").splitlines()
    assert all(any(token_id in line for line in narrow) for token_id in ids)


# -- --json before a command: honoured, or refused when the command prints no JSON ---------


def test_every_command_has_json_so_json_before_it_is_honoured() -> None:
    assert {name for name, options in OPTIONS.items() if "--json" not in options} == set()


def _with_plain_commands() -> typer.Typer:
    """The app with a command, and a command of a group, that print no JSON."""
    app = build()

    def hello() -> None:
        """Say hello."""
        typer.echo("hello")

    app.command("hello")(hello)
    things = new_group("Things.")
    things.command("ping")(hello)
    app.add_typer(things, name="things")
    return app


@pytest.mark.parametrize("command", [("hello",), ("things", "ping")], ids=" ".join)
def test_json_before_a_command_that_prints_no_json_is_refused(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    runner, app = CliRunner(), _with_plain_commands()
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert runner.invoke(app, ["--db", url, *command]).stdout == "hello\n"

    done = runner.invoke(app, ["--db", url, "--json", *command])

    assert done.exit_code == 2
    assert done.stdout == ""  # not run
    said = json.loads(done.stderr)  # under --json, the error is JSON too
    assert said["error"] == "usage"
    assert f"pivotal {' '.join(command)}" in said["message"]
    assert "prints no JSON" in said["message"]
    plain = runner.invoke(app, ["--db", url, *command, "--json"])  # its own: it has none
    assert plain.exit_code == 2


def test_json_before_the_version_prints_it_as_json(inproc: InProcess) -> None:
    done = inproc.raw("--json", "--version")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout) == {"version": importlib.metadata.version("pivotal")}
    assert inproc.raw("--version").stdout.startswith("pivotal ")
