"""``pivotal sagas``: list and show sagas and their events; resume or resolve one parked for
a person; abort one before its pivot; run a compensated one's plan again; fork a finished
one (its plan with arguments changed, as a new saga)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.text import Text

from pivotal.cli import _watch as watch
from pivotal.cli import bulk
from pivotal.cli._filters import Filters, searching
from pivotal.cli._shared import (
    JsonFlag,
    Limit,
    SagaId,
    Settings,
    Who,
    Why,
    WideFlag,
    brief,
    dump,
    err,
    new_group,
    note_cut,
    out,
    print_outcome,
    reading,
    run,
    settings_of,
    show,
    writing,
)
from pivotal.cli.searches import By, person
from pivotal.errors import SagaNotFound
from pivotal.orchestration.fork import parse_edit
from pivotal.sagas import progress as live_progress
from pivotal.sagas import saga_ids
from pivotal.sagas.state import Event, SagaState
from pivotal.store import Store, StoredSaga, count_rows
from pivotal.store.saved import filters_of
from pivotal.store.search import FIELDS, InvalidFilter, SagaFilter
from pivotal.store.search import MAX_LIMIT as MAX_SEARCH
from pivotal.terminal import printable
from pivotal.views import render, saga_actions, worker_wait

sagas = new_group(
    "Inspect sagas; resume or resolve one that waits for a person; abort one before its "
    "pivot; run a compensated plan again, or a finished one with arguments changed (fork); "
    "act on every saga a search selects."
)


def register(cli: typer.Typer) -> None:
    sagas.command("bulk")(bulk.sagas_bulk)
    cli.add_typer(sagas, name="sagas")


@sagas.command("list")
@searching
def sagas_list(
    ctx: typer.Context,
    filters: Filters,
    cursor: Annotated[
        str | None,
        typer.Option(help="Start after the page this cursor ended (its next_cursor)."),
    ] = None,
    paged: Annotated[
        bool,
        typer.Option(
            "--paged",
            help='With --json: {"items": [...], "next_cursor": ...} (implied by --cursor).',
        ),
    ] = False,
    saved: Annotated[
        str | None,
        typer.Option(
            "--saved",
            metavar="NAME",
            help="Run the person's saved search NAME (pivotal searches list), with no other "
            "filter.",
        ),
    ] = None,
    by: By = None,
    limit: Limit = 100,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
) -> None:
    """List sagas, newest first; filter and search them (or run a saved search), and page
    with --cursor."""
    paged = paged or cursor is not None
    if by is not None and saved is None:
        raise typer.BadParameter("--by names whose saved search --saved runs", param_hint="--by")

    async def work() -> tuple[list[Any], int | None, str | None]:
        async with reading(settings_of(ctx)) as store:
            now = await store.ledger_time()
            wanted = SagaFilter.parse(filters, now)
            if saved is not None:
                beside = [f for f in FIELDS if getattr(wanted, f) != getattr(SagaFilter(), f)]
                kept = await filters_of(store, person(by), saved, beside)
                wanted = SagaFilter.parse(kept, now)
            if wanted.plain and not paged:  # as it always listed: newest, counted
                one = wanted.status[0] if wanted.status else None
                found = await store.list_sagas(one, limit)
                total = await count_rows(store, "sagas", one.value if one else None)
                return found, total, None
            if limit > MAX_SEARCH:
                raise InvalidFilter(f"--limit: a search shows at most {MAX_SEARCH} a page")
            page = await store.search_sagas(wanted, limit, cursor)
            return page.items, None, page.next_cursor

    found, total, next_cursor = run(work())
    rows = [asdict(s) | {"status": s.status.value} for s in found]
    if as_json and paged:
        dump({"items": rows, "next_cursor": next_cursor})
        return
    if as_json:
        dump(rows)
    else:
        show(render.sagas_table(found), wide=wide)
    if next_cursor is None:
        note_cut(len(found), total, limit, "sagas", as_json=as_json)
    else:
        note = f"more sagas follow: --cursor {next_cursor} shows the next page"
        (err if as_json else out).print(Text(printable(note)))


@sagas.command("show")
def sagas_show(
    ctx: typer.Context,
    saga_id: SagaId,
    as_json: JsonFlag = False,
    wide: WideFlag = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Every event its own row (retries too), and each failed call's traceback.",
        ),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Show it again every 2 seconds, with the progress of long work, until it "
            "comes to rest (Ctrl-C stops watching; the saga goes on); into a pipe or a file, "
            "each change as a line.",
        ),
    ] = False,
) -> None:
    """Status, steps, events and provenance of one saga; each call shows where it stands
    (in flight, in doubt until a time, or ended unrecorded) and what it last reported
    (ctx.progress); a saga that waits for a worker while none is alive says what to run."""
    if watch and as_json:
        raise typer.BadParameter("--watch shows a table: use one or the other", param_hint="--json")

    settings = settings_of(ctx)

    async def work() -> Shown:
        async with reading(settings) as store:
            return await read_saga(store, saga_id, worker_command(settings))

    if watch:
        try:
            run(watch_saga(settings, saga_id, verbose=verbose))
        except KeyboardInterrupt:
            err.print(Text(printable(f"stopped watching {saga_id}; the saga goes on")))
        return
    stored, events, progress, waiting, now = run(work())
    print_saga(
        stored,
        events,
        as_json=as_json,
        wide=wide,
        verbose=verbose,
        progress=progress,
        waiting=waiting,
        now=now,
    )


# the saga, its events, the reports of its calls, what it says when it waits for a worker
# while none is alive, and the ledger's time (what tells an overdue retry)
Shown = tuple[StoredSaga, list[Event], dict[int, live_progress.Shown], str | None, float]
WATCH_EVERY = 2.0  # seconds between two looks of ``sagas show --watch``


def worker_command(settings: Settings) -> str:
    """The command that starts a worker over the ledger these options name."""
    app = f" --app {brief(settings.app)}" if settings.app else " --app module:attribute"
    if settings.example_app:
        app = " --example-app"
    return f"pivotal --db {settings.ledger}{app} worker"


async def read_saga(store: Store, saga_id: str, run: str = worker_wait.RUN) -> Shown:
    """The saga, its events (both as people see them: ``saga_actions.shown``), where its
    calls stand, and what it says when it waits for a worker while none is alive (``run``:
    the command that starts one), all at the ledger's time."""
    stored = await store.load(saga_id)
    if stored is None:
        raise SagaNotFound(saga_ids.missing(saga_id))
    now = await store.ledger_time()
    progress = await live_progress.live(store, stored.state, now)
    reason = await worker_wait.waiting(store, stored.state, now)
    waiting = None if reason is None else worker_wait.sentence(reason, run)
    return *saga_actions.shown(stored, await store.events(saga_id)), progress, waiting, now


