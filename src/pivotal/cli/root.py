"""The global options every command reads: the ledger, the app, ``--version``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import typer

from pivotal.cli._shared import JSON_ERRORS, Settings, dump, out


def pivotal_version() -> str:
    try:
        return version("pivotal")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _show_version(value: bool) -> None:
    """The version, as JSON when the command line asks for it (``--json``, anywhere)."""
    if value:
        if JSON_ERRORS.get():
            dump({"version": pivotal_version()})
        else:
            out.print(f"pivotal {pivotal_version()}")
        raise typer.Exit()


def options(
    ctx: typer.Context,
    db: Annotated[
        str,
        typer.Option(
            "--db", envvar="PIVOTAL_DATABASE_URL", help="Ledger URL, e.g. sqlite:///pivotal.db."
        ),
    ] = "sqlite:///pivotal.db",
    app: Annotated[
        str | None,
        typer.Option(
            "--app",
            envvar="PIVOTAL_APP",
            help="Your catalogues as module:attribute. Commands that only read, validate, "
            "plan (without --submit or --run) and demo default to the bundled commerce example.",
        ),
    ] = None,
    example_app: Annotated[
        bool,
        typer.Option(
            "--example-app",
            help="Use the bundled commerce example, on purpose, in a command that writes to "
            "the ledger (submit, execute, worker, sweep, the decisions, plan --submit/--run, "
            "shadow run, serve, mcp); without it they need --app or PIVOTAL_APP.",
        ),
    ] = False,
    show_version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_show_version, help="Print the version."),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print JSON, as the command's own --json does (for every command)."
        ),
    ] = False,
) -> None:
    """Durable sagas for plans proposed by AI agents."""
    if app and example_app:
        raise typer.BadParameter(
            "--example-app and --app (or PIVOTAL_APP) name two apps; give one",
            param_hint="--example-app",
        )
    ctx.obj = Settings(db=db, app=app or None, example_app=example_app)
    if as_json:
        ctx.default_map = json_defaults(ctx.command)


def json_defaults(group: Any) -> dict[str, Any]:
    """``--json`` as the default of every command under ``group`` that has it: what
    ``pivotal --json sagas list`` means is ``pivotal sagas list --json``."""
    found: dict[str, Any] = {}
    for name, command in getattr(group, "commands", {}).items():
        if hasattr(command, "commands"):
            found[name] = json_defaults(command)
        elif any(p.name == "as_json" for p in command.params):
            found[name] = {"as_json": True}
    return found
