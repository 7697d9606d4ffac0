"""Commands: ``pivotal plan``, ``pivotal escalations ...`` and ``pivotal shadow ...``.

Registered by ``pivotal.cli``; its helpers are imported inside the commands to avoid a cycle.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from pivotal.app import trusted_facts
from pivotal.cli_options import AllFlag, JsonFlag
from pivotal.planning.base import PlanRequest, Scalar
from pivotal.planning.errors import EscalationNotFound, RequestInvalid
from pivotal.planning.ledger import planning_ledger
from pivotal.planning.loop import DEFAULT_MAX_REPLANS, plan_and_submit, propose_plan
from pivotal.planning.loop import resolve_catalogue as _resolve
from pivotal.planning.records import EscalationStatus, PlanningMode, PlanningRun
from pivotal.planning.shadow import read_requests, run_shadow, shadow_report
from pivotal.planning.spec import SPECS, planner_from_spec

if TYPE_CHECKING:
    from pivotal.cli import Settings
    from pivotal.state import SagaState

escalations_cli = typer.Typer(
    help="Requests no planner could turn into a valid plan, waiting for a person.",
    no_args_is_help=True,
)
shadow_cli = typer.Typer(
    help="Plan and score requests with the validator; execute nothing.", no_args_is_help=True
)

BUNDLED_CATALOGUE = "fulfilment"  # the commerce example's default for `pivotal plan`

PlannerSpec = Annotated[str, typer.Option("--planner", help=f"One of: {SPECS}")]
MaxReplans = Annotated[
    int, typer.Option("--max-replans", min=0, max=10, help="Re-plans before giving up")
]


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
    out: dict[str, Scalar] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise RequestInvalid(f"--field {pair!r} must look like KEY=VALUE")
        out[key.strip()] = value
    return out


def plan_command(
    ctx: typer.Context,
    text: Annotated[str, typer.Argument(help="The request, in the requester's words")],
    order: Annotated[str | None, typer.Option("--order", help="Order id")] = None,
    amount: Annotated[str | None, typer.Option(help="Order amount")] = None,
    sku: Annotated[str | None, typer.Option(help="Product")] = None,
    quantity: Annotated[int | None, typer.Option(help="Units")] = None,
    warehouse: Annotated[str | None, typer.Option(help="Warehouse letter")] = None,
    recipient: Annotated[str | None, typer.Option(help="Customer email")] = None,
    tier: Annotated[str | None, typer.Option(help="Customer tier")] = None,
    intent: Annotated[str | None, typer.Option(help="Plan shape, e.g. fulfil")] = None,
    field: Annotated[
        list[str] | None, typer.Option("--field", help="Another structured field, KEY=VALUE")
    ] = None,
    catalogue: Annotated[
        str | None,
        typer.Option(help="Catalogue to plan from (bundled example: fulfilment)"),
    ] = None,
    planner: PlannerSpec = "rules",
    max_replans: MaxReplans = DEFAULT_MAX_REPLANS,
    source: Annotated[str | None, typer.Option("--source", help="Source document id")] = None,
    submit: Annotated[
        bool, typer.Option("--submit", help="Submit and run the accepted plan (or escalate)")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Ask a planner for a plan, re-planning on validator errors; with --submit, run it."""
    from pivotal.cli import _dump, _run, _session, out

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

    async def work(settings: Settings) -> tuple[PlanningRun, SagaState | None]:
        chosen = catalogue or (BUNDLED_CATALOGUE if settings.app is None else None)
        given: dict[str, Scalar] = {
            k: v for k, v in (fields | _fields(field or [])).items() if v is not None
        }
        app = settings.load()
        # Trusted facts (the order's amount and items) fill what the request leaves out.
        known: dict[str, Scalar] = {
            k: v
            for k, v in trusted_facts(app, given).items()
            if isinstance(v, str | int | float | bool)
        }
        request = build_request(text, known | given, chosen, source)
        proposer = planner_from_spec(planner)
        if not submit:
            cat = _resolve(app, request.catalogue)
            run = await propose_plan(
                request, proposer, cat, max_replans=max_replans, facts=app.facts
            )
            return run, None
        async with _session(settings, app=app) as orch:
            run = await plan_and_submit(request, proposer, orch, max_replans=max_replans)
            state = await orch.run(run.saga_id) if run.saga_id else None
            return run, state

    run, state = _run(ctx, work)
    if as_json:
        _dump(run.model_dump(mode="json") | {"saga_status": state.status.value if state else None})
    else:
        _print_run(out, run, state)
    if not run.accepted:
        raise typer.Exit(1)


