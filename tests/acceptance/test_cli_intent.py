"""The command line does what a user means: reading never creates a ledger, lists say when
they are cut, every command speaks JSON, flags look like flags, errors stay one line and
echo no huge input back."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_harness import PIVOTAL, InProcess, commands
from test_cli import checkout, fulfilment, open_checkout, open_fulfilment

from pivotal.examples.commerce import CommerceServices, Fault

READ_ONLY = [
    ["sagas", "list"],
    ["sagas", "show", "s1"],
    ["approvals", "list"],
    ["dead-letters", "list"],
    ["escalations", "list"],
    ["escalations", "show", "1"],
    ["shadow", "report"],
    ["workers"],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=" ".join)
def test_a_read_only_command_never_creates_a_ledger(inproc: InProcess, args: list[str]) -> None:
    before = sorted(p.name for p in inproc.tmp.iterdir())  # the fixture's own ledger
    for where in (inproc.tmp / "missing.db", inproc.tmp / "new-folder" / "ledger.db"):
        done = inproc.raw("--db", f"sqlite:///{where}", *args)
        assert done.exit_code == 2
        assert done.stderr.startswith(f"error [ledger_not_found]: no ledger at {where}")
        assert not where.exists()
        assert not where.parent.exists() or where.parent == inproc.tmp
    assert sorted(p.name for p in inproc.tmp.iterdir()) == before


def test_limits_must_be_positive(inproc: InProcess) -> None:
    inproc.ok("migrate")
    limited = [
        path for path, command in commands() if any(p.name == "limit" for p in command.params)
    ]
    assert {" ".join(path) for path in limited} == {
        "sagas list",
        "dead-letters list",
        "escalations list",
        "approvals list",
        "outbox list",
        "report",
        "workers",
    }
    for path in limited:
        for bad in ("-5", "0", "99999999999999999999"):
            done = inproc(*path, "--limit", bad)
            assert done.exit_code == 2
            assert done.stderr.startswith("error [usage]: Invalid value for '--limit'"), path


def test_a_cut_list_says_how_much_it_left_out(inproc: InProcess) -> None:
    services = CommerceServices(inproc.tmp / "commerce.db")
    for n in range(5):
        open_checkout(services, f"o-{n}")
    services.close()
    for n in range(5):
        inproc.ok("submit", inproc.plan(f"p{n}.json", checkout(f"o-{n}")), "--saga-id", f"s{n}")

    shown = inproc("sagas", "list", "--limit", "2")
    assert "2 of 5 sagas shown; --limit 5 shows them all" in shown.stdout
    as_json = inproc("sagas", "list", "--limit", "2", "--json")
    assert len(json.loads(as_json.stdout)) == 2  # the JSON stays a plain list ...
    assert "2 of 5 sagas shown" in as_json.stderr  # ... and the note goes to stderr
    whole = inproc("sagas", "list", "--limit", "5")
    assert "shown" not in whole.stdout
    waiting = inproc("sagas", "list", "--status", "submitted", "--limit", "4", "--json")
    assert "4 of 5 sagas shown" in waiting.stderr


def test_every_command_takes_json(inproc: InProcess) -> None:
    for path, command in commands():
        assert "--json" in [o for p in command.params for o in p.opts], path


def test_decisions_and_operations_print_json(inproc: InProcess) -> None:
    services = CommerceServices(inproc.tmp / "commerce.db")
    open_fulfilment(services, "4480", "200")
    open_fulfilment(services, "r1", "120")
    open_checkout(services, "d1")
    services.faults.next("ship", Fault.PERMANENT)  # d1's shipment: it compensates...
    services.faults.always("refund", Fault.PERMANENT)  # ... and its refund cannot run

    migrated = inproc.json("migrate")  # the fixture made the ledger: already up to date
    assert migrated["from_version"] == migrated["to_version"] >= 1
    for saga, plan in [
        ("a1", fulfilment("4471", "180")),
        ("a2", fulfilment("4480", "200")),
        ("d1", checkout("d1")),
    ]:
        submitted = inproc.json("submit", inproc.plan(f"{saga}.json", plan), "--saga-id", saga)
        assert submitted == {"saga_id": saga, "status": "submitted"}
    worker = ("worker", "--until-idle", "--poll", "0.01", "--sweep-every", "3600")
    worked = inproc.json(*worker)
    assert (worked["passes"], worked["leases_lost"], worked["errors"]) == (3, 0, 0)
    assert worked["finished"] == {"awaiting_approval": 2, "compensation_failed": 1}

    approved = inproc.json("approvals", "approve", "a1", "--by", "alice", "--note", "ok", "--run")
    assert (approved["saga_id"], approved["status"]) == ("a1", "completed")
    assert approved["approval"]["approver"] == "alice"
    rejected = inproc.json("approvals", "reject", "a2", "--by", "bob", "--reason", "too much")
    assert rejected["status"] == "compensated"
    assert rejected["approval"]["note"] == "too much"  # --reason, as every other act

    services.faults.always("ship", Fault.PERMANENT)  # r1 stops after its point of no return
    inproc.ok("submit", inproc.plan("r1.json", fulfilment("r1", "120")), "--saga-id", "r1")
    assert inproc.json(*worker)["finished"] == {"needs_human": 1}
    resolved = inproc.json("sagas", "resolve", "r1", "--by", "ops", "--reason", "by hand")
    assert (resolved["status"], resolved["resolved_by"]) == ("resolved", "ops")

    [letter] = inproc.json("dead-letters", "list")
    retried = inproc("dead-letters", "retry", str(letter["id"]), "--by", "ops", "--json")
    assert retried.exit_code == 1  # still failing
    assert json.loads(retried.stdout) == {
        "dead_letter_id": letter["id"],
        "settled": False,
        "by": "ops",
    }
    settled = inproc.json(
        "dead-letters", "resolve", str(letter["id"]), "--by", "ops", "--reason", "refunded"
    )
    assert settled["status"] == "resolved"
    swept = inproc.json("sweep")
    assert swept["leases_recovered"] == []
    assert inproc.json("migrate")["from_version"] == migrated["to_version"]
    services.close()


def test_version(inproc: InProcess) -> None:
    done = inproc.raw("--version")
    assert done.exit_code == 0
    assert done.stdout == f"pivotal {importlib.metadata.version('pivotal')}\n"


def test_flags_do_not_look_like_they_take_a_value(inproc: InProcess) -> None:
    helps = [inproc.raw("--help").stdout]
    for path, command in commands():
        helps.append(inproc.raw(*path, "--help").stdout)
        for param in command.params:
            if getattr(param, "is_flag", False):
                assert not param.secondary_opts, (path, param.opts)  # no --no-FLAG twin
    for text in helps:
        assert "<bool>" not in text
        assert "BOOLEAN" not in text
        assert "--json " in text or "--version" in text


def test_an_error_stays_one_line_on_a_narrow_terminal(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    env["COLUMNS"] = "40"
    ledger = tmp_path / "a-rather-long-folder-name" / "and-a-long-ledger-name.db"
    done = subprocess.run(
        [str(PIVOTAL), "--db", f"sqlite:///{ledger}", "sagas", "list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    [line] = done.stderr.splitlines()
    assert len(line) > 120
    assert line.startswith("error [ledger_not_found]: ")


def test_long_user_strings_are_cut_when_echoed(inproc: InProcess) -> None:
    inproc.ok("migrate")
    huge = "x" * 1_000_000
    shown = inproc("sagas", "show", huge)
    assert shown.exit_code == 2
    assert shown.stderr.startswith("error [saga_not_found]: no saga 'xxx")
    assert "more characters)" in shown.stderr
    assert len(shown.stderr) < 3000
    named = inproc("approvals", "approve", "s1", "--by", huge)
    assert named.exit_code == 2
    assert "at most 200 characters (this has 1,000,000)" in named.stderr
    assert len(named.stderr) < 3000
