"""``pivotal dead-letters``: undos that could not run, retried or settled by a person."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer

from pivotal.cli._shared import (
    AllFlag,
    JsonFlag,
    Limit,
    Who,
    Why,
    WideFlag,
    dump,
    new_group,
    note_cut,
    out,
    reading,
    run,
    settings_of,
    show,
    valid_id,
    writing,
)
from pivotal.errors import InvalidInput
from pivotal.views import render

dead_letters = new_group("Undos that could not run.")
LetterId = Annotated[int, typer.Argument(metavar="ID", help="The dead letter's id.")]


def register(cli: typer.Typer) -> None:
    cli.add_typer(dead_letters, name="dead-letters")


def _existing(dead_letter_id: int) -> int:
    if not valid_id(dead_letter_id):
        raise InvalidInput(f"no dead letter {dead_letter_id}")
    return dead_letter_id


@dead_letters.command("list")
def dead_letters_list(
    ctx: typer.Context,
    show_all: AllFlag = False,
    limit: Limit = 100,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Undos parked after their retries ran out, oldest first."""

    async def work() -> list[Any]:
        async with reading(settings_of(ctx)) as store:
            return await store.dead_letters(None if show_all else "open")

    found = run(work())
    shown = found[:limit]
    if as_json:
        dump([asdict(d) for d in shown])
    else:
        show(render.dead_letters_table(shown), wide=wide)
    note_cut(len(shown), len(found), limit, "dead letters", as_json=as_json)


@dead_letters.command("retry")
def dead_letters_retry(
    ctx: typer.Context, dead_letter_id: LetterId, by: Who, as_json: JsonFlag = False
) -> None:
    """Run a parked undo again now, with its original undo key; exit 1 if it still fails.
    The saga notes who asked, as the API's and the page's retry do."""
    letter = _existing(dead_letter_id)

    async def work() -> bool:
        async with writing(settings_of(ctx), "dead-letters retry") as orch:
            # due now and noted (who asked), as on the API and the page; then run it here
            await orch.dead_letter_due(letter, by)
            return await orch.retry_dead_letter(letter)

    settled = run(work())
    if as_json:
        dump({"dead_letter_id": dead_letter_id, "settled": settled, "by": by})
    else:
        out.print(f"dead letter {dead_letter_id}: " + ("settled" if settled else "still failing"))
    if not settled:
        raise typer.Exit(1)


@dead_letters.command("resolve")
def dead_letters_resolve(
    ctx: typer.Context, dead_letter_id: LetterId, by: Who, reason: Why, as_json: JsonFlag = False
) -> None:
    """Record that a person settled a parked undo by hand, and why."""
    letter = _existing(dead_letter_id)

    async def work() -> None:
        async with writing(settings_of(ctx), "dead-letters resolve") as orch:
            await orch.resolve_dead_letter(letter, by, reason)

    run(work())
    if as_json:
        dump({"dead_letter_id": dead_letter_id, "status": "resolved", "by": by, "reason": reason})
    else:
        out.print(f"dead letter {dead_letter_id}: resolved by {by}")