async def watch_saga(settings: Settings, saga_id: str, *, verbose: bool) -> None:
    """``sagas show --watch``: the view redrawn in place until the saga is at rest; where
    the output is no terminal (a pipe, a file), the view once, then each change as a line."""
    run_worker = worker_command(settings)
    async with reading(settings) as store:
        shown = await read_saga(store, saga_id, run_worker)
        if not out.is_terminal:
            await _watch_lines(store, shown, run_worker, verbose=verbose)
            return
        with Live(console=out, auto_refresh=False) as live:
            while True:
                stored, events, progress, waiting, now = shown
                view = saga_view(stored, events, verbose, progress, waiting, now, fold=True)
                live.update(view, refresh=True)
                if stored.state.status.terminal:
                    return
                await asyncio.sleep(WATCH_EVERY)
                shown = await read_saga(store, saga_id, run_worker)


async def _watch_lines(store: Store, shown: Shown, run_worker: str, *, verbose: bool) -> None:
    stored, events, progress, waiting, now = shown
    out.print(saga_view(stored, events, verbose, progress, waiting, now))
    seen = watch.lines(stored.state, progress, waiting)
    while not stored.state.status.terminal:
        await asyncio.sleep(WATCH_EVERY)
        stored, _, progress, waiting, _ = await read_saga(store, stored.state.saga_id, run_worker)
        lines = watch.lines(stored.state, progress, waiting)
        for line in watch.changed(seen, lines):
            out.print(Text(printable(line)), soft_wrap=True)
        seen = lines


def saga_json(
    stored: StoredSaga,
    events: list[Event],
    progress: Mapping[int, live_progress.Shown] | None = None,
    waiting: str | None = None,
) -> dict[str, Any]:
    state = stored.state
    return {
        "saga_id": state.saga_id,
        "catalogue": state.catalogue,
        "catalogue_digest": render.catalogue_digest_of(events),
        "status": state.status.value,
        "reason": state.reason,
        "last_error": stored.last_error,
        "idle_passes": stored.idle_passes,
        "provenance": stored.plan.provenance.model_dump(mode="json"),
        "provenance_ref": state.provenance_ref,  # what each event's provenance_ref resolves to
        "rationale": stored.plan.rationale,
        "approval": asdict(state.approval) if state.approval else None,
        "steps": [asdict(r) for r in state.steps],
        "progress": live_progress.as_json(progress or {}),
        "no_worker": waiting,
        "events": [asdict(e) | {"type": e.type.value} for e in events],
    }


def saga_view(
    stored: StoredSaga,
    events: list[Event],
    verbose: bool,
    progress: Mapping[int, live_progress.Shown] | None,
    waiting: str | None = None,
    now: float | None = None,
    *,
    fold: bool = False,
) -> Group:
    plan = stored.plan
    return render.saga_view(
        stored.state,
        events,
        plan.provenance,
        plan.rationale,
        last_error=stored.last_error,
        verbose=verbose,
        progress=progress,
        waiting=waiting,
        fold=fold,
        now=now,
    )


def print_saga(
    stored: StoredSaga,
    events: list[Event],
    *,
    as_json: bool,
    wide: bool = False,
    verbose: bool = False,
    progress: Mapping[int, live_progress.Shown] | None = None,
    waiting: str | None = None,
    now: float | None = None,
) -> None:
    if as_json:
        dump(saga_json(stored, events, progress, waiting))
        return
    show(saga_view(stored, events, verbose, progress, waiting, now), wide=wide)


