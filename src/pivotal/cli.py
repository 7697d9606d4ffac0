"""The command line: parses arguments, calls the library, prints the result."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from pivotal import render
from pivotal.app import App, load_app
from pivotal.cli_options import AllFlag, JsonFlag
from pivotal.errors import PivotalError, PlanParseError, PlanRejected
from pivotal.orchestrator import Orchestrator
from pivotal.plan import parse_plan
from pivotal.state import SagaStatus
from pivotal.store import Store, open_store
from pivotal.validation import PlanError, validate

T = TypeVar("T")

cli = typer.Typer(
    name="pivotal",
    help="Durable sagas for plans proposed by AI agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
sagas_cli = typer.Typer(help="Inspect sagas.", no_args_is_help=True)
approvals_cli = typer.Typer(help="Decide pivots waiting for a person.", no_args_is_help=True)
dead_letters_cli = typer.Typer(help="Undos that could not run.", no_args_is_help=True)
cli.add_typer(sagas_cli, name="sagas")
cli.add_typer(approvals_cli, name="approvals")
cli.add_typer(dead_letters_cli, name="dead-letters")

# Nothing printed is read as console markup: ids, names and reasons come from users.
out = Console(markup=False, highlight=False)
err = Console(stderr=True, markup=False, highlight=False)


@dataclass(frozen=True)
class Settings:
    db: str
    app: str | None

    def example_state(self) -> Path:
        """Where the bundled example keeps its services: beside a SQLite ledger file, else
        in the working folder."""
        path = self.db.removeprefix("sqlite:///")
        beside = "://" not in path and path != ":memory:"
        return (Path(path).parent if beside else Path(".")) / "commerce.db"

    def load(self) -> App:
        if self.app:
            return load_app(self.app)
        from pivotal.examples.commerce import create_app

        return create_app(self.example_state())


@cli.callback()
def options(
    ctx: typer.Context,
    db: Annotated[
        str,
        typer.Option(envvar="PIVOTAL_DATABASE_URL", help="Ledger URL, e.g. sqlite:///pivotal.db"),
    ] = "sqlite:///pivotal.db",
    app: Annotated[
        str | None,
        typer.Option(
            envvar="PIVOTAL_APP",
            help="Your catalogues as module:attribute (default: the bundled commerce example)",
        ),
    ] = None,
) -> None:
    ctx.obj = Settings(db=db, app=app)


def _run(ctx: typer.Context, work: Callable[[Settings], Coroutine[Any, Any, T]]) -> T:
    """Run async ``work``; turn Pivotal errors into a message and an exit code."""
    try:
        return asyncio.run(work(ctx.obj))
    except PlanRejected as exc:
        _print_errors(exc.errors)
        raise typer.Exit(1) from None
    except PlanParseError as exc:
        _print_error(exc)
        raise typer.Exit(1) from None
    except PivotalError as exc:
        _print_error(exc)
        raise typer.Exit(2) from None


def _print_error(exc: PivotalError) -> None:
    err.print(Text.assemble(("error", "red"), f" [{exc.code}] {exc}"), highlight=False)


def _print_errors(errors: tuple[PlanError, ...] | list[PlanError]) -> None:
    err.print(Text.assemble(("plan rejected", "red"), f" with {len(errors)} error(s):"))
    for e in errors:
        line = Text.assemble("  ", (e.code.value, "bold"), f" at {e.where()}: {e.message}")
        err.print(line, highlight=False)


@asynccontextmanager
async def _session(
    settings: Settings,
    with_app: bool = True,
    migrate: bool = False,
    app: App | None = None,
    **orchestrator: Any,
) -> AsyncIterator[Orchestrator]:
    """An open ledger and an orchestrator over it (``orchestrator`` options pass through)."""
    app = app or (settings.load() if with_app else App([]))
    store: Store = open_store(settings.db, migrate=migrate)
    await store.open()
    try:
        yield Orchestrator(store, app, **orchestrator)
    finally:
        await store.close()


def _dump(value: Any) -> None:
    out.print_json(json.dumps(value, default=str))


def _read_plan(path: Path) -> str:
    try:
        return sys.stdin.read() if str(path) == "-" else path.read_text()
    except OSError as exc:
        raise PlanParseError(f"cannot read plan {path}: {exc.strerror}") from None


# -- commands --------------------------------------------------------------------------------


@cli.command()
def demo(
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for the demo's ledger and services")
    ] = Path("pivotal-demo"),
) -> None:
    """Run the documented scenarios on a fresh SQLite ledger and print their timelines."""
    from pivotal.examples.commerce.demo import run_demo

    results = asyncio.run(run_demo(out_dir, out))
    if any(state.status is not scenario.expect for scenario, state in results):
        raise typer.Exit(1)


@cli.command("validate")
def validate_cmd(
    ctx: typer.Context,
    plan_file: Annotated[Path, typer.Argument(help="Plan JSON file, or - for stdin")],
    as_json: JsonFlag = False,
) -> None:
    """Check a plan against its catalogue; exit 1 when it is invalid."""

    async def work(settings: Settings) -> list[PlanError]:
        plan = parse_plan(_read_plan(plan_file))
        app = settings.load()
        return validate(plan, app.catalogue(plan.catalogue), facts=app.facts)

    errors = _run(ctx, work)
    if as_json:
        _dump({"valid": not errors, "errors": [e.to_dict() for e in errors]})
    elif not errors:
        out.print(Text("valid", style="green"))
    else:
        _print_errors(errors)
    if errors:
        raise typer.Exit(1)


PlanFile = Annotated[Path, typer.Argument(help="Plan JSON file, or - for stdin")]
SagaIdOption = Annotated[str | None, typer.Option(help="Idempotent saga id")]


def _submit(ctx: typer.Context, plan_file: Path, saga_id: str | None, *, run: bool) -> str:
    """Validate and record the plan (and with ``run``, run it here); return the saga id."""

    async def work(settings: Settings) -> str:
        async with _session(settings) as orch:
            plan = parse_plan(_read_plan(plan_file))
            submit = orch.execute if run else orch.submit
            return (await submit(plan, saga_id=saga_id)).saga_id

    return _run(ctx, work)


@cli.command()
def execute(
    ctx: typer.Context, plan_file: PlanFile, saga_id: SagaIdOption = None, as_json: JsonFlag = False
) -> None:
    """Validate, submit and run a plan in this process until it ends or waits for approval."""
    _show(ctx, _submit(ctx, plan_file, saga_id, run=True), as_json)


@sagas_cli.command("list")
def sagas_list(
    ctx: typer.Context,
    status: Annotated[SagaStatus | None, typer.Option(help="Only this status")] = None,
    limit: int = 100,
    as_json: JsonFlag = False,
) -> None:
    """List sagas, newest first."""

    async def work(settings: Settings) -> list[Any]:
        async with _session(settings, with_app=False) as orch:
            return await orch.store.list_sagas(status, limit)

    sagas = _run(ctx, work)
    if as_json:
        _dump([asdict(s) | {"status": s.status.value} for s in sagas])
    else:
        out.print(render.sagas_table(sagas))


@sagas_cli.command("show")
def sagas_show(ctx: typer.Context, saga_id: str, as_json: JsonFlag = False) -> None:
    """Status, steps, events and provenance of one saga."""
    _show(ctx, saga_id, as_json)


def _show(ctx: typer.Context, saga_id: str, as_json: bool) -> None:
    async def work(settings: Settings) -> Any:
        async with _session(settings, with_app=False) as orch:
            stored = await orch.get(saga_id)
            events = await orch.store.events(saga_id)
            return stored, events

    stored, events = _run(ctx, work)
    state = stored.state
    if as_json:
        _dump(
            {
                "saga_id": state.saga_id,
                "catalogue": state.catalogue,
                "status": state.status.value,
                "reason": state.reason,
                "provenance": stored.plan.provenance.model_dump(mode="json"),
                "rationale": stored.plan.rationale,
                "approval": asdict(state.approval) if state.approval else None,
                "steps": [asdict(r) for r in state.steps],
                "events": [asdict(e) | {"type": e.type.value} for e in events],
            }
        )
        return
    out.print(render.saga_view(state, events, stored.plan.provenance, stored.plan.rationale))


Who = Annotated[str, typer.Option("--by", help="Who decides (recorded)")]
Why = Annotated[str, typer.Option("--reason", help="Why (recorded)")]


@sagas_cli.command("resume")
def sagas_resume(
    ctx: typer.Context,
    saga_id: str,
    by: Who,
    reason: Why,
    run: Annotated[bool, typer.Option("--run", help="Run it in this process now")] = False,
) -> None:
    """A needs_human saga whose cause was fixed goes on, with the same keys."""

    async def work(settings: Settings) -> SagaStatus:
        async with _session(settings) as orch:
            return (await orch.resume(saga_id, by, reason, run=run)).status

    status = _run(ctx, work)
    out.print(f"saga {saga_id}: ", render.status_text(status))


@sagas_cli.command("resolve")
def sagas_resolve(ctx: typer.Context, saga_id: str, by: Who, reason: Why) -> None:
    """A person settled a needs_human saga outside Pivotal: it ends resolved."""

    async def work(settings: Settings) -> SagaStatus:
        async with _session(settings) as orch:
            return (await orch.resolve(saga_id, by, reason)).status

    status = _run(ctx, work)
    out.print(f"saga {saga_id}: ", render.status_text(status))


@approvals_cli.command("list")
def approvals_list(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Pivots waiting for a decision, with the planner's rationale."""

    async def work(settings: Settings) -> list[Any]:
        async with _session(settings, with_app=False) as orch:
            return await orch.store.pending_approvals()

    items = _run(ctx, work)
    if as_json:
        _dump(
            [
                asdict(p.approval)
                | {"saga_id": p.saga_id, "step": p.step_name, "step_index": p.approval.step}
                for p in items
            ]
        )
    else:
        out.print(render.approvals_table(items))


