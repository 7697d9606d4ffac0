"""What approvers do: list pivots waiting for a person, approve or reject them.

A decision names the saga version the approver was shown; if the saga changed since, it is
refused (409) and nothing is recorded. Four-eyes is the orchestrator's
(``pivotal.orchestration.four_eyes``, the same for every surface): the principal that submitted a
saga, the person an agent submitted it on behalf of, and an approver who already approved it cannot
approve it, names compared canonically; its ``FourEyesError`` is 403 ``four_eyes``. The decision is
only recorded: a worker runs the saga on."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from pivotal.people.principals import Role
from pivotal.server import views
from pivotal.server.auth import READERS, Principal, allow
from pivotal.server.context import Context, context
from pivotal.server.errors import AUTHED, responses
from pivotal.server.limits import Page, page
from pivotal.store.base import StoredSaga
from pivotal.views import approval_view

router = APIRouter(prefix="/v1/approvals", tags=["approvals"], responses=responses(*AUTHED))

Ctx = Annotated[Context, Depends(context)]
Reader = Annotated[Principal, Depends(allow(*READERS))]
Approver = Annotated[Principal, Depends(allow(Role.APPROVER))]
MAX_TEXT = 4000


class Decision(BaseModel):
    """An approval decision on the saga version the approver was shown."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=MAX_TEXT, description="Why (recorded).")
    version: int = Field(ge=0, description="The saga version the decision was made on.")


@router.get("", response_model=views.Page[views.PendingRow])
async def pending(ctx: Ctx, who: Reader, pages: Annotated[Page, Depends(page)]) -> dict[str, Any]:
    """Pivots waiting for a decision, oldest first, each with the saga version to decide on
    and what the approval page shows: the request the plan was made from (``request_text``,
    when a planning run recorded it), the ``amount`` and ``currency`` the gated step moves
    (``headline``: "EUR 180.00") and the ``checks`` made (at submission, each rule, the
    rules binding each amount and id, the plan against the facts now)."""
    found = await ctx.store.pending_approvals()
    chosen = pages.of(list(found[: pages.wanted]))
    loaded = {p.saga_id: await ctx.store.load(p.saga_id) for p in chosen["items"]}
    asked = await approval_view.requests_of(ctx.store, [s for s in loaded.values() if s])
    items = []
    for p in chosen["items"]:
        stored = loaded[p.saga_id]
        items.append(
            asdict(p.approval)
            | {
                "saga_id": p.saga_id,
                "catalogue": p.catalogue,
                "step": p.step_name,
                "step_index": p.approval.step,
                "version": stored.state.version if stored else None,
                "provenance": stored.plan.provenance.model_dump(mode="json") if stored else None,
            }
            | await _facts(ctx, stored, asked)
        )
    return chosen | {"items": items}


async def _facts(ctx: Context, stored: StoredSaga | None, asked: dict[str, str]) -> dict[str, Any]:
    """What the approval page shows too (``approval_view``): request_text, amount,
    currency, headline and checks."""
    catalogue = ctx.orchestrator.app.catalogues.get(stored.state.catalogue) if stored else None
    if stored is None or catalogue is None:
        return approval_view.ApprovalFacts(None, None, None, None).fields()
    app = ctx.orchestrator.app
    shown = await approval_view.approval_facts(
        stored, catalogue, app.facts, asked.get(stored.state.saga_id)
    )
    return shown.fields()


async def _decide(
    ctx: Context, who: Principal, saga_id: str, decision: Decision, *, approve: bool
) -> dict[str, Any]:
    orch = ctx.orchestrator  # four-eyes is the orchestrator's: FourEyesError is 403
    decide = orch.approve if approve else orch.reject
    state = await decide(saga_id, who.name, decision.reason, run=False, version=decision.version)
    return views.outcome(state)


@router.post("/{saga_id}/approve", response_model=views.Outcome, responses=responses(404, 409, 413))
async def approve(ctx: Ctx, who: Approver, saga_id: str, decision: Decision) -> dict[str, Any]:
    """Approve the pivot (a worker runs the saga on). 409 if the saga is no longer at
    ``version`` or no longer waits; 403 ``four_eyes`` for the saga's own submitter, the person
    it was asked for on behalf of, or an approver who already approved it."""
    return await _decide(ctx, who, saga_id, decision, approve=True)


@router.post("/{saga_id}/reject", response_model=views.Outcome, responses=responses(404, 409, 413))
async def reject(ctx: Ctx, who: Approver, saga_id: str, decision: Decision) -> dict[str, Any]:
    """Reject the pivot: the saga compensates (in a worker). 409 as for approve."""
    return await _decide(ctx, who, saga_id, decision, approve=False)
