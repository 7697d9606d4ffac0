"""What agents do: validate and submit plans, read their own sagas (the catalogues: see
``routes.catalogues``).

A plan is the request body itself, parsed with ``parse_plan`` (duplicate keys and plans
over the limits are refused). The submitting principal is recorded as the plan's
provenance actor, whatever the body said: it decides ownership and four-eyes."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from pivotal.admission.validation import validate_bounded
from pivotal.declarations.plan import ActorType, Plan, parse_plan
from pivotal.errors import PlanRejected, RolloutShadowed, SagaNotFound
from pivotal.orchestration.four_eyes import on_behalf_of_missing, require_on_behalf_of
from pivotal.people.principals import Role
from pivotal.sagas import progress as live_progress
from pivotal.sagas import saga_ids
from pivotal.server import views
from pivotal.server.auth import READERS, Principal, allow
from pivotal.server.context import Context, context
from pivotal.server.errors import AUTHED, responses
from pivotal.server.limits import Page, page
from pivotal.store.saved import SAVED, filters_of
from pivotal.store.search import FIELDS, PAGING, InvalidFilter, SagaFilter, refuse_unknown
from pivotal.views import saga_actions, saga_scope, worker_wait
from pivotal.views.agent_view import SagaView as AgentSagaView
from pivotal.views.agent_view import agent_outcome
from pivotal.views.saga_scope import ID_RULE, MAX_STORED

router = APIRouter(prefix="/v1", tags=["agents"], responses=responses(*AUTHED))

Ctx = Annotated[Context, Depends(context)]
Submitter = Annotated[Principal, Depends(allow(Role.AGENT))]
Anyone = Annotated[Principal, Depends(allow(Role.AGENT, *READERS))]
Reader = Annotated[Principal, Depends(allow(*READERS))]
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["catalogue", "steps"],
    "properties": {
        "catalogue": {"type": "string"},
        "steps": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "args": {"type": "object"}},
            },
        },
        "rationale": {"type": "string"},
        "provenance": {"type": "object"},
    },
}
# The plan is the request body itself, read as bytes and parsed with ``parse_plan``; the
# catalogue's own schema (GET /v1/catalogues/{name}) says what its steps take.
PLAN_REQUEST: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "The plan: catalogue, steps, rationale, provenance (the actor is "
        "replaced by the calling principal).",
        "content": {
            "application/json": {
                "schema": PLAN_SCHEMA,
                "example": {"catalogue": "checkout", "steps": [], "rationale": "why"},
            }
        },
    }
}
SagaIdQuery = Query(
    min_length=1,
    max_length=MAX_STORED,
    description="Idempotent saga id (same id, same plan). An agent's id is its own: "
    f"{ID_RULE}, kept apart from every other principal's (``saga_scope``).",
)


async def _plan(request: Request) -> bytes:
    return await request.body()


PlanBytes = Annotated[bytes, Depends(_plan)]


def _as(plan: Plan, who: Principal) -> Plan:
    kind = ActorType.AGENT if who.role is Role.AGENT else ActorType.HUMAN
    provenance = plan.provenance.model_copy(update={"actor_type": kind, "actor_id": who.name})
    return plan.model_copy(update={"provenance": provenance})


@router.post(
    "/plans/validate",
    openapi_extra=PLAN_REQUEST,
    response_model=views.Validated,
    responses=responses(413),
)
async def validate_plan(ctx: Ctx, who: Submitter, body: PlanBytes) -> dict[str, Any]:
    """Validate a plan without recording anything: every error with its code, step index,
    JSON path and message."""
    plan = parse_plan(body)
    try:
        catalogue = ctx.orchestrator.app.catalogue(plan.catalogue)
        errors = await validate_bounded(plan, catalogue, facts=ctx.orchestrator.app.facts)
    except PlanRejected as exc:
        errors = list(exc.errors)
    if who.require_on_behalf_of and (missing := on_behalf_of_missing(plan, who.name)):
        errors.append(missing)  # as the submission will refuse it
    return {"valid": not errors, "errors": [e.to_dict() for e in errors]}


@router.post(
    "/sagas",
    status_code=201,
    openapi_extra=PLAN_REQUEST,
    response_model=views.Submitted,
    responses={
        200: {"description": "This saga id was already recorded with this plan."},
        202: {
            "description": "The catalogue's rollout kept this agent plan in shadow "
            "(`code` `rollout_shadow`, its `run_id`): validated and recorded, no saga, "
            "nothing runs."
        },
        **responses(409, 413),
    },
)
async def submit(
    ctx: Ctx,
    who: Submitter,
    body: PlanBytes,
    response: Response,
    saga_id: Annotated[str | None, SagaIdQuery] = None,
) -> dict[str, Any] | JSONResponse:
    """Validate and record a plan as a saga (a worker runs it). Idempotent on ``saga_id``:
    the same id and plan answers 200 with the saga; the same id with another plan is 409.
    An agent's ids are its own: another principal's same id is another saga, never a 409.
    A token that requires it refuses a plan that does not name the person it is for
    (``provenance.on_behalf_of``) with 422 ``on_behalf_of_required``. An agent's plan above
    its catalogue's rollout limit answers 202 ``rollout_shadow`` (kept in shadow, not run)
    or 422 ``rollout_refused``. An agent is answered as ``pivotal.views.agent_view`` tells it: a
    reason code and Pivotal's words, never the approval record, the limit or a person's
    name."""
    plan = _as(parse_plan(body), who)
    if who.require_on_behalf_of:
        require_on_behalf_of(plan, who.name)
    try:
        if who.role is Role.AGENT:  # its id is in its own namespace (``saga_scope``)
            state, created = await saga_scope.submit(ctx.orchestrator, plan, who.name, saga_id)
        else:
            created = saga_id is None or await ctx.store.load(saga_id) is None
            state = await ctx.orchestrator.submit(plan, saga_id=saga_id)
    except RolloutShadowed as exc:  # accepted for review, not for running: 202, no saga
        shadow = {"shadowed": True, "code": exc.code, "run_id": exc.run_id}
        if who.role is not Role.AGENT:  # a person reads why; an agent, only the outcome
            shadow["detail"] = exc.detail
        return JSONResponse(shadow | {"message": exc.message}, status_code=202)
    if not created:
        response.status_code = 200
    if who.role is Role.AGENT:  # the outcome, never the approval record (``agent_view``)
        mine = saga_scope.shown(who.name, state.saga_id)
        return agent_outcome(state) | {"saga_id": mine, "created": created}
    return views.outcome(state) | {"created": created}


Text = Annotated[str | None, Query()]


@router.get("/sagas", response_model=views.SagaPage, responses=responses(404))
async def list_sagas(
    request: Request,
    ctx: Ctx,
    who: Reader,
    pages: Annotated[Page, Depends(page)],
    status: Annotated[
        list[str] | None,
        Query(description="Only these statuses (repeat it, or separate by commas)."),
    ] = None,
    catalogue: Text = None,
    created_since: Annotated[
        str | None, Query(description="7d, 24h, 30m back from now, or an ISO date(-time).")
    ] = None,
    created_until: Text = None,
    updated_since: Text = None,
    updated_until: Text = None,
    actor_type: Text = None,
    actor_id: Text = None,
    model: Text = None,
    run_id: Text = None,
    prompt_version: Text = None,
    on_behalf_of: Text = None,
    source_document_id: Text = None,
    failed_step: Annotated[str | None, Query(description="A step of this name failed.")] = None,
    reason: Annotated[str | None, Query(description="Text in the reason, any case.")] = None,
    about: Annotated[
        list[str] | None, Query(description="NAME=VALUE: the plan names it (order_id=4471).")
    ] = None,
    sort: Annotated[str, Query(description="created or updated.")] = "created",
    order: Annotated[str, Query(description="desc (newest first) or asc.")] = "desc",
    cursor: Annotated[str | None, Query(description="A page's next_cursor.")] = None,
    saved: Annotated[
        str | None,
        Query(
            description="Run the caller's saved search of this name (GET /v1/searches), "
            "with no other filter; 404 saved_search_not_found when none of theirs has it."
        ),
    ] = None,
) -> dict[str, Any]:
    """Sagas, newest first, filtered (``status=needs_human``: those parked for a person;
    every filter at once, see ``store.search``), or as the caller's saved search ``saved``
    filters them, a page at a time: ``next_cursor`` starts the next. ``offset`` pages only
    the plain listing (at most one status, newest first). 422 ``invalid_filter`` or
    ``invalid_cursor`` names what is wrong."""
    refuse_unknown(request.query_params.keys(), (*PAGING, SAVED))
    if saved is None:
        # as sent: a filter given once may not come twice (the last would win, quietly)
        given = {name: request.query_params.getlist(name) for name in FIELDS}
    else:
        sent = request.query_params.keys()
        given = await filters_of(ctx.store, who.name, saved, sent)
    wanted = SagaFilter.parse(given, ctx.clock.now())
    if pages.offset:  # the listing as it always paged, by offset
        if cursor or not wanted.plain:
            raise InvalidFilter("offset pages only the plain listing: page a search by cursor")
        one = wanted.status[0] if wanted.status else None
        found = await ctx.store.list_sagas(one, pages.wanted)
        return pages.of([asdict(s) | {"status": s.status.value} for s in found]) | {
            "next_cursor": None
        }
    result = await ctx.store.search_sagas(wanted, pages.limit, cursor)
    return {
        "items": [asdict(s) | {"status": s.status.value} for s in result.items],
        "limit": pages.limit,
        "offset": 0,
        "next_offset": pages.limit if result.next_cursor else None,
        "next_cursor": result.next_cursor,
    }


@router.get(
    "/sagas/{saga_id}",
    response_model=views.SagaView | AgentSagaView,
    responses=responses(404),
)
async def show_saga(ctx: Ctx, who: Anyone, saga_id: str) -> dict[str, Any]:
    """Status, steps, the events timeline, provenance and reason of one saga. An agent sees
    only the sagas it submitted, as the MCP tools show them: where each step stands and the
    saga's reason, never results, undos or why a person must decide."""
    if who.role is Role.AGENT:
        mine = await saga_scope.find(ctx.store, who.name, saga_id)
        if mine is None:  # missing or another's: the same answer
            raise SagaNotFound(f"no saga {saga_id[:200]!r}")
        return saga_scope.view(who.name, mine).model_dump(mode="json")
    stored = await ctx.store.load(saga_id)
    if stored is None:
        raise SagaNotFound(saga_ids.missing(saga_id[:200]))
    now = ctx.clock.now()  # the ledger's time
    progress = await live_progress.live(ctx.store, stored.state, now)
    waiting = await worker_wait.waiting(ctx.store, stored.state, now)
    shown, events = saga_actions.shown(stored, await ctx.store.events(saga_id))
    return views.saga(shown, events, progress, waiting)