@sagas.command("resume")
def sagas_resume(
    ctx: typer.Context,
    saga_id: SagaId,
    by: Who,
    reason: Why,
    run_now: Annotated[bool, typer.Option("--run", help="Run it in this process now.")] = False,
    from_step: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="STEP",
            help="Go on at STEP (its index from 0, or its name): you settled the steps "
            "before it that had not succeeded by hand, and they are recorded so, with your "
            "name and reason. Refused, recording nothing, when a step in doubt would be "
            "called again, a step that may still land or one before the point of no return "
            "would be settled by hand, or the point of no return passed without running.",
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """A needs_human saga whose cause was fixed goes on, with the same keys (with --from:
    at that step, the steps before it settled by you)."""

    async def work() -> SagaState:
        async with writing(settings_of(ctx), "sagas resume") as orch:
            return await orch.resume(saga_id, by, reason, run=run_now, from_step=from_step)

    print_outcome(run(work()), as_json)


@sagas.command("resolve")
def sagas_resolve(
    ctx: typer.Context, saga_id: SagaId, by: Who, reason: Why, as_json: JsonFlag = False
) -> None:
    """A person settled a needs_human saga outside Pivotal: it ends resolved."""

    async def work() -> SagaState:
        async with writing(settings_of(ctx), "sagas resolve") as orch:
            return await orch.resolve(saga_id, by, reason)

    print_outcome(run(work()), as_json, resolved_by=brief(by))


@sagas.command("abort")
def sagas_abort(
    ctx: typer.Context,
    saga_id: SagaId,
    by: Who,
    reason: Why,
    run_now: Annotated[
        bool, typer.Option("--run", help="Run the undos in this process now.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """A saga not yet at its point of no return starts compensating; a worker runs the undos
    (or this process, with --run). Refused past the pivot, awaiting approval, or over."""

    async def work() -> SagaState:
        async with writing(settings_of(ctx), "sagas abort") as orch:
            state = await saga_actions.abort(orch, saga_id, by, reason)
            return await orch.run(saga_id) if run_now else state

    print_outcome(run(work()), as_json, aborted_by=brief(by))


@sagas.command("rerun")
def sagas_rerun(ctx: typer.Context, saga_id: SagaId, by: Who, as_json: JsonFlag = False) -> None:
    """Submit the plan of a compensated saga again, as a new saga pointing back to it
    (provenance.rerun_of): validated, rolled out and approved anew; a worker runs it. One
    rerun per saga: asking again prints the same one."""

    async def work() -> SagaState:
        async with writing(settings_of(ctx), "sagas rerun") as orch:
            return await orch.rerun(saga_id, by)

    print_outcome(run(work()), as_json, rerun_of=brief(saga_id))


@sagas.command("fork")
def sagas_fork(
    ctx: typer.Context,
    saga_id: SagaId,
    by: Who,
    reason: Why,
    edits: Annotated[
        list[str],
        typer.Option(
            "--set",
            metavar="STEP.ARGUMENT=VALUE",
            help="An argument to change (repeat it): STEP is a call's index from 0 or the "
            "name of a step the plan calls once; VALUE is JSON, and text that is not JSON "
            "is a string (quote it to keep '\"123\"' a string), and a number for an "
            "argument the plan gives as text stays text. E.g. --set 2.amount=1500 "
            "--set reserve_stock.sku=B-7.",
        ),
    ],
    as_json: JsonFlag = False,
) -> None:
    """Submit the plan of a finished saga (completed, compensated, compensation_failed,
    resolved) with arguments changed, as a new saga: validated against today's facts and
    approved anew, and whoever forked it may not approve it. It makes every effect of its
    plan anew, even those the first saga made and kept (a completed saga's fork charges,
    reserves and ships again). The reason is recorded on both sagas. Asked again by the
    same person with the same changes, it prints the same saga; a worker runs it."""

    async def work() -> SagaState:
        parsed = [parse_edit(e) for e in edits]
        async with writing(settings_of(ctx), "sagas fork") as orch:
            return await saga_actions.fork(orch, saga_id, parsed, by, reason)

    print_outcome(run(work()), as_json, forked_from=brief(saga_id))


@sagas.command("events")
def sagas_events(
    ctx: typer.Context, saga_id: SagaId, as_json: JsonFlag = False, wide: WideFlag = False
) -> None:
    """The saga's event log, oldest first, its texts redacted (--json: as the API gives it)."""

    async def work() -> tuple[StoredSaga, list[Event]]:
        async with reading(settings_of(ctx)) as store:
            stored = await store.load(saga_id)
            if stored is None:
                raise SagaNotFound(saga_ids.missing(saga_id))
            return stored, await store.events(saga_id)

    stored, events = run(work())
    if as_json:
        dump(saga_actions.events_document(stored, events))
    else:
        show(render.timeline(stored.state, saga_actions.redacted(events)), wide=wide)
