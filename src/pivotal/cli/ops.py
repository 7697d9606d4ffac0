"""Running plans: ``validate``, ``execute``, ``submit``, ``worker``, ``sweep``, ``migrate``."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from typing import Annotated, Any

import typer
from rich.text import Text

from pivotal.admission.validation import validate_bounded
from pivotal.cli import _processes, _progress, _stopping
from pivotal.cli._shared import (
    EXAMPLE,
    MAX_NAME,
    Create,
    JsonFlag,
    PlanFile,
    SagaIdOption,
    Settings,
    SubmittedBy,
    WideFlag,
    bounded,
    check_ledger,
    dump,
    err,
    finite,
    out,
    print_error,
    print_plan_errors,
    read_plan,
    reading,
    run,
    settings_of,
    submitted_by,
    writing,
)
from pivotal.cli.outbox import RelayOptions, relay_beside, webhook_secret
from pivotal.cli.sagas import print_saga
from pivotal.declarations.plan import parse_plan
from pivotal.errors import InvalidInput, PlanRejected
from pivotal.observability.metrics import PivotalMetrics
from pivotal.operations.worker import Sweeper, SweepReport, Worker, WorkerConfig, default_name
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.sagas import saga_ids
from pivotal.sagas.state import Event, SagaState, SagaStatus, StepStatus
from pivotal.store import StoredSaga, migrate_ledger, sqlite_path
from pivotal.views import saga_actions

# How `pivotal execute` ends, by the saga's status; 15: not at rest yet (a worker goes on).
EXECUTE_EXIT = {
    SagaStatus.COMPLETED: 0,
    SagaStatus.COMPENSATED: 10,
    SagaStatus.COMPENSATION_FAILED: 11,
    SagaStatus.NEEDS_HUMAN: 12,
    SagaStatus.AWAITING_APPROVAL: 13,
    SagaStatus.RESOLVED: 14,
}
EXECUTE_NOT_AT_REST = 15
AT_REST = frozenset(EXECUTE_EXIT)  # no process runs them now (a decision or a person may)


def register(cli: typer.Typer) -> None:
    cli.command("validate")(validate_command)
    cli.command("execute")(execute)
    cli.command("submit")(submit)
    cli.command("worker")(worker)
    cli.command("sweep")(sweep)
    cli.command("migrate")(migrate)


def validate_command(ctx: typer.Context, plan_file: PlanFile, as_json: JsonFlag = False) -> None:
    """Check a plan against its catalogue; exit 1 when it is invalid. Without --app, the
    catalogues are the bundled commerce example's, and it says so."""
    plan = parse_plan(read_plan(plan_file))
    settings = settings_of(ctx)
    against = "" if settings.app else f" against {EXAMPLE}'s catalogues (--app names yours)"
    with settings.loaded_app() as app:
        try:
            catalogue = app.catalogue(plan.catalogue)
            errors = run(validate_bounded(plan, catalogue, facts=app.facts))
        except PlanRejected as exc:  # no such catalogue
            errors = list(exc.errors)
    if as_json:
        dump({"valid": not errors, "errors": [e.to_dict() for e in errors]})
    elif not errors:
        out.print(Text("valid", style="green"), Text(against), sep="")
    else:
        print_plan_errors(errors, f"it would be refused{against}")
    if errors:
        raise typer.Exit(1)


