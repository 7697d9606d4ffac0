"""``pivotal searches``: a person's saved searches of the sagas (``store.saved``), the same
the Sagas page and ``/v1/searches`` keep: ``list``, ``save NAME QUERY``, ``delete NAME``;
``pivotal sagas list --saved NAME`` runs one.

Whose: ``--by NAME``, the person as their token names them (compared folded, as everywhere
people are told apart), else the user the command runs as, as ``submit`` records its
proposer (``_shared.os_user``)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from pivotal.cli._shared import (
    MAX_NAME,
    JsonFlag,
    WideFlag,
    bounded,
    brief,
    dump,
    new_group,
    os_user,
    out,
    reading,
    run,
    settings_of,
    show,
)
from pivotal.store.saved import SavedSearch, not_found
from pivotal.terminal import printable, safe_text
from pivotal.views.render import FittedTable, when

searches = new_group(
    "Your saved searches of the sagas, by name (the same the Sagas page and /v1/searches "
    "keep): list, save and delete them; sagas list --saved NAME runs one."
)
By = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Whose saved searches: the person, as their token names them (the pages and the "
        "API keep theirs under it); by default the user this command runs as.",
        callback=bounded(MAX_NAME),
    ),
]
Name = Annotated[str, typer.Argument(metavar="NAME", help="The saved search's name.")]
Query = Annotated[
    str,
    typer.Argument(
        metavar="QUERY",
        help="The search as GET /v1/sagas takes it (the query of the Sagas page's \"Link to "
        "this search\"), e.g. 'status=compensated&created_since=7d'.",
    ),
]


def register(cli: typer.Typer) -> None:
    cli.add_typer(searches, name="searches")


def person(by: str | None) -> str:
    """The person whose saved searches a command reads or writes: ``--by``, else the OS
    user."""
    return by.strip() if by is not None and by.strip() else os_user()


@searches.command("list")
def searches_list(
    ctx: typer.Context, by: By = None, as_json: JsonFlag = False, wide: WideFlag = False
) -> None:
    """The person's saved searches, by name: each with its query and when it was saved."""

    async def work() -> list[SavedSearch]:
        async with reading(settings_of(ctx)) as store:
            return await store.saved_searches(person(by))

    found = run(work())
    if as_json:
        dump([s.shown() for s in found])
        return
    show(searches_table(found), wide=wide)


def searches_table(found: list[SavedSearch]) -> FittedTable:
    """The saved searches; a name is never cut (``--saved`` takes it back)."""
    table = FittedTable(header_style="dim")
    for col, role in (("name", "id"), ("query", "text"), ("saved", "date")):
        table.column(col, role)  # type: ignore[arg-type]
    for s in found:
        table.add_row(safe_text(s.name), safe_text(s.query), when(s.updated_at))
    return table


@searches.command("save")
def searches_save(
    ctx: typer.Context, name: Name, query: Query, by: By = None, as_json: JsonFlag = False
) -> None:
    """Save QUERY as the person's search NAME, replacing theirs of that name. A query the
    search refuses (an unknown filter, paging) is refused, and nothing is saved."""

    async def work() -> SavedSearch:
        async with reading(settings_of(ctx)) as store:
            return await store.save_search(person(by), name, query)

    saved = run(work())
    if as_json:
        dump(saved.shown())
        return
    out.print(Text(printable(f"saved search {brief(saved.name)!r}: {saved.query}")))


@searches.command("delete")
def searches_delete(
    ctx: typer.Context, name: Name, by: By = None, as_json: JsonFlag = False
) -> None:
    """Delete the person's saved search NAME."""

    async def work() -> bool:
        async with reading(settings_of(ctx)) as store:
            return await store.delete_search(person(by), name)

    if not run(work()):
        raise not_found(name)
    if as_json:
        dump({"deleted": name.strip()})
        return
    out.print(Text(printable(f"saved search {brief(name.strip())!r}: deleted")))
