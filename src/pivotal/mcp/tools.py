"""The planner's tools: describe the catalogues, validate a plan, record it as a saga, read
where a saga stands. Nothing here runs a saga or decides anything a person decides: a
worker runs what is recorded, and people (through the CLI or the HTTP API) make the
decisions before the point of no return.

Every answer is a ``CallToolResult``: structured content following the tool's output
schema, or ``isError`` with a stable code and text saying what to change and which tool to
call next."""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import BeforeValidator, Field, ValidationError, WithJsonSchema

from pivotal.admission.validation import validate_bounded
from pivotal.declarations.plan import ActorType, ParallelGroup, Plan, StepCall, parse_plan
from pivotal.errors import (
    InvalidInput,
    OnBehalfOfRequired,
    PivotalError,
    PlanParseError,
    PlanRejected,
    RolloutRefused,
    RolloutShadowed,
    SagaConflict,
)
from pivotal.mcp import views
from pivotal.mcp.auth import Caller, caller
from pivotal.orchestration.four_eyes import on_behalf_of_missing, require_on_behalf_of
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.planning.render import render_catalogue
from pivotal.views import saga_scope
from pivotal.views.agent_view import agent_catalogue


def _as_text(value: object) -> object:
    """A plan given as an object (by a client in this process) as its JSON text: every plan
    is read by ``parse_plan`` from text, as the transports hand it over (``mcp.strict``)."""
    return json.dumps(value) if isinstance(value, dict) else value


# Typed as text, so that the SDK never parses it itself (a JSON parser keeps the last of two
# equal keys); offered to clients as an object or its JSON text.
PlanArg = Annotated[
    str,
    BeforeValidator(_as_text),
    WithJsonSchema({"anyOf": [{"type": "object"}, {"type": "string"}]}),
    Field(
        description='The plan as a JSON object (or JSON text): {"catalogue": ..., "steps": '
        '[{"name": ..., "args": {...}}], "rationale": ...}, following the schema '
        "describe_catalogue gives."
    ),
]
CatalogueArg = Annotated[str, Field(description="A catalogue name from list_catalogues.")]
SagaIdArg = Annotated[str, Field(description="The saga id submit_plan returned.")]
NewSagaIdArg = Annotated[
    str | None,
    Field(
        description=f"Your own id for the saga ({saga_scope.ID_RULE}): sending the same "
        "plan with the same id again returns the recorded saga instead of a second one. "
        "Ids are yours alone: another agent's same id is its own saga. Omit it to get a new "
        "id."
    ),
]


