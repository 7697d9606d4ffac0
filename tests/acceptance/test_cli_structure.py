"""The command line's structure: one package, one module per command group, every command
registered explicitly by ``pivotal.cli`` itself, no import cycles, one console script."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import PIVOTAL, commands

ROOT = Path(__file__).resolve().parents[2]
IMPORT_CIRCLES = ROOT.parent / "shared" / "tools" / "import-circles"

EVERY_COMMAND = {
    "demo": "demo",
    "dev": "dev",
    "plan": "planning",
    "validate": "ops",
    "execute": "ops",
    "submit": "ops",
    "worker": "ops",
    "sweep": "ops",
    "migrate": "ops",
    "escalations list": "planning",
    "escalations show": "planning",
    "escalations resolve": "planning",
    "shadow run": "planning",
    "shadow report": "planning",
    "shadow show": "planning",
    "sagas list": "sagas",
    "sagas show": "sagas",
    "sagas resume": "sagas",
    "sagas resolve": "sagas",
    "sagas abort": "sagas",
    "sagas rerun": "sagas",
    "sagas fork": "sagas",
    "sagas events": "sagas",
    "sagas bulk": "bulk",
    "searches list": "searches",
    "searches save": "searches",
    "searches delete": "searches",
    "approvals list": "approvals",
    "approvals approve": "approvals",
    "approvals reject": "approvals",
    "dead-letters list": "dead_letters",
    "dead-letters retry": "dead_letters",
    "dead-letters resolve": "dead_letters",
    "tokens create": "tokens",
    "tokens list": "tokens",
    "tokens revoke": "tokens",
    "serve": "serve",
    "outbox list": "outbox",
    "outbox relay": "outbox",
    "outbox replay": "outbox",
    "outbox new-secret": "outbox",
    "report": "report",
    "mcp": "mcp",
    "workers": "workers",
    "check-provider": "check_provider",
}


def test_importing_the_cli_gives_every_command_each_from_its_group_module() -> None:
    found = {" ".join(path): command.callback.__module__ for path, command in commands()}
    assert found == {name: f"pivotal.cli.{module}" for name, module in EVERY_COMMAND.items()}


def test_a_fresh_interpreter_sees_every_command_after_one_import() -> None:
    """Nothing is registered as a side effect of running ``main``: the import is enough."""
    script = (
        "from typer.main import get_command\n"
        "from pivotal.cli import cli\n"
        "group = get_command(cli)\n"
        "print(' '.join(sorted(group.commands)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == sorted({name.split()[0] for name in EVERY_COMMAND})


def test_the_old_modules_are_gone() -> None:
    for gone in ("pivotal.cli_ops", "pivotal.cli_options", "pivotal.planning.cli"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(gone)


@pytest.mark.skipif(not IMPORT_CIRCLES.exists(), reason="no import-cycle checker is installed")
def test_no_import_cycles() -> None:
    done = subprocess.run(
        [sys.executable, str(IMPORT_CIRCLES), "src"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    assert done.stdout.strip() == "0 import circle(s)"


def test_the_console_script_and_its_version() -> None:
    [script] = importlib.metadata.entry_points(group="console_scripts", name="pivotal")
    assert script.value == "pivotal.cli:main"
    done = subprocess.run(
        [str(PIVOTAL), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"pivotal {importlib.metadata.version('pivotal')}"
