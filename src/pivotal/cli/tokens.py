"""``pivotal tokens``: bearer tokens of the HTTP API (``pivotal serve``), kept hashed."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Annotated

import typer
from rich.text import Text

from pivotal.cli._shared import (
    MAX_NAME,
    Create,
    JsonFlag,
    WideFlag,
    bounded,
    brief,
    check_ledger,
    dump,
    new_group,
    out,
    reading,
    run,
    settings_of,
    show,
)
from pivotal.errors import InvalidInput, NameTaken
from pivotal.people.principals import Role, canonical_person, hash_token, names_someone, new_token
from pivotal.store import open_store
from pivotal.store.base import Token
from pivotal.terminal import safe_text
from pivotal.views.render import FittedTable

tokens = new_group("Bearer tokens of the HTTP API (pivotal serve).")
Name = Annotated[
    str,
    typer.Option(
        "--name", help="The principal's name (recorded as who acts).", callback=bounded(MAX_NAME)
    ),
]
RoleOption = Annotated[Role, typer.Option("--role", help="What the token may do.")]
SamePerson = Annotated[
    bool,
    typer.Option(
        "--same-person",
        help="Add a token for the person a live token already names (names are compared "
        "folded: case, width, invisible characters); refused without it.",
    ),
]
RequireOnBehalfOf = Annotated[
    bool,
    typer.Option(
        "--require-on-behalf-of",
        help="Every plan submitted with this (agent) token must name the person it is for "
        "(provenance.on_behalf_of); one without is refused.",
    ),
]
SUBMITTERS = (Role.AGENT, Role.ADMIN)  # the roles that submit plans
TokenId = Annotated[str, typer.Argument(metavar="ID", help="The token's id (tokens list).")]


def register(cli: typer.Typer) -> None:
    cli.add_typer(tokens, name="tokens")


@tokens.command("create")
def tokens_create(
    ctx: typer.Context,
    name: Name,
    role: RoleOption,
    same_person: SamePerson = False,
    require_on_behalf_of: RequireOnBehalfOf = False,
    create: Create = False,
    as_json: JsonFlag = False,
) -> None:
    """Create a token for NAME with ROLE; the token is printed once and only its hash kept.

    A NAME that folds to the name of a live token (canonical_person: "Alice" is "alice") is
    that person: refused unless --same-person says a token is added for them, since four-eyes
    tells people apart by that name."""
    if not names_someone(name) or not name.isprintable():
        raise InvalidInput("--name needs a printable name")
    if require_on_behalf_of and role not in SUBMITTERS:
        raise InvalidInput(
            f"--require-on-behalf-of is for tokens that submit plans (agent), not {role.value}"
        )
    secret = new_token()
    settings = settings_of(ctx)

    async def work() -> Token:
        check_ledger(settings, create=create, offers="--create")
        async with open_store(settings.db, create=create) as store:
            if not same_person:  # the names of tokens made before the ledger kept persons
                _refuse_taken(name, await store.list_tokens())
            try:
                return await store.create_token(
                    name,
                    role.value,
                    hash_token(secret),
                    time.time(),
                    require_on_behalf_of=require_on_behalf_of,
                    sole=not same_person,  # decided in the write: two at once are not both made
                )
            except NameTaken:
                _refuse_taken(name, await store.list_tokens())
                raise

    token = run(work())
    if as_json:
        dump(asdict(token) | {"token": secret})
        return
    out.print(Text(f"token {token.id} for {brief(name)} ({role.value}):"))
    out.print(Text(secret))
    out.print(Text("it is shown only now: the ledger keeps its hash"))


def _refuse_taken(name: str, known: list[Token]) -> None:
    """``NameTaken`` when a live token names the same person as ``name``."""
    wanted = canonical_person(name)
    taken = [t for t in known if t.revoked_at is None and canonical_person(t.name) == wanted]
    if taken:
        ids = ", ".join(t.id for t in taken[:5])
        raise NameTaken(
            f"{brief(name)!r} names the same person as the live token(s) {ids} "
            f"({brief(taken[0].name)!r}): pass --same-person to add a token for that person, "
            "or choose another name; nothing was created"
        )


@tokens.command("list")
def tokens_list(ctx: typer.Context, as_json: JsonFlag = False, wide: WideFlag = False) -> None:
    """Every token: id, name, role, whether it requires on_behalf_of, created, revoked
    (never the secret)."""

    async def work() -> list[Token]:
        async with reading(settings_of(ctx)) as store:
            return await store.list_tokens()

    found = run(work())
    if as_json:
        dump([asdict(t) for t in found])
        return
    show(tokens_table(found), wide=wide)


def tokens_table(found: list[Token]) -> FittedTable:
    """The tokens; an id is never cut (``tokens revoke`` needs it whole)."""
    table = FittedTable(header_style="dim", box=None, pad_edge=False)  # ids easy to select
    for col, role in (
        ("id", "id"),
        ("name", "text"),
        ("role", "fixed"),
        ("on_behalf_of", "fixed"),
        ("created", "date"),
        ("revoked", "date"),
    ):
        table.column(col, role)  # type: ignore[arg-type]
    for t in found:
        table.add_row(
            safe_text(t.id),
            safe_text(brief(t.name)),
            safe_text(t.role),
            "required" if t.require_on_behalf_of else "-",
            _when(t.created_at),
            _when(t.revoked_at) if t.revoked_at is not None else "-",
        )
    return table


@tokens.command("revoke")
def tokens_revoke(ctx: typer.Context, token_id: TokenId, as_json: JsonFlag = False) -> None:
    """Revoke a token: it is refused (401) from now on."""

    async def work() -> Token | None:
        async with reading(settings_of(ctx)) as store:
            return await store.revoke_token(token_id, time.time())

    token = run(work())
    if token is None:
        raise InvalidInput(f"no token {brief(token_id)!r}")
    if as_json:
        dump(asdict(token))
        return
    out.print(Text(f"token {token.id} ({brief(token.name)}, {token.role}): revoked"))


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))
