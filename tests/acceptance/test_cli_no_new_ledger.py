"""A mistyped SQLite path never starts a new, empty ledger: a command that writes refuses a
missing file, creating nothing, unless it has ``--create`` and is given it; a command that
only reads, and ``serve --check``, never make one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_harness import InProcess
from test_cli import checkout

# The commands that may start a ledger (``--create``), and the others that write.
MAY_CREATE = [
    ["submit", "PLAN"],
    ["execute", "PLAN"],
    ["worker", "--until-idle"],
    ["tokens", "create", "--name", "ann", "--role", "approver"],
    ["plan", "ship it", "--order", "4471", "--submit"],
    ["shadow", "run", "REQUESTS"],
    ["mcp"],
    ["serve"],
    ["dev", "--check"],
]
NEVER_CREATE = [
    ["sweep"],
    ["sagas", "resume", "s1", "--by", "ops", "--reason", "fixed"],
    ["sagas", "resolve", "s1", "--by", "ops", "--reason", "by hand"],
    ["sagas", "abort", "s1", "--by", "ops", "--reason", "wrong order"],
    ["sagas", "rerun", "s1", "--by", "ops"],
    ["approvals", "approve", "s1", "--by", "ops"],
    ["approvals", "reject", "s1", "--by", "ops"],
    ["dead-letters", "retry", "1", "--by", "ops"],
    ["dead-letters", "resolve", "1", "--by", "ops", "--reason", "by hand"],
    ["escalations", "resolve", "1", "--by", "ops"],
    ["serve", "--check"],
    ["serve", "--check", "--create"],
]


def filled(args: list[str], tmp: Path) -> list[str]:
    (tmp / "requests.jsonl").write_text('{"context": {"order_id": "4471"}}\n')
    (tmp / "plan.json").write_text(json.dumps(checkout("order-1")))
    swap = {"PLAN": str(tmp / "plan.json"), "REQUESTS": str(tmp / "requests.jsonl")}
    return [swap.get(a, a) for a in args]


@pytest.mark.parametrize(
    ("args", "says"),
    [(a, "; --create to make one") for a in MAY_CREATE]
    + [(a, ": check --db (or PIVOTAL_DATABASE_URL); this command never") for a in NEVER_CREATE],
    ids=lambda v: " ".join(v[:3]) if isinstance(v, list) else "",
)
def test_a_missing_ledger_is_refused_and_nothing_is_created(
    inproc: InProcess, args: list[str], says: str
) -> None:
    missing = inproc.tmp / "mistyped.db"
    command = filled(args, inproc.tmp)
    before = sorted(p.name for p in inproc.tmp.iterdir())
    done = inproc.raw("--db", f"sqlite:///{missing}", "--example-app", *command)
    assert done.exit_code == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error [ledger_not_found]: no ledger at {missing}{says}"), line
    assert sorted(p.name for p in inproc.tmp.iterdir()) == before


@pytest.mark.parametrize(
    "args",
    [
        ["submit", "PLAN"],
        ["execute", "PLAN"],
        ["worker", "--until-idle"],
        ["tokens", "create", "--name", "ann", "--role", "approver"],
    ],
    ids=" ".join,
)
def test_create_makes_the_ledger(inproc: InProcess, args: list[str]) -> None:
    made = inproc.tmp / "new.db"
    command = filled(args, inproc.tmp)
    done = inproc.raw("--db", f"sqlite:///{made}", "--example-app", *command, "--create")
    assert "ledger_not_found" not in done.stderr
    assert made.is_file()
    listed = inproc.raw("--db", f"sqlite:///{made}", "sagas", "list", "--json")
    assert listed.exit_code == 0, listed.stderr


def test_dev_check_with_create_checks_and_makes_nothing(inproc: InProcess) -> None:
    missing = inproc.tmp / "new.db"
    done = inproc.raw("--db", f"sqlite:///{missing}", "--example-app", "dev", "--check", "--create")
    assert done.exit_code == 0, done.stderr
    assert "pivotal dev would serve it" in done.stdout
    assert not missing.exists()


def test_migrate_makes_a_ledger_and_says_so(inproc: InProcess) -> None:
    made = inproc.tmp / "new.db"
    done = inproc.raw("--db", f"sqlite:///{made}", "migrate")
    assert done.exit_code == 0
    assert done.stdout.startswith(f"ledger sqlite:///{made}: schema migrated from version 0 to ")
    assert made.is_file()