class PlannerTools:
    """The tools over one orchestrator (its ledger and its app). ``authenticated``: callers
    are named by their bearer token (HTTP), else by their MCP client name (stdio)."""

    def __init__(self, orchestrator: Orchestrator, *, authenticated: bool) -> None:
        self.orchestrator = orchestrator
        self.authenticated = authenticated

    # -- catalogues ------------------------------------------------------------------------

    async def list_catalogues(self) -> Annotated[CallToolResult, views.Catalogues]:
        """The catalogues plans may name, each with its description and step names."""
        described = [agent_catalogue(c) for c in self.orchestrator.app]
        entries = [
            views.CatalogueEntry(
                catalogue=d.name, description=d.description, steps=[s.name for s in d.steps]
            )
            for d in described
        ]
        return views.ok(
            views.Catalogues(
                catalogues=entries,
                next="Call describe_catalogue with one of these names before writing a plan.",
            )
        )

    async def describe_catalogue(
        self, catalogue: CatalogueArg
    ) -> Annotated[CallToolResult, views.CatalogueDescription]:
        """A catalogue as a planner sees it: the JSON Schema of a valid plan and the text
        describing its steps, their kinds, the ordering rule and the plan rules."""
        found = self.orchestrator.app.catalogues.get(catalogue)
        if found is None:
            return views.failed(
                "unknown_catalogue",
                f"no catalogue named {catalogue[:200]!r}; valid values: {self._known()}. "
                "Call list_catalogues to see them.",
            )
        view = render_catalogue(found)
        return views.ok(
            views.CatalogueDescription(
                catalogue=view.catalogue,
                plan_schema=view.schema,
                text=view.text,
                steps=list(view.steps),
                next="Write a plan following plan_schema, then call validate_plan.",
            )
        )

    # -- plans -----------------------------------------------------------------------------

    async def validate_plan(
        self, plan: PlanArg, ctx: Context[Any, Any]
    ) -> Annotated[CallToolResult, views.Validation]:
        """Check a plan without recording anything: every error with its code, the index
        of the call, the path in the plan JSON and a message. Fix them all and call it
        again; a valid plan goes to submit_plan."""
        parsed = self._parse(plan)
        errors = await self._errors(parsed) if isinstance(parsed, Plan) else parsed
        who = caller(ctx, authenticated=self.authenticated)
        if isinstance(parsed, Plan) and who.require_on_behalf_of:  # as submit_plan refuses it
            missing = on_behalf_of_missing(parsed, who.name)
            errors += views.error_views([missing] if missing else [])
        return views.ok(
            views.Validation(
                valid=not errors,
                errors=errors,
                next="Call submit_plan with this plan."
                if not errors
                else "Correct every error listed and call validate_plan again.",
            )
        )

    async def submit_plan(
        self, plan: PlanArg, ctx: Context[Any, Any], saga_id: NewSagaIdArg = None
    ) -> Annotated[CallToolResult, views.Submitted]:
        """Validate a plan and record it as a saga for Pivotal's workers to carry out; you
        are recorded as who proposed it. Nothing takes effect when the plan is invalid:
        the errors come back instead. A step past the point of no return may wait for a
        person's decision. Idempotent with saga_id. Follow the saga with get_saga."""
        who = caller(ctx, authenticated=self.authenticated)
        parsed = self._parse(plan)
        if not isinstance(parsed, Plan):
            return _rejected(parsed)
        stamped = _as_agent(parsed, who)
        if who.require_on_behalf_of:
            try:
                require_on_behalf_of(stamped, who.name)
            except OnBehalfOfRequired as exc:
                return views.failed(exc.code, exc.message)
        try:  # the id is the caller's own (``saga_scope``): no other's is ever in the way
            state, created = await saga_scope.submit(self.orchestrator, stamped, who.name, saga_id)
        except PlanRejected as exc:
            return _rejected(views.error_views(exc.errors))
        except SagaConflict:
            return _taken(saga_id or "")
        except RolloutShadowed as exc:
            return views.failed(
                exc.code, f"{exc.message}. No saga was created; do not submit it again"
            )
        except RolloutRefused as exc:
            return views.failed(exc.code, f"{exc.message}; a person must handle this request")
        except InvalidInput as exc:
            return views.failed(
                exc.code, f"saga_id: {exc.message}; or omit saga_id to get a new id"
            )
        except PivotalError as exc:
            return views.failed(exc.code, f"{exc.message}; nothing was recorded, try again")
        pivot = [r.name for r in state.steps if r.kind == "pivot"]
        later = (
            f" Its point of no return, {pivot[0]}, may wait for a person's decision."
            if pivot
            else ""
        )
        mine = saga_scope.shown(who.name, state.saga_id)
        return views.ok(
            views.Submitted(
                saga_id=mine,
                status=state.status,
                created=created,
                submitted_by=who.name,
                next=f"Recorded; a Pivotal worker carries it out.{later} "
                f"Call get_saga with saga_id {mine!r} to follow it.",
            )
        )

    # -- sagas -----------------------------------------------------------------------------

    async def get_saga(
        self, saga_id: SagaIdArg, ctx: Context[Any, Any]
    ) -> Annotated[CallToolResult, views.SagaView]:
        """Where a saga stands: its status and reason, each step's status, and whether it
        waits for a person's decision."""
        who = caller(ctx, authenticated=self.authenticated)
        stored = await saga_scope.find(
            self.orchestrator.store, who.name, saga_id, check_owner=who.authenticated
        )
        if stored is None:  # missing or another's: the same answer
            return views.failed(
                "saga_not_found",
                f"no saga {saga_id[:200]!r} submitted by {who.name}: use the saga_id "
                "submit_plan returned",
            )
        return views.ok(saga_scope.view(who.name, stored))

    # -- helpers ---------------------------------------------------------------------------

    def _known(self) -> str:
        return ", ".join(sorted(self.orchestrator.app.catalogues)) or "none"

    def _parse(self, plan: str) -> Plan | list[views.ErrorView]:
        try:
            return parse_plan(plan)
        except PlanParseError as exc:
            return malformed(exc)

    async def _errors(self, plan: Plan) -> list[views.ErrorView]:
        app = self.orchestrator.app
        try:
            found = await validate_bounded(plan, app.catalogue(plan.catalogue), facts=app.facts)
        except PlanRejected as exc:  # an unknown catalogue
            found = list(exc.errors)
        return views.error_views(found)


def malformed(exc: PlanParseError) -> list[views.ErrorView]:
    """A plan that is not plan-shaped JSON, as errors with paths (one per problem). A step
    is either a call or a parallel group: only the errors of the shape it was meant to have
    (a group when it has ``parallel``) are kept."""
    cause = exc.__cause__
    if not isinstance(cause, ValidationError):
        return [views.ErrorView(code=exc.code, message=exc.message)]
    problems = cause.errors(include_url=False)
    groups = {  # the steps that have a "parallel" key
        tuple(e["loc"][:2])
        for e in problems
        if e["loc"][2:3] == (_CALL,) and e["loc"][3:] == ("parallel",)
    }
    out: list[views.ErrorView] = []
    for err in problems:
        loc = list(err["loc"])
        if loc[2:3] in ([_CALL], [_GROUP]):
            if (loc[2] == _GROUP) != (tuple(loc[:2]) in groups):
                continue
            del loc[2]
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
        view = views.ErrorView(code=exc.code, message=err["msg"], path=path.lstrip(".") or None)
        if view not in out:
            out.append(view)
    return out


_CALL, _GROUP = StepCall.__name__, ParallelGroup.__name__


def _as_agent(plan: Plan, who: Caller) -> Plan:
    """The plan with its proposer set to the caller, whatever the plan said."""
    provenance = plan.provenance.model_copy(
        update={"actor_type": ActorType.AGENT, "actor_id": who.name}
    )
    return plan.model_copy(update={"provenance": provenance})


def _rejected(listed: list[views.ErrorView]) -> CallToolResult:
    return views.failed(
        "plan_rejected",
        f"the plan has {len(listed)} error(s) and nothing was recorded: correct each one "
        "(check the step names and arguments with describe_catalogue) and call "
        "validate_plan, then submit_plan again",
        errors=listed,
    )


def _taken(saga_id: str) -> CallToolResult:
    return views.failed(
        "saga_conflict",
        f"saga_id {saga_id[:200]!r} is already used by another of your plans: send exactly "
        "the same plan to get that saga back, or omit saga_id (or choose a new one) to "
        "record this plan as a new saga",
    )
