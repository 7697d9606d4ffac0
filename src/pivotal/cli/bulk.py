"""``pivotal sagas bulk ACT``: abort, rerun or retry the dead letters of every saga a search
selects (``pivotal.operations.bulk``), with the filters of ``sagas list``. ``--dry-run`` shows how
many and which, changing nothing; otherwise a terminal is asked to confirm and anything else
must say ``--yes``. Registered by ``pivotal.cli.sagas``."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.text import Text

from pivotal.cli._filters import Filters, searching
from pivotal.cli._shared import (
    MAX_NAME,
    MAX_TEXT,
    JsonFlag,
    bounded,
    dump,
    out,
    reading,
    run,
    settings_of,
    writing,
)
from pivotal.errors import InvalidInput
from pivotal.operations import bulk
from pivotal.store.search import SagaFilter
from pivotal.terminal import printable

ACTS = ", ".join(a.value for a in bulk.Act)
WORDS = {bulk.Act.ABORT: "Abort", bulk.Act.RERUN: "Rerun", bulk.Act.RETRY_DEAD_LETTERS: "Retry"}


class ConfirmationRequired(InvalidInput):
    """Acting on many sagas off a terminal needs --yes."""

    code = "confirmation_required"


def on_terminal() -> bool:
    """Whether a person can answer a question here (stdin and stdout are a terminal)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def question(act: bulk.Act, count: int) -> str:
    """What a person confirms: ``Abort 37 sagas?`` (the dead letters of N sagas)."""
    sagas = f"{count} saga" + ("" if count == 1 else "s")
    if act is bulk.Act.RETRY_DEAD_LETTERS:
        return f"Retry the dead letters of {sagas}?"
    return f"{WORDS[act]} {sagas}?"


@searching
def sagas_bulk(
    ctx: typer.Context,
    act: Annotated[str, typer.Argument(metavar="ACT", help=f"What to do: {ACTS}.")],
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help="Who asks (recorded; not needed with --dry-run).",
            callback=bounded(MAX_NAME),
        ),
    ] = "",
    why: Annotated[
        str,
        typer.Option(
            "--reason", help="Why (recorded; an abort needs one).", callback=bounded(MAX_TEXT)
        ),
    ] = "",
    *,
    filters: Filters,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show how many sagas and which; change nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask to confirm.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Abort, rerun or retry the dead letters of every saga the filters select (those of
    sagas list), at most 500, each as its single command would; a saga done before is
    left as it is. Exit 1 when any was refused or not found."""
    chosen = bulk.act_of(act)

    async def selected() -> tuple[SagaFilter, list[str]]:
        async with reading(settings_of(ctx)) as store:
            wanted = SagaFilter.parse(filters, await store.ledger_time())
            return wanted, await bulk.select(store, wanted)

    if not dry_run:
        bulk.check(chosen, by, why)
    wanted, saga_ids = run(selected())
    if dry_run:
        if as_json:
            dump({"act": chosen.value, "count": len(saga_ids), "saga_ids": saga_ids})
        else:
            out.print(Text(printable(f"{question(chosen, len(saga_ids))} (a dry run)")))
            for saga_id in saga_ids:
                out.print(Text(printable(saga_id)))
        return
    if not yes:
        if not on_terminal():
            raise ConfirmationRequired(
                f"{chosen.value} would act on {len(saga_ids)} sagas: give --yes "
                "(--dry-run shows which); nothing was done"
            )
        typer.confirm(question(chosen, len(saga_ids)), abort=True)

    async def acted() -> list[bulk.Result]:
        async with writing(settings_of(ctx), f"sagas bulk {chosen.value}") as orch:
            return await bulk.act(orch, chosen, saga_ids, by, why, wanted=wanted)

    results = run(acted())
    counts = bulk.counts(results)
    if as_json:
        rows: list[dict[str, Any]] = [asdict(r) for r in results]
        dump({"act": chosen.value, "count": len(results), "counts": counts, "sagas": rows})
    else:
        for r in results:
            out.print(Text(shown(r)))
        out.print(Text(", ".join(f"{n} {o.replace('_', ' ')}" for o, n in counts.items())))
    if counts["refused"] or counts["not_found"]:
        raise typer.Exit(1)


def shown(result: bulk.Result) -> str:
    """One saga's outcome as lines a terminal shows: ``ID: outcome``, where it went again
    and why it was refused; a message of several lines (a plan's validation errors) goes
    on indented lines of its own, each escaped, never as a literal ``\\n``."""
    again = f" -> {result.rerun}" if result.rerun else ""
    first, *rest = (result.message or "").split("\n")
    why_not = f" [{result.code}] {first}" if result.code else f" ({first})" if first else ""
    lines = [f"{result.saga_id}: {result.outcome.value}{again}{why_not}", *rest]
    return "\n    ".join(printable(line) for line in lines)