def execute(
    ctx: typer.Context,
    plan_file: PlanFile,
    saga_id: SagaIdOption = None,
    by: SubmittedBy = None,
    create: Create = False,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """Validate, submit and run a plan here until it ends or waits for approval.

    Exit status: 0 completed, 10 compensated, 11 compensation_failed, 12 needs_human,
    13 awaiting_approval, 14 resolved, 15 not at rest yet (a worker goes on with it);
    130 stopped by Ctrl-C, saying what it left of the saga and how to go on.
    """
    plan = submitted_by(parse_plan(read_plan(plan_file)), by)
    settings = settings_of(ctx)
    chosen = saga_id or saga_ids.new()  # known here, to say what a Ctrl-C left
    lease_ttl: list[float] = []

    async def work() -> tuple[StoredSaga, list[Event]]:
        async with writing(settings, "execute", create=create) as orch:
            lease_ttl.append(orch.lease_ttl)
            state = await orch.execute(plan, saga_id=chosen)
            stored = await orch.get(state.saga_id)
            return saga_actions.shown(stored, await orch.store.events(state.saga_id))

    try:
        stored, events = run(work())
    except KeyboardInterrupt:
        print_error("interrupted", run(_left(settings, chosen, lease_ttl)))
        raise typer.Exit(_stopping.EXIT_ABANDONED) from None
    print_saga(stored, events, as_json=as_json, wide=wide)
    status = EXECUTE_EXIT.get(stored.state.status, EXECUTE_NOT_AT_REST)
    if status:
        raise typer.Exit(status)


async def _left(settings: Settings, saga_id: str, lease_ttl: list[float]) -> str:
    """What an interrupted ``execute`` left of the saga, and how to go on with it."""
    show = f"`pivotal sagas show {saga_id}` shows where it is"
    async with reading(settings) as store:
        stored = await store.load(saga_id)
    if stored is None:
        return f"stopped before saga {saga_id} was recorded: nothing was written"
    state = stored.state
    if state.status in AT_REST:
        return f"saga {saga_id} is {state.status.value}; {show}"
    where = next(
        (s for s in state.steps if s.status in (StepStatus.STARTED, StepStatus.RETRY_WAIT)),
        None,
    )
    at = f" at step {where.index} ({where.name})" if where is not None else ""
    lapse = f" (within {lease_ttl[0]:g}s)" if lease_ttl else ""
    return (
        f"saga {saga_id} left {state.status.value}{at}; a worker goes on with it once this "
        f"process's lease lapses{lapse}: run `pivotal worker`; {show}"
    )


def submit(
    ctx: typer.Context,
    plan_file: PlanFile,
    saga_id: SagaIdOption = None,
    by: SubmittedBy = None,
    create: Create = False,
    as_json: JsonFlag = False,
) -> None:
    """Validate a plan and record it as a saga; a worker runs it. Prints the saga id."""
    plan = submitted_by(parse_plan(read_plan(plan_file)), by)

    async def work() -> SagaState:
        async with writing(settings_of(ctx), "submit", create=create) as orch:
            return await orch.submit(plan, saga_id=saga_id)

    state = run(work())
    if as_json:
        dump({"saga_id": state.saga_id, "status": state.status.value})
    else:
        out.print(state.saga_id)


def worker(
    ctx: typer.Context,
    concurrency: Annotated[int, typer.Option(min=1, max=10_000, help="Sagas run at once.")] = 8,
    lease_ttl: Annotated[
        float, typer.Option(min=0.1, max=86_400, help="Lease length in seconds.", callback=finite)
    ] = 30.0,
    poll: Annotated[
        float,
        typer.Option(min=0.01, max=3600, help="Idle polling interval in seconds.", callback=finite),
    ] = 0.5,
    sweep_every: Annotated[
        float, typer.Option(min=0.1, max=86_400, help="Seconds between sweeps.", callback=finite)
    ] = 10.0,
    until_idle: Annotated[
        bool,
        typer.Option(
            "--until-idle", help="Exit once no saga is submitted, running or compensating."
        ),
    ] = False,
    name: Annotated[
        str | None,
        typer.Option(
            help=(
                "Worker name in leases and events (default: host-pid); one live worker a "
                "name: a second one waits, saying so."
            ),
            callback=bounded(MAX_NAME),
        ),
    ] = None,
    migrate: Annotated[
        bool, typer.Option("--migrate", help="Apply pending ledger migrations first.")
    ] = False,
    log_format: Annotated[
        _progress.LogFormat,
        typer.Option(help="text, or json: one JSON object per line (progress and logs)."),
    ] = _progress.LogFormat.TEXT,
    progress_every: Annotated[
        float,
        typer.Option(min=0.01, max=86_400, help="Seconds between progress lines.", callback=finite),
    ] = 10.0,
    metrics_port: Annotated[
        int | None,
        typer.Option(min=1, max=65_535, help="Serve Prometheus metrics on this port (/metrics)."),
    ] = None,
    metrics_host: Annotated[
        str,
        typer.Option(help="Address the metrics endpoint listens on.", callback=bounded(MAX_NAME)),
    ] = "127.0.0.1",
    metrics_allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            metavar="HOST",
            help="A host name the metrics endpoint answers for (.example.com: and its "
            "subdomains; *: any); repeatable. Another Host is refused with 421. Default: "
            "localhost, 127.0.0.1, ::1 and --metrics-host.",
        ),
    ] = None,
    relay_webhook: Annotated[
        str | None,
        typer.Option(
            help="Also relay the outbox: POST each message here, signed (see `outbox relay`).",
            callback=bounded(2000),
        ),
    ] = None,
    relay_secret_env: Annotated[
        str | None, typer.Option(help="The relay webhook's secret is in this variable.")
    ] = None,
    relay_allow_insecure: Annotated[
        bool,
        typer.Option(
            "--relay-allow-insecure", help="Allow an http:// or private relay webhook address."
        ),
    ] = False,
    relay_callable: Annotated[
        list[str] | None,
        typer.Option(help="Also relay the outbox to module:attribute (a sink or a function)."),
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=256,
            envvar="PIVOTAL_WORKER_PROCESSES",
            help="Worker processes over this ledger, each running --concurrency sagas "
            "(default: this machine's cores). With more than one, this process starts, "
            "watches and stops them and starts again one that dies; --name NAME names them "
            "NAME-1 to NAME-N, --metrics-port P serves process k's metrics on P+k-1, and "
            "the first alone relays the outbox.",
        ),
    ] = None,
    supervised: Annotated[bool, typer.Option(_processes.SUPERVISED, hidden=True)] = False,
    create: Create = False,
    as_json: JsonFlag = False,
) -> None:
    """Claim and run sagas until SIGTERM or SIGINT (then finish the calls in flight).

    It says on stderr that it started (ledger, app, concurrency), how the work goes while
    it changes (claimed, in flight, finished by status), and when it stopped. The first
    SIGINT (Ctrl-C) or SIGTERM stops claiming and says which sagas it waits for; a second
    one stops waiting: the calls in flight are left in doubt (the ledger says so; their
    leases lapse), it says which, and exits 130. While a live worker has its name it
    claims nothing and says so, and starts once that one stops or falls silent (as a
    supervisor restarting a crashed worker expects). With
    --metrics-port it serves its Prometheus metrics, and the ledger's gauges, there, to a
    bearer token of any role (`pivotal tokens create`), behind the edge `pivotal serve`
    has. With
    --relay-webhook or --relay-callable it also delivers the outbox, as `outbox relay` does.
    """
    settings = settings_of(ctx)
    metrics_hosts = _metrics_hosts(metrics_host, metrics_allowed_host)
    count = processes or _processes.cores()
    if count > 1 and not supervised:
        _worker_processes(ctx, count, until_idle=until_idle, log_format=log_format, json=as_json)
        return
    relaying = RelayOptions(
        webhook=relay_webhook,
        secret=webhook_secret(None, relay_secret_env) if relay_webhook is not None else None,
        allow_insecure=relay_allow_insecure,
        callables=tuple(relay_callable or ()),
    )
    config = WorkerConfig(
        concurrency=concurrency,
        lease_ttl=lease_ttl,
        poll_interval=poll,
        sweep_interval=sweep_every,
    )

    async def work() -> dict[str, Any]:
        options: dict[str, Any] = {"owner": name or default_name(), "lease_ttl": lease_ttl}
        metrics = PivotalMetrics() if metrics_port is not None else None
        if metrics is not None:
            options["telemetry"] = [metrics]
        settled = metrics.outbox_settled if metrics is not None else None
        async with (
            writing(settings, "worker", migrate=migrate, create=create, **options) as orch,
            _metrics_endpoint(metrics, orch, metrics_host, metrics_port, metrics_hosts),
            relay_beside(orch.store, relaying, settled, drain=until_idle, clock=orch.clock),
        ):
            runner = Worker(orch, config)
            with _stopping.handled(runner) as stopping:
                await runner.take_name()  # waits, saying so, while a live worker has it
                _progress.started(runner, settings.ledger, settings.describe_app())
                if supervised:
                    _processes.say_started(runner.owner)
                done = asyncio.Event()
                progress = asyncio.create_task(
                    _progress.report_progress(runner, progress_every, done)
                )
                try:
                    stats = await runner.run(until_idle=until_idle)
                finally:
                    done.set()
                    await progress
            result = _progress.summary(runner, stats)
            if stopping.abandoned:
                result["abandoned"] = await _stopping.left_in_doubt(runner)
                result["abandoned_text"] = _stopping.say_abandoned(runner, result["abandoned"])
            result["text"] = _progress.stopped(runner, result)
            return result

    with _progress.worker_logging(log_format):
        result = run(work())
    text = result.pop("text")
    abandoned = result.pop("abandoned_text", None)
    if supervised:
        _processes.say_result({**result, "text": text, "abandoned_text": abandoned})
    elif as_json:
        dump(result)
    else:
        out.print(Text(text))
        if abandoned is not None:
            out.print(Text(abandoned))
    if abandoned is not None:
        raise typer.Exit(_stopping.EXIT_ABANDONED)


