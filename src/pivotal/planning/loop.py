"""Bounded re-planning: propose, validate, return the errors, try again, then escalate."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import ValidationError

from pivotal.admission.validation import FactSource, validate_bounded
from pivotal.clock import Clock, SystemClock
from pivotal.declarations.app import App
from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.plan import Plan, Provenance
from pivotal.errors import (
    InvalidInput,
    PlanRejected,
    RolloutRefused,
    RolloutShadowed,
    SubjectRequired,
)
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.planning.base import (
    Attempt,
    AttemptError,
    Planner,
    PlannerTurn,
    PlanRequest,
    Proposal,
)
from pivotal.planning.errors import PlannerError
from pivotal.planning.records import PlanningMode, PlanningOutcome, PlanningRun, new_run_id
from pivotal.planning.render import CatalogueView, render_catalogue
from pivotal.store.base import Store

DEFAULT_MAX_REPLANS = 2
MAX_PLAN_CHARS = 64_000  # a proposal larger than this is refused unread
MAX_RAW_CHARS = 16_000  # how much of a planner's verbatim reply the record keeps
REPEATED_PROPOSAL = "repeated_proposal"
PLAN_MALFORMED = "plan_malformed"
PLAN_TOO_LARGE = "plan_too_large"


def resolve_catalogue(app: App, name: str | None) -> Catalogue:
    """The catalogue a request names, or the app's only one."""
    if name is not None:
        return app.catalogue(name)
    catalogues = list(app)
    if len(catalogues) == 1:
        return catalogues[0]
    known = ", ".join(sorted(c.name for c in catalogues)) or "none"
    raise InvalidInput(f"the request must name a catalogue; known catalogues: {known}")


async def propose_plan(
    request: PlanRequest,
    planner: Planner,
    catalogue: Catalogue,
    *,
    max_replans: int = DEFAULT_MAX_REPLANS,
    run_id: str | None = None,
    clock: Clock | None = None,
    view: CatalogueView | None = None,
    facts: FactSource | None = None,
) -> PlanningRun:
    """Ask ``planner`` for a plan until one validates or ``1 + max_replans`` attempts failed.
    ``facts`` (the app's trusted facts) serves the catalogue's rules that need them.

    Nothing is submitted or recorded: the run comes back as a dry run, accepted with its
    plan (provenance filled in from the planner) or rejected with every attempt's errors.
    A proposal identical to a rejected one fails at once with the earlier errors, and a
    planner failure marked final ends the loop early.
    """
    if max_replans < 0:
        raise InvalidInput("max_replans must be 0 or more")
    clock = clock or SystemClock()
    run_id = run_id or new_run_id()
    view = view or render_catalogue(catalogue)
    max_attempts = 1 + max_replans
    attempts: list[Attempt] = []
    rejected: dict[str, Attempt] = {}  # proposal digest -> the attempt it was rejected in
    accepted: Plan | None = None
    for n in range(1, max_attempts + 1):
        turn = PlannerTurn(request, view, n, max_attempts, tuple(attempts))
        try:
            proposal = await planner.propose(turn)
        except PlannerError as exc:
            error = AttemptError(code=exc.code, message=str(exc))
            by = exc.by or planner.info
            attempts.append(
                Attempt(n=n, by=by, errors=(error,), raw_reply=_clip(exc.raw), at=clock.now())
            )
            if exc.final:
                break
            continue
        attempt, plan = await _judge(
            proposal, n, catalogue, request, run_id, rejected, clock, facts
        )
        attempts.append(attempt)
        if plan is not None:
            accepted = plan
            break
    return PlanningRun(
        run_id=run_id,
        mode=PlanningMode.DRY_RUN,
        request=request,
        catalogue=catalogue.name,
        planner=planner.info,
        attempts=tuple(attempts),
        outcome=PlanningOutcome.ACCEPTED if accepted is not None else PlanningOutcome.REJECTED,
        plan=accepted,
        created_at=clock.now(),
    )


async def _judge(
    proposal: Proposal,
    n: int,
    catalogue: Catalogue,
    request: PlanRequest,
    run_id: str,
    rejected: dict[str, Attempt],
    clock: Clock,
    facts: FactSource | None = None,
) -> tuple[Attempt, Plan | None]:
    """Check one proposal; return its attempt record and, when it is valid, the plan."""
    data = dict(proposal.plan)
    data.pop("provenance", None)  # provenance is the loop's to write, never the planner's
    data.setdefault("catalogue", catalogue.name)
    rationale = proposal.rationale or _text(data.get("rationale"))
    data["rationale"] = rationale
    base = Attempt(
        n=n,
        by=proposal.by,
        plan=proposal.plan,
        rationale=rationale,
        raw_reply=_clip(proposal.raw),
        at=clock.now(),
    )
    if len(_canonical(proposal.plan)) > MAX_PLAN_CHARS:
        error = AttemptError(
            code=PLAN_TOO_LARGE,
            message=f"the proposal is larger than {MAX_PLAN_CHARS} characters; nothing in it "
            "was read",
        )
        return base.model_copy(update={"plan": None, "errors": (error,)}), None
    digest = _digest(data)
    earlier = rejected.get(digest)
    if earlier is not None:
        repeat = AttemptError(
            code=REPEATED_PROPOSAL,
            message=f"this plan is identical to attempt {earlier.n}, which was rejected; "
            "change it to fix the errors below",
        )
        errors = (repeat, *(e for e in earlier.errors if e.code != REPEATED_PROPOSAL))
        return base.model_copy(update={"errors": errors, "repeat_of": earlier.n}), None
    data["provenance"] = _provenance(proposal, request, run_id, catalogue).model_dump(mode="json")
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        errors = tuple(_shape_errors(exc))
    else:
        found = await validate_bounded(plan, catalogue, facts=facts)
        errors = tuple(AttemptError.from_plan_error(e) for e in found)
        if not errors:
            return base.model_copy(update={"accepted": True}), plan
    attempt = base.model_copy(update={"errors": errors})
    rejected[digest] = attempt
    return attempt, None


