"""``pivotal sagas``: list and show sagas and their events; resume or resolve one parked for
a person; abort one before its pivot; run a compensated one's plan again."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer

from pivotal import render, saga_actions
from pivotal.cli._shared import (
    JsonFlag,
    Limit,
    SagaId,
    Who,
    Why,
    brief,
    dump,
    new_group,
    note_cut,
    out,
    print_outcome,
    reading,
    run,
    settings_of,
    writing,
)
from pivotal.errors import SagaNotFound
from pivotal.state import Event, SagaState, SagaStatus
from pivotal.store import StoredSaga, count_rows

sagas = new_group(
    "Inspect sagas; resume or resolve one that waits for a person; abort one before its "
    "pivot; run a compensated plan again."
)


def register(cli: typer.Typer) -> None:
    cli.add_typer(sagas, name="sagas")


@sagas.command("list")
def sagas_list(
    ctx: typer.Context,
    status: Annotated[SagaStatus | None, typer.Option(help="Only this status.")] = None,
    limit: Limit = 100,
    as_json: JsonFlag = False,
) -> None:
    """List sagas, newest first."""

    async def work() -> tuple[list[Any], int | None]:
        async with reading(settings_of(ctx)) as store:
            found = await store.list_sagas(status, limit)
            return found, await count_rows(store, "sagas", status.value if status else None)

    found, total = run(work())
    if as_json:
        dump([asdict(s) | {"status": s.status.value} for s in found])
    else:
        out.print(render.sagas_table(found))
    note_cut(len(found), total, limit, "sagas", as_json=as_json)


@sagas.command("show")
def sagas_show(ctx: typer.Context, saga_id: SagaId, as_json: JsonFlag = False) -> None:
    """Status, steps, events and provenance of one saga."""

    async def work() -> tuple[StoredSaga, list[Event]]:
        async with reading(settings_of(ctx)) as store:
            stored = await store.load(saga_id)
            if stored is None:
                raise SagaNotFound(f"no saga {saga_id!r}")
            return stored, await store.events(saga_id)

    print_saga(*run(work()), as_json=as_json)


def saga_json(stored: StoredSaga, events: list[Event]) -> dict[str, Any]:
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
        "rationale": stored.plan.rationale,
        "approval": asdict(state.approval) if state.approval else None,
        "steps": [asdict(r) for r in state.steps],
        "events": [asdict(e) | {"type": e.type.value} for e in events],
    }


def print_saga(stored: StoredSaga, events: list[Event], *, as_json: bool) -> None:
    if as_json:
        dump(saga_json(stored, events))
        return
    plan = stored.plan
    out.print(
        render.saga_view(
            stored.state, events, plan.provenance, plan.rationale, last_error=stored.last_error
        )
    )


@sagas.command("resume")
def sagas_resume(
    ctx: typer.Context,
    saga_id: SagaId,
    by: Who,
    reason: Why,
    run_now: Annotated[bool, typer.Option("--run", help="Run it in this process now.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """A needs_human saga whose cause was fixed goes on, with the same keys."""

    async def work() -> SagaState:
        async with writing(settings_of(ctx), "sagas resume") as orch:
            return await orch.resume(saga_id, by, reason, run=run_now)

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


@sagas.command("events")
def sagas_events(ctx: typer.Context, saga_id: SagaId, as_json: JsonFlag = False) -> None:
    """The saga's event log, oldest first, its texts redacted (--json: as the API gives it)."""

    async def work() -> tuple[StoredSaga, list[Event]]:
        async with reading(settings_of(ctx)) as store:
            stored = await store.load(saga_id)
            if stored is None:
                raise SagaNotFound(f"no saga {saga_id!r}")
            return stored, await store.events(saga_id)

    stored, events = run(work())
    if as_json:
        dump(saga_actions.events_document(saga_id, events))
    else:
        out.print(render.timeline(stored.state, saga_actions.redacted(events)))