def _worker_processes(
    ctx: typer.Context, count: int, *, until_idle: bool, log_format: _progress.LogFormat, json: bool
) -> None:
    """``worker --processes N``: N worker processes of this command line, and what they did."""
    settings = settings_of(ctx)
    if sqlite_path(settings.db) == ":memory:":
        raise InvalidInput(
            f"--processes {count} runs a worker in each of {count} processes, and they cannot "
            "share a ledger in memory: give a ledger file or PostgreSQL, or --processes 1"
        )
    check_ledger(settings, create=bool(ctx.params.get("create")), offers="--create")
    supervisor = _processes.Supervisor(
        lambda number: _processes.process_args(ctx, number), count, until_idle=until_idle
    )
    with _progress.worker_logging(log_format), supervisor.handling():
        _processes.log.info(
            "worker processes: %d over ledger %s (this process, %d, starts and stops them)",
            count,
            settings.ledger,
            os.getpid(),
            extra={
                "fields": {
                    "event": "worker_processes_started",
                    "processes": count,
                    "ledger": settings.ledger,
                }
            },
        )
        status = supervisor.run()
    results = supervisor.results()
    if json:
        shown = [{k: v for k, v in r.items() if not k.endswith("text")} for r in results]
        dump({"processes": count, "restarts": supervisor.restarts, "workers": shown})
    else:
        for r in results:
            said = r.get("text") or f"worker {r['worker']} exited with status {r['exit']}"
            out.print(Text(said))
            if r.get("abandoned_text"):
                out.print(Text(r["abandoned_text"]))
    if status:
        raise typer.Exit(status)


