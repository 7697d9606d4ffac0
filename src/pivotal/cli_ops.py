"""Operations commands: submit, worker, sweep, dead-letter retry and resolve."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Annotated

import typer

from pivotal.cli import (
    PlanFile,
    SagaIdOption,
    Settings,
    _dump,
    _run,
    _session,
    _submit,
    cli,
    dead_letters_cli,
    out,
)
from pivotal.cli_options import JsonFlag
from pivotal.store import open_store
from pivotal.worker import Sweeper, SweepReport, Worker, WorkerConfig, WorkerStats


@cli.command()
def submit(
    ctx: typer.Context, plan_file: PlanFile, saga_id: SagaIdOption = None, as_json: JsonFlag = False
) -> None:
    """Validate a plan and record it as a saga; a worker runs it."""
    saga = _submit(ctx, plan_file, saga_id, run=False)
    if as_json:
        _dump({"saga_id": saga})
    else:
        out.print(saga)


@cli.command()
def worker(
    ctx: typer.Context,
    concurrency: Annotated[int, typer.Option(min=1, help="Sagas run at once")] = 8,
    lease_ttl: Annotated[float, typer.Option(min=0.1, help="Lease length in seconds")] = 30.0,
    poll: Annotated[float, typer.Option(min=0.01, help="Idle polling interval")] = 0.5,
    sweep_every: Annotated[float, typer.Option(min=0.1, help="Seconds between sweeps")] = 10.0,
    until_idle: Annotated[
        bool, typer.Option(help="Exit once no saga is submitted, running or compensating")
    ] = False,
    name: Annotated[str | None, typer.Option(help="Worker name in leases and events")] = None,
    migrate: Annotated[
        bool, typer.Option(help="Apply pending ledger migrations before starting")
    ] = False,
) -> None:
    """Claim and run sagas until SIGTERM or SIGINT (then finish the call in flight)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = WorkerConfig(
        concurrency=concurrency,
        lease_ttl=lease_ttl,
        poll_interval=poll,
        sweep_interval=sweep_every,
    )

    async def work(settings: Settings) -> WorkerStats:
        async with _session(settings, migrate=migrate, owner=name, lease_ttl=lease_ttl) as orch:
            runner = Worker(orch, config)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, runner.stop)
            return await runner.run(until_idle=until_idle)

    stats = _run(ctx, work)
    out.print(
        f"worker stopped: {stats.runs} passes, finished {stats.finished or 'none'}, "
        f"{stats.leases_lost} leases lost, {stats.errors} errors"
    )


@cli.command()
def migrate(ctx: typer.Context) -> None:
    """Bring the ledger's schema up to date (PostgreSQL; SQLite migrates on open)."""

    async def work(settings: Settings) -> str:
        store = open_store(settings.db, migrate=True)
        await store.open()
        await store.close()
        return settings.db.split("@")[-1]

    where = _run(ctx, work)
    out.print(f"ledger {where}: schema up to date")


@cli.command()
def sweep(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Recover expired leases, expire overdue approvals, retry due dead letters — once."""

    async def work(settings: Settings) -> SweepReport:
        async with _session(settings) as orch:
            return await Sweeper(orch).sweep()

    report = _run(ctx, work)
    if as_json:
        _dump(report.__dict__)
        return
    out.print(
        f"leases recovered: {len(report.leases_recovered)}; approvals expired: "
        f"{len(report.approvals_expired)}; dead letters retried: "
        f"{report.dead_letters_retried}, settled: {report.dead_letters_settled}"
    )


@dead_letters_cli.command("retry")
def dead_letters_retry(ctx: typer.Context, dead_letter_id: int) -> None:
    """Run a parked undo again now, with its original undo key."""

    async def work(settings: Settings) -> bool:
        async with _session(settings) as orch:
            return await orch.retry_dead_letter(dead_letter_id)

    settled = _run(ctx, work)
    out.print(f"dead letter {dead_letter_id}: " + ("settled" if settled else "still failing"))
    if not settled:
        raise typer.Exit(1)


@dead_letters_cli.command("resolve")
def dead_letters_resolve(
    ctx: typer.Context,
    dead_letter_id: int,
    by: Annotated[str, typer.Option("--by", help="Who settled it (recorded)")],
    reason: Annotated[str, typer.Option(help="What was done by hand (recorded)")],
) -> None:
    """Record that a person settled a parked undo by hand."""

    async def work(settings: Settings) -> None:
        async with _session(settings, with_app=True) as orch:
            await orch.resolve_dead_letter(dead_letter_id, by, reason)

    _run(ctx, work)
    out.print(f"dead letter {dead_letter_id}: resolved by {by}")
