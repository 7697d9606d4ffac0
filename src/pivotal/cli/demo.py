"""``pivotal demo``: the documented scenarios on a fresh ledger of their own."""

from __future__ import annotations

import io
import sqlite3
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pivotal.cli._shared import JsonFlag, brief, dump, out, run
from pivotal.errors import InvalidInput


def register(cli: typer.Typer) -> None:
    cli.command("demo")(demo)


def demo(
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for the demo's ledger and services.")
    ] = Path("pivotal-demo"),
    as_json: JsonFlag = False,
) -> None:
    """Run the documented scenarios on a fresh SQLite ledger and print their timelines.

    The folder's pivotal.db and commerce.db are replaced; exit 1 if a scenario ends other
    than documented."""
    from pivotal.examples.commerce.demo import run_demo

    try:
        if out_dir.exists() and not out_dir.is_dir():
            raise InvalidInput(f"--out {brief(out_dir)} is a file; name a folder for the demo")
        results = run(run_demo(out_dir, _console(out_dir, quiet=as_json)))
    except (OSError, ValueError, sqlite3.Error) as exc:  # ValueError: a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInput(f"the demo cannot use the folder {brief(out_dir)}: {reason}") from None
    if as_json:
        dump(
            [
                {
                    "scenario": scenario.title,
                    "saga_id": state.saga_id,
                    "status": state.status.value,
                    "expected": scenario.expect.value,
                }
                for scenario, state in results
            ]
        )
    if any(state.status is not scenario.expect for scenario, state in results):
        raise typer.Exit(1)


def _console(out_dir: Path, *, quiet: bool) -> Console:
    """The demo's own console. Its fixed texts are styled with console markup, which the
    only user-given text it prints (the folder, and how this program was called) could
    disturb only with a '['; then, and with --json, no markup is read."""
    if quiet:
        return Console(file=io.StringIO(), markup=False)
    if "[" in str(out_dir) or "[" in sys.argv[0]:
        return out
    return Console(highlight=False)
