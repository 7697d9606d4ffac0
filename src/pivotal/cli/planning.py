"""``pivotal plan``, ``pivotal escalations ...`` and ``pivotal shadow ...``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from pivotal.cli._shared import (
    AllFlag,
    Create,
    JsonFlag,
    Limit,
    Note,
    Who,
    WideFlag,
    brief,
    dump,
    new_group,
    note_cut,
    out,
    outcome,
    read_plan,
    reading,
    run,
    settings_of,
    show,
    valid_id,
    writing,
)
from pivotal.declarations.app import trusted_facts
from pivotal.declarations.plan import parse_plan
from pivotal.planning.base import PlanRequest, Scalar
from pivotal.planning.errors import EscalationNotFound, RequestInvalid, RunNotFound
from pivotal.planning.escalations import resolve_escalation
from pivotal.planning.ledger import planning_ledger
from pivotal.planning.loop import DEFAULT_MAX_REPLANS, plan_and_submit, propose_plan
from pivotal.planning.loop import resolve_catalogue as _resolve
from pivotal.planning.records import EscalationStatus, PlanningMode, PlanningRun
from pivotal.planning.shadow import ShadowReport, read_requests, run_shadow, shadow_report
from pivotal.planning.spec import SPECS, planner_from_spec
from pivotal.sagas.state import SagaState, SagaStatus
from pivotal.store import count_rows
from pivotal.terminal import safe_text
from pivotal.views.planning_view import (
    escalation_view,
    escalations_table,
    run_view,
    shadow_report_view,
)
from pivotal.views.render import status_text

escalations = new_group("Requests no planner could turn into a valid plan, waiting for a person.")
shadow = new_group("Plan and score requests with the validator; execute nothing.")

BUNDLED_CATALOGUE = "fulfilment"  # the commerce example's default for `pivotal plan`
MAX_REQUESTS_FILE = 64 * 1024 * 1024  # bytes of a shadow requests file

PlannerSpec = Annotated[str, typer.Option("--planner", help=f"One of: {SPECS}.")]
EscalationId = Annotated[int, typer.Argument(metavar="ID", help="The escalation's id.")]
MaxReplans = Annotated[
    int, typer.Option("--max-replans", min=0, max=10, help="Re-plans before giving up.")
]


def register(cli: typer.Typer) -> None:
    cli.command("plan")(plan_command)
    cli.add_typer(escalations, name="escalations")
    cli.add_typer(shadow, name="shadow")


def build_request(
    text: str, fields: dict[str, Scalar], catalogue: str | None, source: str | None
) -> PlanRequest:
    try:
        return PlanRequest(
            text=text,
            context={k: v for k, v in fields.items() if v is not None},
            catalogue=catalogue,
            source_document_id=source,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise RequestInvalid(f"invalid request: {problems}") from None


def _fields(pairs: list[str]) -> dict[str, Scalar]:
    found: dict[str, Scalar] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise RequestInvalid(f"--field {brief(pair)!r} must look like KEY=VALUE")
        found[key.strip()] = value
    return found


def plan_command(
    ctx: typer.Context,
    text: Annotated[
        str, typer.Argument(metavar="TEXT", help="The request, in the requester's words.")
    ],
    order: Annotated[str | None, typer.Option("--order", help="Order id.")] = None,
    amount: Annotated[str | None, typer.Option(help="Order amount.")] = None,
    sku: Annotated[str | None, typer.Option(help="Product.")] = None,
    quantity: Annotated[int | None, typer.Option(help="Units.")] = None,
    warehouse: Annotated[str | None, typer.Option(help="Warehouse letter.")] = None,
    recipient: Annotated[str | None, typer.Option(help="Customer email.")] = None,
    tier: Annotated[str | None, typer.Option(help="Customer tier.")] = None,
    intent: Annotated[str | None, typer.Option(help="Plan shape, e.g. fulfil.")] = None,
    field: Annotated[
        list[str] | None, typer.Option("--field", help="Another structured field, KEY=VALUE.")
    ] = None,
    catalogue: Annotated[
        str | None,
        typer.Option(help="Catalogue to plan from (bundled example: fulfilment)."),
    ] = None,
    planner: PlannerSpec = "rules",
    max_replans: MaxReplans = DEFAULT_MAX_REPLANS,
    source: Annotated[str | None, typer.Option("--source", help="Source document id.")] = None,
    submit: Annotated[
        bool,
        typer.Option(
            "--submit",
            help="Record the accepted plan as a saga, as `pivotal submit` does: a worker "
            "runs it (or escalate).",
        ),
    ] = False,
    run_now: Annotated[
        bool,
        typer.Option("--run", help="Record the accepted plan and run it in this process now."),
    ] = False,
    create: Create = False,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Ask a planner for a plan, re-planning on validator errors; with --submit, record it
    as a saga for a worker to run; with --run, record it and run it here."""
    settings = settings_of(ctx)
    submit = submit or run_now
    fields: dict[str, Scalar] = {
        "order_id": order,
        "amount": amount,
        "sku": sku,
        "quantity": quantity,
        "warehouse": warehouse,
        "recipient": recipient,
        "customer_tier": tier,
        "intent": intent,
    }
    given: dict[str, Scalar] = {
        k: v for k, v in (fields | _fields(field or [])).items() if v is not None
    }
    chosen = catalogue or (BUNDLED_CATALOGUE if settings.app is None else None)
    proposer = planner_from_spec(planner)

    async def work() -> tuple[PlanningRun, SagaState | None]:
        if not submit:
            with settings.loaded_app() as app:
                request = build_request(text, _known(app, given) | given, chosen, source)
                cat = _resolve(app, request.catalogue)
                proposed = await propose_plan(
                    request, proposer, cat, max_replans=max_replans, facts=app.facts
                )
                return proposed, None
        command = "plan --run" if run_now else "plan --submit"
        async with writing(settings, command, create=create) as orch:
            request = build_request(text, _known(orch.app, given) | given, chosen, source)
            done = await plan_and_submit(request, proposer, orch, max_replans=max_replans)
            if not done.saga_id:
                return done, None
            if run_now:
                return done, await orch.run(done.saga_id)
            return done, (await orch.get(done.saga_id)).state

    planned, state = run(work())
    if as_json:
        status = state.status.value if state else None
        dump(planned.model_dump(mode="json") | {"saga_status": status})
    else:
        _print_run(planned, state, wide=wide)
    if not planned.accepted:
        raise typer.Exit(1)