Approver = Annotated[str, typer.Option("--by", help="Who decides (recorded)")]
Note = Annotated[str, typer.Option(help="Why (recorded)")]


@approvals_cli.command("approve")
def approvals_approve(ctx: typer.Context, saga_id: str, by: Approver, note: Note = "") -> None:
    """Approve the pivot; the saga goes on in this process."""
    _decide(ctx, saga_id, by, note, approve=True)


@approvals_cli.command("reject")
def approvals_reject(ctx: typer.Context, saga_id: str, by: Approver, note: Note = "") -> None:
    """Reject the pivot; the saga compensates."""
    _decide(ctx, saga_id, by, note, approve=False)


def _decide(ctx: typer.Context, saga_id: str, by: str, note: str, *, approve: bool) -> None:
    async def work(settings: Settings) -> SagaStatus:
        async with _session(settings) as orch:
            decide = orch.approve if approve else orch.reject
            return (await decide(saga_id, by, note)).status

    status = _run(ctx, work)
    out.print(f"saga {saga_id}: ", render.status_text(status))


@dead_letters_cli.command("list")
def dead_letters_list(
    ctx: typer.Context,
    show_all: AllFlag = False,
    as_json: JsonFlag = False,
) -> None:
    """Undos parked after their retries ran out."""

    async def work(settings: Settings) -> list[Any]:
        async with _session(settings, with_app=False) as orch:
            return await orch.store.dead_letters(None if show_all else "open")

    items = _run(ctx, work)
    if as_json:
        _dump([asdict(d) for d in items])
    else:
        out.print(render.dead_letters_table(items))


from pivotal.planning.cli import escalations_cli, plan_command, shadow_cli  # noqa: E402

cli.command("plan")(plan_command)
cli.add_typer(escalations_cli, name="escalations")
cli.add_typer(shadow_cli, name="shadow")


def main() -> None:
    import pivotal.cli_ops  # noqa: F401  (registers the operations commands)

    cli()
