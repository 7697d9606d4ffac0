"""An argument that is not UTF-8 (bytes the shell passed as they are: Python holds them as
lone surrogates) is refused as ``invalid_input`` by every command, before anything is read
or written; never ``internal_error``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pivotal.cli import cli

BAD = "ab\udcffcd"  # b"ab\xffcd" as Python's argv holds it

COMMANDS = [
    ["sagas", "show", BAD],
    ["sagas", "events", BAD],
    ["sagas", "abort", BAD, "--by", "ana", "--reason", "stop"],
    ["sagas", "resume", BAD, "--by", "ana", "--reason", "go"],
    ["sagas", "list", "--status", BAD],
    ["approvals", "approve", BAD, "--by", "ana"],
    ["dead-letters", "retry", BAD, "--by", "ana"],
    ["submit", "plan.json", "--saga-id", BAD],
    ["validate", BAD],
    ["--db", BAD, "sagas", "list"],
    ["sagas", "abort", "s1", "--by", BAD, "--reason", "stop"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a).replace(BAD, "BAD"))
def test_a_command_refuses_an_argument_that_is_not_utf8(args: list[str], tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, args, env={"PIVOTAL_DATABASE_URL": f"sqlite:///{tmp_path}/l.db"})
    said = done.output
    assert done.exit_code != 0
    assert said.startswith("error [invalid_input]: "), said
    assert "not UTF-8" in said
    assert "internal_error" not in said
    assert not (tmp_path / "l.db").exists()  # nothing was opened, let alone made


def test_the_console_script_says_which_argument_and_shows_its_bytes(tmp_path: Path) -> None:
    pivotal = Path(sys.executable).parent / "pivotal"
    done = subprocess.run(
        [str(pivotal).encode(), b"sagas", b"show", b"ab\xffcd"],
        capture_output=True,
        timeout=600,  # only a hang guard
        cwd=tmp_path,
    )
    said = done.stderr.decode()
    assert done.returncode != 0
    assert said.startswith("error [invalid_input]: argument 3 "), said
    assert "ab\\xffcd" in said