def _known(app: Any, given: dict[str, Scalar]) -> dict[str, Scalar]:
    """Trusted facts (the order's amount and items) that fill what the request leaves out."""
    return {
        k: v
        for k, v in trusted_facts(app, given).items()
        if isinstance(v, str | int | float | bool)
    }


def _print_run(planned: PlanningRun, state: SagaState | None, *, wide: bool) -> None:
    show(run_view(planned), wide=wide)
    if state is not None:
        reason = safe_text(brief(state.reason or ""))
        out.print(f"saga {state.saga_id}:", status_text(state.status), reason)
        if state.status is SagaStatus.SUBMITTED:
            out.print("recorded: a worker runs it (pivotal worker)")
        if state.approval is not None:
            out.print(safe_text(f"waiting for approval: {brief(state.approval.reason)}"))
    elif planned.escalation_id is not None:
        eid = planned.escalation_id
        out.print(f"escalated as #{eid}: pivotal escalations show {eid}")
    elif planned.accepted:
        out.print(
            "dry run: nothing was submitted (--submit records it for a worker; --run also "
            "runs it here)"
        )


def _escalation(escalation_id: int) -> int:
    if not valid_id(escalation_id):
        raise EscalationNotFound(f"no escalation {escalation_id}")
    return escalation_id


