"""Every command, found in the Typer app (a new command is covered without touching this
file), run with hostile arguments: none may end in a traceback.

Each command gets well-formed values for what it requires, then, one at a time, a hostile
value for each of its parameters (by the parameter's type), then hostile global options.
Whatever happens must be an exit status Pivotal documents and, for an error, one line
``error [code]: message`` that echoes no huge input back. Most runs are in this process
(CliRunner); a few go through the real console script.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_harness import BAD_APPS, PIVOTAL, InProcess, commands, open_order

from pivotal.examples.commerce import CommerceServices

pytestmark = pytest.mark.timeout(900)

HUGE = "x" * 1_000_000
MAX_OUTPUT = 100_000  # no command may echo a huge input back
EXIT_STATUSES = {0, 1, 2, *range(10, 16)}  # documented: see `pivotal execute --help`

TEXTS = ["", " ", HUGE, "[red]x[/]", "-5", "a\x00b", "\u202eevil", "line\nforged: yes"]
INTS = ["99999999999999999999999", "-99999999999999999999999", "-5", "0", "abc", "1.5"]
FLOATS = ["nan", "inf", "-1", "1e309", "abc"]
CHOICES = ["nope", ""]
PAIRS = ["novalue", "=x", f"k={HUGE}"]
# Commands that ignore the ledger and the app, and take seconds to run when nothing is wrong.
SLOW = {("demo",)}

PLAN = {
    "catalogue": "checkout",
    "steps": [
        {"name": "reserve_stock", "args": {"order_id": "h-1", "sku": "sku-1", "quantity": 1}},
        {"name": "charge_payment", "args": {"order_id": "h-1", "amount": "10.00"}},
    ],
    "rationale": "hostile-args test",
}
REQUEST = {"catalogue": "fulfilment", "context": {"order_id": "4471"}}


@dataclass
class Files:
    plan: Path
    requests: Path
    missing: Path
    folder: Path
    not_utf8: Path
    junk: Path
    not_a_ledger: Path
    under_a_file: Path

    def hostile_paths(self) -> list[str]:
        long_name = str(self.folder / ("n" * 5000))
        return [
            str(self.missing),
            str(self.folder),
            str(self.not_utf8),
            str(self.junk),
            long_name,
            str(self.under_a_file),
            "a\x00b.json",
            "-",
        ]


def make_files(tmp: Path) -> Files:
    (tmp / "plan.json").write_text(json.dumps(PLAN))
    (tmp / "requests.jsonl").write_text(json.dumps(REQUEST) + "\n")
    (tmp / "folder").mkdir()
    (tmp / "not-utf8.json").write_bytes(b'{"catalogue": "\xff\xfe"}\n')
    (tmp / "junk.json").write_text("[" * 1_000_000)
    (tmp / "not-a-ledger.db").write_text("this is not a database\n" * 100)
    for name, source in BAD_APPS.items():
        (tmp / name).write_text(source)
    return Files(
        plan=tmp / "plan.json",
        requests=tmp / "requests.jsonl",
        missing=tmp / "missing.json",
        folder=tmp / "folder",
        not_utf8=tmp / "not-utf8.json",
        junk=tmp / "junk.json",
        not_a_ledger=tmp / "not-a-ledger.db",
        under_a_file=tmp / "plan.json" / "inside.json",
    )


def kind(param: Any) -> str:
    return str(param.bare_type())


def benign(param: Any, files: Files) -> str:
    """A well-formed value for a required parameter."""
    by_name = {
        "saga_id": "s1",
        "text": "ship order 4471 from the closer warehouse",
        "by": "ops",
        "reason": "checked by hand",
        "plan_file": str(files.plan),
        "requests_file": str(files.requests),
    }
    if param.name in by_name:
        return by_name[param.name]
    return {"int": "1", "float": "1.0", "Path": str(files.plan)}.get(kind(param), "x")


# Options a command needs to end by itself, or to stay off the network, when nothing is wrong.
EXTRA = {
    ("worker",): ["--until-idle", "--poll", "0.01", "--sweep-every", "3600"],
    ("plan",): ["--planner", "rules"],
    ("shadow", "run"): ["--planner", "rules"],
    ("serve",): ["--check"],  # never listens in a test
    ("dev",): ["--check"],  # nor does dev
}


def hostile(param: Any, files: Files, path: tuple[str, ...]) -> list[str]:
    if path == ("demo",):  # the folder: anything that would not run the whole demo
        return [str(files.plan), str(files.folder / ("n" * 5000)), str(files.under_a_file)]
    return {
        "str": TEXTS,
        "int": INTS,
        "float": FLOATS,
        "Path": files.hostile_paths(),
        "list[str]": PAIRS,
    }.get(kind(param), CHOICES)


def global_variants(files: Files, ledger: str) -> list[list[str]]:
    dbs = [
        "sqlite:///missing_dir/x.db",
        "mysql://somewhere/db",
        "",
        "sqlite:///",
        f"sqlite:///{files.folder}",
        f"sqlite:///{files.folder / ('n' * 5000)}",
        f"sqlite:///{files.not_a_ledger}",
        "sqlite:///a\x00b.db",
    ]
    apps = [
        "no_such_module:app",
        "hostile_syntax:app",
        "hostile_raises:app",
        "hostile_step:step",
        "hostile_step:no_args",
        "hostile_step:value",
        "hostile_step:missing",
        "os:path",
        "pivotal.declarations.app:App",
        "not-a-spec",
        HUGE,
    ]
    variants = [["--db", db, "--example-app"] for db in dbs]
    variants += [["--db", ledger, "--app", app] for app in apps]
    variants += [["--db", ledger, "--app", "hostile_step:app", "--example-app"]]
    return variants


def check(done: Any, args: list[str]) -> None:
    shown = [a if len(a) < 80 else a[:40] + f"...({len(a)})" for a in args]
    output = done.stdout + done.stderr
    assert done.exception is None or isinstance(done.exception, SystemExit), (
        shown,
        done.exception,
    )
    assert "Traceback" not in output, (shown, output[-3000:])
    assert "internal_error" not in output, (shown, output[-3000:])
    assert done.exit_code in EXIT_STATUSES, (shown, done.exit_code, output[-3000:])
    if done.exit_code == 2:
        assert "error [" in done.stderr, (shown, output[-3000:])
    assert len(output) < MAX_OUTPUT, (shown, len(output), output[:500])


COMMANDS = dict(commands())


def test_every_command_group_is_swept() -> None:
    assert len(COMMANDS) >= 23  # every command group is registered


@pytest.mark.parametrize("path", list(COMMANDS), ids=" ".join)
def test_every_command_survives_hostile_arguments(inproc: InProcess, path: tuple[str, ...]) -> None:
    """Each of the command's parameters given each hostile value, and the command under
    each hostile global option: one test per command, so that they run side by side."""
    files = make_files(inproc.tmp)
    services = CommerceServices(inproc.tmp / "commerce.db")  # the order PLAN is for
    open_order(services, "h-1", amount="10.00", sku="sku-1", quantity=1)
    services.close()
    # A ledger with something in it: a saga, an escalation.
    assert inproc("submit", str(files.plan), "--saga-id", "s1").exit_code == 0
    inproc("plan", "refund me", "--order", "9999", "--submit")  # escalated as #1
    command = COMMANDS[path]
    params = [p for p in command.params if not getattr(p, "is_flag", False)]
    required = {p.name: benign(p, files) for p in params if p.required}

    def argv(**values: str) -> list[str]:
        args = [*path]
        for p in params:
            value = values.get(p.name, required.get(p.name))
            if value is None:
                continue
            args += [value] if p.param_type_name == "argument" else [p.opts[0], value]
        return args + EXTRA.get(path, [])

    runs = 0
    for param in params:
        for value in hostile(param, files, path):
            args = argv(**{param.name: value})
            done = inproc(*args, input=b"\xff\xfe{" if value == "-" else None)
            check(done, args)
            runs += 1
    if path not in SLOW:
        for options in global_variants(files, inproc.url):
            done = inproc.raw(*options, *argv())
            check(done, [*options, *argv()])
            runs += 1
    assert runs >= len(global_variants(files, inproc.url)) or path in SLOW


HOSTILE_SUBMIT = [
    "--db",
    "sqlite:///frozen/new.db",
    "--app",
    "hostile_step:app",
    "submit",
    "plan.json",
]


def with_tests_path(folder: Path) -> str:
    """``folder`` first, then the PYTHONPATH the tests run with (a source tree, say)."""
    return os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)


def real(tmp: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    env |= {"PYTHONPATH": with_tests_path(tmp), "COLUMNS": "80"}
    return subprocess.run(
        [str(PIVOTAL), *args], cwd=tmp, env=env, input=stdin, capture_output=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "stdin", "code"),
    [
        (["--db", "sqlite:///missing_dir/x.db", "validate", "plan.json"], None, "app_load_failed"),
        (
            ["--db", "sqlite:///missing_dir/x.db", "--example-app", "submit", "plan.json"],
            None,
            "ledger_not_found",
        ),
        (
            ["--db", "sqlite:///missing_dir/x.db", "--example-app", "worker", "--until-idle"],
            None,
            "ledger_not_found",
        ),
        (
            ["--db", "sqlite:///missing_dir/x.db", "--example-app", "sweep"],
            None,
            "ledger_not_found",
        ),
        (["validate", "-"], b'{"catalogue": "\xff"}', "plan_malformed"),
        (["validate", "not-utf8.json"], None, "plan_malformed"),
        (["--app", "hostile_syntax:app", "validate", "plan.json"], None, "app_load_failed"),
        (["--app", "hostile_raises:app", "validate", "plan.json"], None, "app_load_failed"),
        (["--app", "hostile_step:step", "validate", "plan.json"], None, "app_load_failed"),
        (["escalations", "show", "99999999999999999999999"], None, "escalation_not_found"),
        (["demo", "--out", "plan.json"], None, "invalid_input"),
    ],
)
def test_the_console_script_reports_instead_of_crashing(
    tmp_path: Path, args: list[str], stdin: bytes | None, code: str
) -> None:
    make_files(tmp_path)
    (tmp_path / "ledger.db").touch()
    if args[0] == "escalations":
        args = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}", *args]
    done = real(tmp_path, *args, stdin=stdin)
    err = done.stderr.decode()
    assert done.returncode in (1, 2), err
    assert "Traceback" not in err
    [line] = err.strip().splitlines()  # one line, never wrapped at the terminal's width
    assert line.startswith(f"error [{code}]: "), line


def can_mount_read_only() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount --bind / /mnt 2>/dev/null || true; true"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not can_mount_read_only(), reason="user namespaces are not available")
def test_a_ledger_on_a_read_only_filesystem_is_an_error(tmp_path: Path) -> None:
    """The folder is bind-mounted read-only in a private mount namespace: SQLite cannot
    create the ledger, nor switch an existing one to WAL."""
    make_files(tmp_path)
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    existing = real(tmp_path, "--db", f"sqlite:///{frozen / 'old.db'}", "migrate")
    assert existing.returncode == 0, existing.stderr
    commands = [
        [*HOSTILE_SUBMIT, "--create"],
        ["--db", "sqlite:///frozen/old.db", "--app", "hostile_step:app", "sweep"],
        ["--db", "sqlite:///frozen/old.db", "sagas", "list"],
        ["--db", "sqlite:///frozen/new.db", "--example-app", "submit", "plan.json", "--create"],
        ["--db", "sqlite:///frozen/new.db", "migrate"],
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    env |= {"PYTHONPATH": with_tests_path(tmp_path)}
    for args in commands:
        quoted = " ".join(f"'{a}'" for a in args)
        script = (
            f"mount --bind {frozen} {frozen} && mount -o remount,bind,ro {frozen} && "
            f"! touch {frozen}/probe 2>/dev/null && exec {PIVOTAL} {quoted}"
        )
        done = subprocess.run(
            ["unshare", "-rm", "sh", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith(("error [store_error]: ", "error [app_load_failed]: ")), line
        assert f"the folder {frozen} " in line or "the folder frozen " in line, line
        assert "is read-only" in line, line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["escalations", "show", "99999999999999999999999"], "escalation_not_found"),
        (
            ["escalations", "resolve", "99999999999999999999999", "--by", "a"],
            "escalation_not_found",
        ),
        (["dead-letters", "retry", "99999999999999999999999", "--by", "a"], "invalid_input"),
        (
            ["dead-letters", "resolve", "99999999999999999999999", "--by", "a", "--reason", "b"],
            "invalid_input",
        ),
        (["dead-letters", "retry", "0", "--by", "a"], "invalid_input"),
    ],
)
def test_ids_no_ledger_can_hold_name_nothing(
    inproc: InProcess, args: list[str], message: str
) -> None:
    inproc.ok("migrate")
    done = inproc(*args)
    assert done.exit_code == 2
    what = "escalation" if args[0] == "escalations" else "dead letter"
    assert done.stderr == f"error [{message}]: no {what} {args[2]}\n"