def _print_run(out: Any, run: PlanningRun, state: SagaState | None) -> None:
    from rich.text import Text

    from pivotal.planning.views import run_view
    from pivotal.render import status_text

    out.print(run_view(run))
    if state is not None:
        out.print(f"saga {state.saga_id}:", status_text(state.status), Text(state.reason or ""))
        if state.approval is not None:
            out.print(Text(f"waiting for approval: {state.approval.reason}"))
    elif run.escalation_id is not None:
        out.print(
            f"escalated as #{run.escalation_id}: pivotal escalations show {run.escalation_id}"
        )
    elif run.accepted:
        out.print("dry run: nothing was submitted (add --submit to run it)")


@escalations_cli.command("list")
def escalations_list(
    ctx: typer.Context,
    show_all: AllFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Escalations waiting for a person, newest first."""
    from pivotal.cli import _dump, _run, _session, out
    from pivotal.planning.views import escalations_table

    async def work(settings: Settings) -> list[Any]:
        async with _session(settings, with_app=False) as orch:
            status = None if show_all else EscalationStatus.OPEN
            return await planning_ledger(orch.store).escalations(status)

    items = _run(ctx, work)
    if as_json:
        _dump([e.model_dump(mode="json") for e in items])
    else:
        out.print(escalations_table(items))


@escalations_cli.command("show")
def escalations_show(ctx: typer.Context, escalation_id: int, as_json: JsonFlag = False) -> None:
    """The request and every attempt, with its plan and errors."""
    from pivotal.cli import _dump, _run, _session, out
    from pivotal.planning.views import escalation_view

    async def work(settings: Settings) -> Any:
        async with _session(settings, with_app=False) as orch:
            found = await planning_ledger(orch.store).escalation(escalation_id)
            if found is None:
                raise EscalationNotFound(f"no escalation {escalation_id}")
            return found

    escalation = _run(ctx, work)
    if as_json:
        _dump(escalation.model_dump(mode="json"))
    else:
        out.print(escalation_view(escalation))


@escalations_cli.command("resolve")
def escalations_resolve(
    ctx: typer.Context,
    escalation_id: int,
    by: Annotated[str, typer.Option("--by", help="Who resolves it (recorded)")],
    note: Annotated[str, typer.Option(help="What was done (recorded)")] = "",
    plan_file: Annotated[
        Path | None, typer.Option("--plan", help="Your own plan: validated, submitted, run")
    ] = None,
) -> None:
    """Close an escalation, optionally by running a plan you wrote."""
    from rich.text import Text

    from pivotal.cli import _read_plan, _run, _session, out
    from pivotal.plan import parse_plan
    from pivotal.planning.escalations import resolve_escalation
    from pivotal.render import status_text

    async def work(settings: Settings) -> Any:
        plan = parse_plan(_read_plan(plan_file)) if plan_file else None
        async with _session(settings) as orch:
            return await resolve_escalation(orch, escalation_id, by, note, plan=plan)

    escalation, state = _run(ctx, work)
    out.print(f"escalation {escalation.id} resolved by {escalation.resolved_by}")
    if state is not None:
        out.print(f"saga {state.saga_id}:", status_text(state.status), Text(state.reason or ""))


@shadow_cli.command("run")
def shadow_run(
    ctx: typer.Context,
    requests_file: Annotated[Path, typer.Argument(help="Requests, one JSON object per line")],
    planner: PlannerSpec = "rules",
    max_replans: MaxReplans = DEFAULT_MAX_REPLANS,
    batch: Annotated[str | None, typer.Option(help="Batch id (default: a new one)")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Plan and validate each request, recording every attempt; nothing is executed."""
    from pivotal.cli import _run, _session

    async def work(settings: Settings) -> Any:
        proposer = planner_from_spec(planner)
        async with _session(settings) as orch:
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

    _print_report(_run(ctx, work), as_json)


@shadow_cli.command("report")
def shadow_report_cmd(
    ctx: typer.Context,
    batch: Annotated[str | None, typer.Option(help="Batch id (default: the latest)")] = None,
    every: Annotated[bool, typer.Option("--all", help="Every shadow batch together")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Acceptance rate, mean attempts, and rejection reasons by error code and step."""
    from pivotal.cli import _run, _session

    async def work(settings: Settings) -> Any:
        async with _session(settings, with_app=False) as orch:
            ledger = planning_ledger(orch.store)
            chosen = None if every else (batch or await ledger.latest_batch())
            runs = await ledger.runs(PlanningMode.SHADOW, chosen)
            return shadow_report(runs, chosen)

    _print_report(_run(ctx, work), as_json)


def _print_report(report: Any, as_json: bool) -> None:
    from pivotal.cli import _dump, out
    from pivotal.planning.views import shadow_report_view

    if as_json:
        _dump(report.to_dict())
    else:
        out.print(shadow_report_view(report))
