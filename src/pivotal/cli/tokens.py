"""``pivotal tokens``: bearer tokens of the HTTP API (``pivotal serve``), kept hashed."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from pivotal.cli._shared import (
    MAX_NAME,
    JsonFlag,
    bounded,
    brief,
    check_ledger,
    dump,
    new_group,
    out,
    reading,
    run,
    settings_of,
)
from pivotal.errors import InvalidInput
from pivotal.principals import Role, hash_token, new_token
from pivotal.store import open_store
from pivotal.store.base import Token

tokens = new_group("Bearer tokens of the HTTP API (pivotal serve).")
Name = Annotated[
    str,
    typer.Option(
        "--name", help="The principal's name (recorded as who acts).", callback=bounded(MAX_NAME)
    ),
]
RoleOption = Annotated[Role, typer.Option("--role", help="What the token may do.")]
TokenId = Annotated[str, typer.Argument(metavar="ID", help="The token's id (tokens list).")]


def register(cli: typer.Typer) -> None:
    cli.add_typer(tokens, name="tokens")


@tokens.command("create")
def tokens_create(
    ctx: typer.Context, name: Name, role: RoleOption, as_json: JsonFlag = False
) -> None:
    """Create a token for NAME with ROLE; the token is printed once and only its hash kept."""
    if not name.strip() or not name.isprintable():
        raise InvalidInput("--name needs a printable name")
    secret = new_token()
    settings = settings_of(ctx)

    async def work() -> Token:
        check_ledger(settings, create=True)
        async with open_store(settings.db) as store:
            return await store.create_token(name, role.value, hash_token(secret), time.time())

    token = run(work())
    if as_json:
        dump(asdict(token) | {"token": secret})
        return
    out.print(Text(f"token {token.id} for {brief(name)} ({role.value}):"))
    out.print(Text(secret))
    out.print(Text("it is shown only now: the ledger keeps its hash"))


@tokens.command("list")
def tokens_list(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Every token: id, name, role, created, revoked (never the secret)."""

    async def work() -> list[Token]:
        async with reading(settings_of(ctx)) as store:
            return await store.list_tokens()

    found = run(work())
    if as_json:
        dump([asdict(t) for t in found])
        return
    table = Table("id", "name", "role", "created", "revoked")
    for t in found:
        table.add_row(
            Text(t.id),
            Text(brief(t.name)),
            Text(t.role),
            Text(_when(t.created_at)),
            Text(_when(t.revoked_at) if t.revoked_at is not None else "-"),
        )
    out.print(table)


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
