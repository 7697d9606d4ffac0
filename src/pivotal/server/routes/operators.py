"""What operators do: dead letters (retry, resolve), escalations (resolve), sagas parked
``needs_human`` (resume, resolve), and any saga (abort before its pivot, run a compensated
plan again, read its event log). Everything is recorded; workers do the running."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pivotal.errors import RolloutRefused, RolloutShadowed
from pivotal.operations import bulk
from pivotal.orchestration.fork import Edit, parse_edit
from pivotal.people.principals import Role
from pivotal.sagas import saga_ids
from pivotal.server import views
from pivotal.server.auth import READERS, Principal, allow
from pivotal.server.context import Context, context
from pivotal.server.errors import AUTHED, DeadLetterNotFound, error_body, responses, status_of
from pivotal.server.limits import Page, page
from pivotal.store.planning_records import EscalationStatus
from pivotal.store.search import SagaFilter, refuse_unknown
from pivotal.views import saga_actions

router = APIRouter(prefix="/v1", tags=["operators"], responses=responses(*AUTHED))

Ctx = Annotated[Context, Depends(context)]
Reader = Annotated[Principal, Depends(allow(*READERS))]
Operator = Annotated[Principal, Depends(allow(Role.OPERATOR))]
Pages = Annotated[Page, Depends(page)]
MAX_ID = 2**63 - 1


class Why(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=4000, description="Why (recorded).")


class Resume(Why):
    # ``from`` on the wire; ``from_step``, the client's name for it, is taken too
    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True)

    from_step: int | str | None = Field(
        default=None,
        alias="from",
        description="Go on at this step (its index from 0, or its name): the steps before "
        "it that had not succeeded were settled by hand, by the caller. ``from_step`` "
        "(the typed client's name for it) is taken too; give one of the two.",
    )

    @model_validator(mode="before")
    @classmethod
    def _one_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "from" in data and "from_step" in data:
            raise ValueError("give the step to go on at as `from` or as `from_step`, not both")
        return data


class Settled(Why):
    saga_id: str | None = Field(
        default=None,
        max_length=saga_ids.MAX_LENGTH,
        description="The saga a person started to settle it.",
    )


# -- dead letters ------------------------------------------------------------------------


@router.get("/dead-letters", response_model=views.Page[views.DeadLetterRow])
async def dead_letters(
    ctx: Ctx, who: Reader, pages: Pages, status: Literal["open", "resolved", "all"] = "open"
) -> dict[str, Any]:
    """Undos that could not run, oldest first."""
    found = await ctx.store.dead_letters(None if status == "all" else status)
    return pages.of([views.dead_letter(d) for d in found[: pages.wanted]])


@router.post(
    "/dead-letters/{dead_letter_id}/retry",
    status_code=202,
    response_model=views.Retried,
    responses=responses(404, 409),
)
async def retry_dead_letter(
    ctx: Ctx, who: Operator, dead_letter_id: Annotated[int, Path(ge=1, le=MAX_ID)]
) -> dict[str, Any]:
    """Make the parked undo due now: a worker's sweep retries it with its undo key; the
    saga notes who asked (``dead_letters_due``; ``noted`` false: the saga kept changing
    and it is not noted, the letter is due all the same)."""
    done = await ctx.orchestrator.dead_letter_due(dead_letter_id, who.name)
    if not done.made:
        raise DeadLetterNotFound(f"no open dead letter {dead_letter_id}")
    return {
        "dead_letter_id": dead_letter_id,
        "status": "open",
        "next_retry_at": ctx.clock.now(),
        "noted": done.noted,
    }


@router.post(
    "/dead-letters/{dead_letter_id}/resolve",
    response_model=views.Resolved,
    responses=responses(404, 409, 413),
)
async def resolve_dead_letter(
    ctx: Ctx, who: Operator, dead_letter_id: Annotated[int, Path(ge=1, le=MAX_ID)], body: Why
) -> dict[str, Any]:
    """Record that a person settled the parked undo by hand, and why."""
    found = await ctx.store.dead_letters("open", id=dead_letter_id)
    if not found:
        raise DeadLetterNotFound(f"no open dead letter {dead_letter_id}")
    await ctx.orchestrator.resolve_dead_letter(dead_letter_id, who.name, body.reason)
    return {"dead_letter_id": dead_letter_id, "status": "resolved", "by": who.name}


# -- escalations -------------------------------------------------------------------------


@router.get("/escalations", response_model=views.Page[views.EscalationRow])
async def escalations(
    ctx: Ctx,
    who: Reader,
    pages: Pages,
    status: Literal["open", "resolved", "all"] = "open",
) -> dict[str, Any]:
    """Requests no planner could turn into a valid plan, newest first."""
    chosen = None if status == "all" else EscalationStatus(status)
    found = await ctx.store.escalations(chosen, pages.wanted)
    return pages.of([e.model_dump(mode="json") for e in found])


@router.post(
    "/escalations/{escalation_id}/resolve",
    response_model=views.EscalationRow,
    responses=responses(404, 409, 413),
)
async def resolve_escalation(
    ctx: Ctx, who: Operator, escalation_id: Annotated[int, Path(ge=1, le=MAX_ID)], body: Settled
) -> dict[str, Any]:
    """Close an open escalation, with who and why."""
    closed = await ctx.store.close_escalation(
        escalation_id, who.name, body.reason, ctx.clock.now(), body.saga_id
    )
    return closed.model_dump(mode="json")


# -- sagas parked for a person -------------------------------------------------------------


@router.post(
    "/sagas/{saga_id}/resume", response_model=views.Outcome, responses=responses(404, 409, 413)
)
async def resume(ctx: Ctx, who: Operator, saga_id: str, body: Resume) -> dict[str, Any]:
    """A needs_human saga whose cause was fixed goes on (in a worker), with the same keys.
    With ``from`` (a step's index from 0, or its name) the caller declares the steps before
    it that had not succeeded settled by hand, and the saga goes on at that step: 409
    ``resume_from_refused``, with every reason and nothing recorded, when the saga machine
    does not allow it (a step in doubt would be called again, a step that may still land
    or one before the point of no return would be settled by hand, the point of no return
    passed without running)."""
    start = None if body.from_step is None else str(body.from_step)
    state = await ctx.orchestrator.resume(
        saga_id, who.name, body.reason, run=False, from_step=start
    )
    return views.outcome(state)


@router.post(
    "/sagas/{saga_id}/resolve", response_model=views.Outcome, responses=responses(404, 409, 413)
)
async def resolve(ctx: Ctx, who: Operator, saga_id: str, body: Why) -> dict[str, Any]:
    """A person settled a needs_human saga outside Pivotal: it ends resolved."""
    state = await ctx.orchestrator.resolve(saga_id, who.name, body.reason)
    return views.outcome(state)


# -- many sagas at once, by a search ---------------------------------------------------------


class BulkAsk(BaseModel):
    """An act on every saga a search selects."""

    model_config = ConfigDict(extra="forbid")

    act: Literal["abort", "rerun", "retry-dead-letters"]
    filter: dict[str, str | list[str]] = Field(
        default_factory=dict,
        description="The filters of GET /v1/sagas, by name (a repeatable one as a list).",
    )
    reason: str = Field(default="", max_length=4000, description="Why (an abort needs one).")
    dry_run: bool = Field(default=False, description="Only say how many sagas and which.")


class BulkResult(BaseModel):
    saga_id: str
    outcome: Literal["acted", "already", "refused", "not_found"]
    code: str | None = Field(description="Why it was refused, as the single act says it.")
    message: str | None = Field(
        description="Why it was refused; of an act done, what of it was not (e.g. the note "
        "of who asked, on a saga that kept changing)."
    )
    rerun: str | None = Field(description="The saga its plan runs again as (rerun).")


class BulkDone(BaseModel):
    act: str
    dry_run: bool
    count: int = Field(description="How many sagas the search selected.")
    saga_ids: list[str] = Field(description="Which, in the search's order.")
    counts: dict[str, int] = Field(description="How many had each outcome (none on a dry run).")
    sagas: list[BulkResult]


@router.post("/sagas/bulk", response_model=BulkDone, responses=responses(413))
async def act_on_many(ctx: Ctx, who: Operator, body: BulkAsk) -> dict[str, Any]:
    """Abort, rerun or retry the dead letters of every saga the filter selects (at most
    500: more is 422 ``too_many_sagas``, with how many), each through its single act and
    its rules, in the search's order. Each saga's outcome: ``acted``, ``already`` (done
    before: never twice), ``refused`` (the single act's code) or ``not_found``. A call
    interrupted midway is finished by the same call again. ``dry_run``: the count and ids."""
    chosen = bulk.act_of(body.act)
    if not body.dry_run:
        bulk.check(chosen, who.name, body.reason)
    refuse_unknown(body.filter.keys())
    wanted = SagaFilter.parse(body.filter, ctx.clock.now())
    saga_ids = await bulk.select(ctx.store, wanted)
    done = {"act": chosen.value, "dry_run": body.dry_run, "count": len(saga_ids)}
    if body.dry_run:
        return done | {"saga_ids": saga_ids, "counts": {}, "sagas": []}
    results = await bulk.act(
        ctx.orchestrator, chosen, saga_ids, who.name, body.reason, wanted=wanted
    )
    rows = [asdict(r) for r in results]
    return done | {"saga_ids": saga_ids, "counts": bulk.counts(results), "sagas": rows}


# -- any saga: abort, run again, its events -----------------------------------------------


@router.post(
    "/sagas/{saga_id}/abort", response_model=views.Outcome, responses=responses(404, 409, 413)
)
async def abort(ctx: Ctx, who: Operator, saga_id: str, body: Why) -> dict[str, Any]:
    """A saga not yet at its point of no return starts compensating: recorded here, the undos
    run in a worker. 409 ``saga_not_abortable`` past the pivot, awaiting approval or over;
    422 for a reason that is blank or holds control characters."""
    state = await saga_actions.abort(ctx.orchestrator, saga_id, who.name, body.reason)
    return views.outcome(state)


@router.post(
    "/sagas/{saga_id}/rerun",
    status_code=201,
    response_model=views.Outcome,
    responses={
        202: {"description": "The catalogue's rollout kept the plan in shadow: no saga."},
        **responses(404, 409),
    },
)
async def rerun(ctx: Ctx, who: Operator, saga_id: str) -> dict[str, Any] | JSONResponse:
    """The plan of a compensated saga, submitted again as a new saga (``provenance.rerun_of``
    points back): validated, rolled out and approved like any submission; a worker runs it.
    One rerun per saga (asking again answers the same one). 409 ``saga_not_rerunnable`` for
    any other status."""
    try:
        state = await ctx.orchestrator.rerun(saga_id, who.name)
    except RolloutShadowed as exc:  # as POST /v1/sagas answers it, and why, for a person
        shadow = {"shadowed": True, "code": exc.code, "run_id": exc.run_id}
        told = {"message": exc.message, "detail": exc.detail}
        return JSONResponse(shadow | told, status_code=202)
    except RolloutRefused as exc:
        body = error_body(exc.code, exc.message, detail=exc.detail)
        return JSONResponse(body, status_code=status_of(exc))
    return views.outcome(state) | {"rerun_of": saga_id}


class ForkRequest(Why):
    set: dict[str, Any] = Field(
        min_length=1,
        max_length=100,
        description='The arguments to change: ``{"STEP.ARGUMENT": value}``, STEP a '
        "call's index from 0 or the name of a step the plan calls once; each value as the "
        "argument takes it (JSON).",
    )


@router.post(
    "/sagas/{saga_id}/fork",
    status_code=201,
    response_model=views.Outcome,
    responses={
        202: {"description": "The catalogue's rollout kept the plan in shadow: no saga."},
        **responses(404, 409, 413, 422),
    },
)
async def fork(
    ctx: Ctx, who: Operator, saga_id: str, body: ForkRequest
) -> dict[str, Any] | JSONResponse:
    """The plan of a finished saga with arguments changed, submitted as a new saga
    (``provenance.forked_from`` points back, with who, why and each change; the first saga
    notes ``saga_forked``): validated against today's facts, rolled out and approved anew,
    and the caller may not approve it. It makes every effect of its plan anew. The same
    request again answers the same fork. 409 ``saga_not_forkable`` for a saga not finished
    or with something still able to land; 422 ``plan_rejected`` for edits that do not
    validate, nothing recorded."""
    edits = [Edit(*_target(key), value) for key, value in body.set.items()]
    try:
        state = await saga_actions.fork(ctx.orchestrator, saga_id, edits, who.name, body.reason)
    except RolloutShadowed as exc:  # as POST /v1/sagas answers it, and why, for a person
        shadow = {"shadowed": True, "code": exc.code, "run_id": exc.run_id}
        told = {"message": exc.message, "detail": exc.detail}
        return JSONResponse(shadow | told, status_code=202)
    except RolloutRefused as exc:
        refused = error_body(exc.code, exc.message, detail=exc.detail)
        return JSONResponse(refused, status_code=status_of(exc))
    return views.outcome(state) | {"forked_from": saga_id}


def _target(key: str) -> tuple[str, str]:
    """``STEP.ARGUMENT`` as its two parts (``InvalidInput`` when it is not)."""
    edit = parse_edit(f"{key}=null")
    return edit.step, edit.argument


@router.get("/sagas/{saga_id}/events", response_model=views.EventLog, responses=responses(404))
async def events(ctx: Ctx, who: Reader, saga_id: str) -> dict[str, Any]:
    """The saga's event log, oldest first, every text redacted (``redaction.redact``)."""
    return await saga_actions.events_of(ctx.store, saga_id)
