"""``pivotal check-provider``: probe a catalogue's providers in their sandboxes, and say
which promises the catalogue relies on they keep."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Group
from rich.text import Text

from pivotal.cli._shared import JsonFlag, WideFlag, dump, err, finite, run, settings_of
from pivotal.cli._shared import show as print_view
from pivotal.declarations.app import load_app
from pivotal.errors import InvalidInput
from pivotal.provider_check import CheckReport, Options, SandboxFile, Verdict, check_provider
from pivotal.terminal import safe_text
from pivotal.views.render import FittedTable

DAY = 86_400.0
STYLE = {
    Verdict.KEPT: "green",
    Verdict.BROKEN: "bold red",
    Verdict.COVERED: "yellow",
    Verdict.UNKNOWN: "dim",
}


def register(cli: typer.Typer) -> None:
    """Add this module's commands to ``cli``."""
    cli.command("check-provider")(check_provider_command)


def check_provider_command(
    ctx: typer.Context,
    catalogue: Annotated[
        str, typer.Option("--catalogue", help="The catalogue whose providers are probed.")
    ],
    app: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="Your catalogues over your providers' sandboxes, as module:attribute "
            "(an App declared with sandbox=True). Default: the global --app.",
        ),
    ] = None,
    steps: Annotated[
        list[str] | None,
        typer.Option(
            "--step", metavar="<str>", help="A step to probe (repeat it); default: every step."
        ),
    ] = None,
    sandbox: Annotated[
        Path | None,
        typer.Option(
            "--sandbox",
            help="JSON: per step, arguments the sandbox accepts and ones it refuses "
            '({"steps": {"charge": {"args": {...}, "refused": [{"args": {...}, "why": "..."}]}}}).'
            " Default: each argument model's first example.",
        ),
    ] = None,
    budget: Annotated[
        int, typer.Option("--budget", min=1, max=100_000, help="Provider calls at most.")
    ] = 200,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            min=0.01,
            max=DAY,
            callback=finite,
            help="Seconds at most to wait for a lookup to find an effect, or a cut-off "
            "call to land.",
        ),
    ] = 10.0,
    window: Annotated[
        float,
        typer.Option(
            "--window",
            min=0.0,
            max=30 * DAY,
            callback=finite,
            help="Seconds after its first use at which a key is used again (0: not probed).",
        ),
    ] = 1.0,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            help="Write what was observed to this file, for Catalogue(checked=FILE): every "
            "process that runs its sagas then warns at start where the catalogue declares "
            "less.",
        ),
    ] = None,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Probe the providers behind a catalogue's steps, in their sandboxes, through the
    steps' own actions, lookups and undos: one key one effect (in turn and at once), how
    far a lookup lags, how long a key is remembered, undos idempotent and 'not found'
    taken for done, where a call cut off by its client lands, and whether a refusal taken
    for no effect made none. Every effect made is undone (or its key is listed).

    Exit status: 0 when no promise the catalogue relies on was seen broken, 1 otherwise."""
    given = SandboxFile.read(sandbox) if sandbox is not None else None
    if record is not None and not record.resolve().parent.is_dir():
        raise InvalidInput(f"--record {record}: its folder does not exist")
    options = Options(budget=budget, wait=wait, poll=min(0.1, wait), window=window)
    settings = settings_of(ctx)
    if app is not None:
        report = run(
            check_provider(
                load_app(app), catalogue, steps=steps or (), sandbox=given, options=options
            )
        )
    else:
        with settings.loaded_app(writes="check-provider") as loaded:
            report = run(
                check_provider(loaded, catalogue, steps=steps or (), sandbox=given, options=options)
            )
    if as_json:
        dump(report.model_dump(mode="json"))
    else:
        print_view(view(report), wide=wide)
    if record is not None:  # after the report is out: a failed write loses nothing shown
        report.findings().write(record)
        if not as_json:
            err.print(Text("recorded in ") + safe_text(str(record)))
    if report.broken:
        raise typer.Exit(1)


def view(report: CheckReport) -> Group:
    table = FittedTable(box=None, pad_edge=False, show_header=True, header_style="dim")
    table.column("step", "id")
    table.column("promise", "fixed")
    table.column("verdict", "fixed")
    table.column("observed, and what it implies")
    for step in report.steps:
        if step.skipped:
            table.add_row(step.step, "", Text("unknown", style="dim"), safe_text(step.skipped))
        for n, row in enumerate(step.rows):
            said = safe_text(row.observed)
            if row.implies:
                said.append_text(Text(" → ", style="dim") + safe_text(row.implies, "bold"))
            table.add_row(
                row.step if n == 0 else "",
                row.promise.label,
                Text(row.verdict.value, style=STYLE[row.verdict]),
                said,
            )
    broken = len(report.broken)
    summary = Text(
        f"catalogue {report.catalogue} of app {report.app}: {report.spent} calls of "
        f"{report.budget}; "
        + (f"{broken} promise(s) broken" if broken else "no promise it relies on broken"),
        style="bold red" if broken else "green",
    )
    parts: list[Text | FittedTable] = [table, summary]
    for step in report.steps:
        for key in step.left:
            parts.append(Text("left in the sandbox: ", style="yellow") + safe_text(key))
    return Group(*parts)