def _metrics_hosts(host: str, allowed: list[str] | None) -> tuple[str, ...]:
    """The hosts the metrics endpoint answers for, checked."""
    from pivotal.server.edge import default_hosts
    from pivotal.server.guard import normal_hosts

    hosts = default_hosts(host, allowed)
    try:
        normal_hosts(hosts)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--metrics-allowed-host") from None
    return hosts


@contextlib.asynccontextmanager
async def _metrics_endpoint(
    metrics: PivotalMetrics | None,
    orch: Orchestrator,
    host: str,
    port: int | None,
    hosts: tuple[str, ...],
) -> AsyncIterator[None]:
    """Serve ``metrics`` on ``host:port`` while the worker runs (nothing without a port),
    as the listener ``worker-metrics`` (``listeners``), answering for ``hosts``."""
    if metrics is None or port is None:
        yield
        return
    from pivotal.cli.listeners import listener
    from pivotal.server.edge import Edge
    from pivotal.server.metrics_endpoint import MetricsEndpoint

    metrics.expect(c.name for c in orch.app)
    edge = Edge(allowed_hosts=hosts)
    app = listener("worker-metrics").build(orch, edge, metrics=metrics)
    async with MetricsEndpoint(
        metrics, orch.store, port=port, host=host, edge=edge, app=app
    ) as endpoint:
        err.print(Text(f"metrics: {endpoint.url}"))
        yield


def sweep(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Recover expired leases, expire overdue approvals, retry due dead letters: once."""

    async def work() -> SweepReport:
        async with writing(settings_of(ctx), "sweep") as orch:
            return await Sweeper(orch).sweep()

    report = run(work())
    if as_json:
        dump(report.__dict__)
        return
    out.print(
        f"leases recovered: {len(report.leases_recovered)}; approvals expired: "
        f"{len(report.approvals_expired)}; dead letters retried: "
        f"{report.dead_letters_retried}, settled: {report.dead_letters_settled}"
    )


def migrate(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Bring the ledger's schema up to date and say from which version to which.

    PostgreSQL needs it after an upgrade; SQLite also migrates whenever it is opened."""
    settings = settings_of(ctx)

    check_ledger(settings, create=True)
    before, after = run(migrate_ledger(settings.db))
    if as_json:
        dump({"ledger": settings.ledger, "from_version": before, "to_version": after})
    elif before == after:
        out.print(Text(f"ledger {settings.ledger}: schema version {after}, already up to date"))
    else:
        out.print(
            Text(f"ledger {settings.ledger}: schema migrated from version {before} to {after}")
        )