@escalations.command("list")
def escalations_list(
    ctx: typer.Context,
    show_all: AllFlag = False,
    limit: Limit = 100,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Escalations waiting for a person, newest first."""
    status = None if show_all else EscalationStatus.OPEN

    async def work() -> tuple[list[Any], int | None]:
        async with reading(settings_of(ctx)) as store:
            found = await planning_ledger(store).escalations(status, limit)
            total = await count_rows(store, "escalations", status.value if status else None)
            return found, total

    found, total = run(work())
    if as_json:
        dump([e.model_dump(mode="json") for e in found])
    else:
        show(escalations_table(found), wide=wide)
    note_cut(len(found), total, limit, "escalations", as_json=as_json)


@escalations.command("show")
def escalations_show(
    ctx: typer.Context,
    escalation_id: EscalationId,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """The request and every attempt, with its plan and errors."""
    wanted = _escalation(escalation_id)

    async def work() -> Any:
        async with reading(settings_of(ctx)) as store:
            found = await planning_ledger(store).escalation(wanted)
            if found is None:
                raise EscalationNotFound(f"no escalation {wanted}")
            return found

    found = run(work())
    if as_json:
        dump(found.model_dump(mode="json"))
    else:
        show(escalation_view(found), wide=wide)


@escalations.command("resolve")
def escalations_resolve(
    ctx: typer.Context,
    escalation_id: EscalationId,
    by: Who,
    note: Note = "",
    plan_file: Annotated[
        Path | None, typer.Option("--plan", help="Your own plan: validated, submitted, run.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Close an escalation, optionally by running a plan you wrote."""
    wanted = _escalation(escalation_id)
    plan = parse_plan(read_plan(plan_file)) if plan_file else None

    async def work() -> Any:
        async with writing(settings_of(ctx), "escalations resolve") as orch:
            return await resolve_escalation(orch, wanted, by, note, plan=plan)

    escalation, state = run(work())
    if as_json:
        dump(
            {
                "escalation": escalation.model_dump(mode="json"),
                "saga": outcome(state) if state is not None else None,
            }
        )
        return
    out.print(safe_text(f"escalation {escalation.id} resolved by {escalation.resolved_by}"))
    if state is not None:
        reason = safe_text(brief(state.reason or ""))
        out.print(f"saga {state.saga_id}:", status_text(state.status), reason)


@shadow.command("run")
def shadow_run(
    ctx: typer.Context,
    requests_file: Annotated[
        Path, typer.Argument(metavar="REQUESTS.jsonl", help="Requests, one JSON object per line.")
    ],
    planner: PlannerSpec = "rules",
    max_replans: MaxReplans = DEFAULT_MAX_REPLANS,
    batch: Annotated[str | None, typer.Option(help="Batch id (default: a new one).")] = None,
    create: Create = False,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Plan and validate each request, recording every attempt; nothing is executed."""
    _check_text_file(requests_file)
    proposer = planner_from_spec(planner)

    async def work() -> ShadowReport:
        async with writing(settings_of(ctx), "shadow run", create=create) as orch:
            requests = read_requests(requests_file, orch.app)
            runs = await run_shadow(
                requests,
                proposer,
                orch.app,
                planning_ledger(orch.store),
                max_replans=max_replans,
                batch_id=batch,
                clock=orch.clock,
            )
            return shadow_report(runs, runs[0].batch_id if runs else batch)

    _print_report(run(work()), as_json, wide=wide)


def _check_text_file(path: Path) -> None:
    """Refuse a requests file that cannot be read, is too large, or is not UTF-8 text."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_REQUESTS_FILE + 1)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RequestInvalid(f"cannot read {brief(path)}: {reason}") from None
    if len(data) > MAX_REQUESTS_FILE:
        raise RequestInvalid(f"{brief(path)} is larger than {MAX_REQUESTS_FILE} bytes")
    try:
        data.decode()
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise RequestInvalid(f"{brief(path)}:{line}: not UTF-8 text ({exc.reason})") from None


@shadow.command("report")
def shadow_report_command(
    ctx: typer.Context,
    batch: Annotated[str | None, typer.Option(help="Batch id (default: the latest).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Every shadow batch together.")] = False,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Acceptance rate, mean attempts, and rejection reasons by error code and step."""

    async def work() -> ShadowReport:
        async with reading(settings_of(ctx)) as store:
            ledger = planning_ledger(store)
            chosen = None if every else (batch or await ledger.latest_batch())
            runs = await ledger.runs(PlanningMode.SHADOW, chosen)
            return shadow_report(runs, chosen)

    _print_report(run(work()), as_json, wide=wide)


@shadow.command("show")
def shadow_show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="A run id from shadow report.")],
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """One shadow run: the request, and every attempt with its plan and the messages."""

    async def work() -> PlanningRun:
        async with reading(settings_of(ctx)) as store:
            found = await planning_ledger(store).run(run_id)
            if found is None or found.mode is not PlanningMode.SHADOW:
                listed = "pivotal shadow report lists them"
                raise RunNotFound(f"no shadow run {brief(run_id)} ({listed})")
            return found

    found = run(work())
    if as_json:
        dump(found.model_dump(mode="json"))
    else:
        show(run_view(found), wide=wide)


def _print_report(report: ShadowReport, as_json: bool, *, wide: bool) -> None:
    if as_json:
        dump(report.to_dict())
    else:
        show(shadow_report_view(report), wide=wide)
