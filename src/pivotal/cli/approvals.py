"""``pivotal approvals``: pivots waiting for a person, and the decisions on them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer

from pivotal.cli._shared import (
    JsonFlag,
    Limit,
    Note,
    SagaId,
    Who,
    WideFlag,
    dump,
    new_group,
    note_cut,
    out,
    print_outcome,
    reading,
    run,
    settings_of,
    show,
    writing,
)
from pivotal.sagas.state import ApprovalStatus, SagaState, SagaStatus
from pivotal.views import render

approvals = new_group("Decide pivots waiting for a person.")


def register(cli: typer.Typer) -> None:
    cli.add_typer(approvals, name="approvals")


@approvals.command("list")
def approvals_list(
    ctx: typer.Context, limit: Limit = 100, as_json: JsonFlag = False, wide: WideFlag = False
) -> None:
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
                | {"amount": None if p.amount is None else str(p.amount), "currency": p.currency}
                for p in shown
            ]
        )
    else:
        show(render.approvals_table(shown), wide=wide)
    note_cut(len(shown), len(found), limit, "approvals", as_json=as_json)


RunHere = Annotated[
    bool,
    typer.Option("--run", help="Run the rest of the saga in this process now (else a worker)."),
]


@approvals.command("approve")
def approvals_approve(
    ctx: typer.Context,
    saga_id: SagaId,
    by: Who,
    note: Note = "",
    run_here: RunHere = False,
    as_json: JsonFlag = False,
) -> None:
    """Approve the pivot: the decision is recorded and a worker runs the rest of the saga,
    as the HTTP API and the page do (``--run``: this process runs it now)."""
    state = _decide(ctx, saga_id, by, note, approve=True, run_here=run_here)
    if not as_json:
        out.print(_approved(state, run_here), end="")
    print_outcome(state, as_json, ran_here=run_here)


def _approved(state: SagaState, run_here: bool) -> str:
    """What became of an approval, before the saga's outcome line."""
    approval = state.approval
    if approval is not None and approval.status is ApprovalStatus.EXPIRED:
        return "too late, the approval had expired: " + (
            "ran the undos here: " if run_here else "a worker runs the undos: "
        )
    if state.status is SagaStatus.AWAITING_APPROVAL:
        return "approved; another approver must approve too: "
    return "approved and ran here: " if run_here else "approved; a worker runs the rest: "


@approvals.command("reject")
def approvals_reject(
    ctx: typer.Context, saga_id: SagaId, by: Who, note: Note = "", as_json: JsonFlag = False
) -> None:
    """Reject the pivot; the saga compensates."""
    print_outcome(_decide(ctx, saga_id, by, note, approve=False), as_json)


def _decide(
    ctx: typer.Context,
    saga_id: str,
    by: str,
    note: str,
    *,
    approve: bool,
    run_here: bool = True,
) -> SagaState:
    command = "approvals " + ("approve" if approve else "reject")

    async def work() -> SagaState:
        async with writing(settings_of(ctx), command) as orch:
            decide = orch.approve if approve else orch.reject
            return await decide(saga_id, by, note, run=run_here)

    return run(work())
