"""``pivotal approvals``: pivots waiting for a person, and the decisions on them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import typer

from pivotal import render
from pivotal.cli._shared import (
    JsonFlag,
    Limit,
    Note,
    SagaId,
    Who,
    dump,
    new_group,
    note_cut,
    out,
    print_outcome,
    reading,
    run,
    settings_of,
    writing,
)
from pivotal.state import SagaState

approvals = new_group("Decide pivots waiting for a person.")


def register(cli: typer.Typer) -> None:
    cli.add_typer(approvals, name="approvals")


@approvals.command("list")
def approvals_list(ctx: typer.Context, limit: Limit = 100, as_json: JsonFlag = False) -> None:
    """Pivots waiting for a decision, oldest first, with the planner's rationale."""

    async def work() -> list[Any]:
        async with reading(settings_of(ctx)) as store:
            return await store.pending_approvals()

    found = run(work())
    shown = found[:limit]
    if as_json:
        dump(
            [
                asdict(p.approval)
                | {"saga_id": p.saga_id, "step": p.step_name, "step_index": p.approval.step}
                for p in shown
            ]
        )
    else:
        out.print(render.approvals_table(shown))
    note_cut(len(shown), len(found), limit, "approvals", as_json=as_json)


@approvals.command("approve")
def approvals_approve(
    ctx: typer.Context, saga_id: SagaId, by: Who, note: Note = "", as_json: JsonFlag = False
) -> None:
    """Approve the pivot; the saga goes on in this process."""
    print_outcome(_decide(ctx, saga_id, by, note, approve=True), as_json)


@approvals.command("reject")
def approvals_reject(
    ctx: typer.Context, saga_id: SagaId, by: Who, note: Note = "", as_json: JsonFlag = False
) -> None:
    """Reject the pivot; the saga compensates."""
    print_outcome(_decide(ctx, saga_id, by, note, approve=False), as_json)


def _decide(ctx: typer.Context, saga_id: str, by: str, note: str, *, approve: bool) -> SagaState:
    command = "approvals " + ("approve" if approve else "reject")

    async def work() -> SagaState:
        async with writing(settings_of(ctx), command) as orch:
            decide = orch.approve if approve else orch.reject
            return await decide(saga_id, by, note)

    return run(work())