def _provenance(
    proposal: Proposal, request: PlanRequest, run_id: str, catalogue: Catalogue
) -> Provenance:
    by = proposal.by
    return Provenance(
        actor_type=by.actor_type,
        actor_id=by.actor_id,
        run_id=run_id,
        model=by.model,
        prompt_version=by.prompt_version,
        source_document_id=request.source_document_id or request.request_id,
        about=subject_of(request, catalogue),
    )


def subject_of(
    request: PlanRequest, catalogue: Catalogue
) -> dict[str, str | int | float | bool] | None:
    """What the request is about, from its trusted context: the fields the catalogue says
    name a plan's subject (an order, the customer who asked). The plan carries them, and
    the validator refuses a plan whose calls or facts name anything else."""
    about = {
        key: value
        for key in catalogue.subject_keys()
        if (value := request.context.get(key)) is not None and value != ""
    }
    return about or None


def _clip(raw: str | None) -> str | None:
    if raw is None or len(raw) <= MAX_RAW_CHARS:
        return raw
    return raw[:MAX_RAW_CHARS] + f"… [{len(raw) - MAX_RAW_CHARS} more characters not kept]"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _digest(data: dict[str, Any]) -> str:
    """What makes two proposals the same: everything judged, so not rationale or provenance."""
    shape = {k: v for k, v in data.items() if k not in ("rationale", "provenance")}
    return hashlib.sha256(_canonical(shape).encode()).hexdigest()


def _shape_errors(exc: ValidationError) -> list[AttemptError]:
    out = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        path = "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in loc).lstrip(".")
        out.append(
            AttemptError(
                code=PLAN_MALFORMED,
                message=f"{path or 'plan'}: {err['msg']}",
                path=path or None,
            )
        )
    return out


async def plan_and_submit(
    request: PlanRequest,
    planner: Planner,
    orchestrator: Orchestrator,
    *,
    max_replans: int = DEFAULT_MAX_REPLANS,
    run_id: str | None = None,
    saga_id: str | None = None,
    ledger: Store | None = None,
) -> PlanningRun:
    """Plan ``request`` with bounded re-planning; submit the accepted plan as a saga.

    When no proposal validates within ``1 + max_replans`` attempts, nothing is submitted:
    an escalation holding the request and every attempt is recorded for a person. Either
    way the run and all its attempts are kept in the ledger (``ledger``, by default the
    orchestrator's store). The saga is submitted, not run: call
    ``orchestrator.run(run.saga_id)`` or let a worker pick it up.

    A request that names none of its catalogue's subject keys in its (trusted) context is
    refused with ``SubjectRequired`` before the planner is asked: a plan that runs must be
    bound to the order or customer the caller is entitled to.
    """
    catalogue = resolve_catalogue(orchestrator.app, request.catalogue)
    keys = catalogue.subject_keys()
    if keys and subject_of(request, catalogue) is None:
        raise SubjectRequired(
            f"the request names none of {', '.join(keys)} in its context: a plan of "
            f"catalogue {catalogue.name!r} runs only for the subject the caller is entitled "
            "to, given by a trusted system, never read from the request's text; nothing was "
            "planned or recorded"
        )
    ledger = ledger or orchestrator.store
    run = await propose_plan(
        request,
        planner,
        catalogue,
        max_replans=max_replans,
        run_id=run_id,
        clock=orchestrator.clock,
        facts=orchestrator.app.facts,
    )
    run = run.model_copy(update={"mode": PlanningMode.LIVE})
    if run.plan is not None:
        try:
            state = await orchestrator.submit(run.plan, saga_id=saga_id)
        except PlanRejected as exc:  # the world changed between validation and submission
            run = _rejected_at_submit(run, exc)
        except (RolloutRefused, RolloutShadowed) as exc:  # held back: a person decides
            run = _refused_at_submit(run, (AttemptError(code=exc.code, message=str(exc)),))
        else:
            run = run.model_copy(update={"saga_id": state.saga_id})
            await ledger.record_run(run)
            return run
    run = run.model_copy(update={"outcome": PlanningOutcome.ESCALATED})
    escalation = await ledger.escalate(run, run.summary(), orchestrator.clock.now())
    return escalation.run


def _rejected_at_submit(run: PlanningRun, exc: PlanRejected) -> PlanningRun:
    return _refused_at_submit(run, tuple(AttemptError.from_plan_error(e) for e in exc.errors))


def _refused_at_submit(run: PlanningRun, errors: tuple[AttemptError, ...]) -> PlanningRun:
    """``run`` with its accepted attempt refused at submission, for ``errors``."""
    last = run.attempts[-1]
    attempts = (*run.attempts[:-1], last.model_copy(update={"accepted": False, "errors": errors}))
    return run.model_copy(
        update={"attempts": attempts, "plan": None, "outcome": PlanningOutcome.REJECTED}
    )
