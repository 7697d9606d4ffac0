"""Where a person waits on a saga: `sagas show` says when no worker is alive to move it,
with the command that starts one; `sagas show --watch` into a pipe writes each change as a
plain line."""

from __future__ import annotations

import asyncio

import pytest
from cli_harness import InProcess
from pydantic import BaseModel

from pivotal import Catalogue, Orchestrator, SagaStatus, StepContext, parse_plan
from pivotal.cli import sagas as sagas_cli
from pivotal.store import SQLiteStore

PLAN = {"catalogue": "files", "steps": [{"name": "copy"}]}


class Files(BaseModel):
    count: int = 100


def copying() -> Catalogue:
    catalogue = Catalogue("files")

    @catalogue.pivot()
    async def copy(args: Files, ctx: StepContext) -> dict[str, int]:
        return {"copied": args.count}

    return catalogue


async def submitted(inproc: InProcess, saga_id: str) -> None:
    async with SQLiteStore(inproc.ledger) as store:
        await Orchestrator(store, copying()).submit(parse_plan(PLAN), saga_id=saga_id)


async def beat(inproc: InProcess, name: str, *, stopped: bool = False) -> None:
    async with SQLiteStore(inproc.ledger) as store:
        now = await store.ledger_time()
        await store.start_worker(name, now, version="1", catalogues=["files"], beat_every=5.0)
        if stopped:
            await store.beat_worker(name, now, stopped=True)


def test_a_submitted_saga_with_no_worker_alive_says_what_to_run(inproc: InProcess) -> None:
    asyncio.run(submitted(inproc, "wait"))
    asyncio.run(beat(inproc, "w-1", stopped=True))  # the only worker stopped

    flat = " ".join(inproc.ok("sagas", "show", "wait").split())
    assert "No worker is alive to run this saga (submitted" in flat
    assert "UTC, it was never claimed): start one with" in flat
    assert f"`pivotal --db sqlite:///{inproc.ledger} --example-app worker`" in flat
    data = inproc.json("sagas", "show", "wait")
    assert data["no_worker"].startswith("No worker is alive to run this saga (submitted at ")

    asyncio.run(beat(inproc, "w-2"))  # a worker alive: it will claim it
    assert "No worker" not in inproc.ok("sagas", "show", "wait")
    assert inproc.json("sagas", "show", "wait")["no_worker"] is None


def test_watch_into_a_pipe_writes_each_change_as_a_line(
    inproc: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(submitted(inproc, "piped"))
    looks = 0
    read = sagas_cli.read_saga

    async def each_look_moves_it(store: SQLiteStore, saga_id: str, run: str) -> sagas_cli.Shown:
        """The world between two looks: a worker starts, then it runs the saga."""
        nonlocal looks
        looks += 1
        if looks == 2:
            now = await store.ledger_time()
            await store.start_worker("w-1", now, version="1", catalogues=["files"], beat_every=5)
        if looks == 3:
            assert (await Orchestrator(store, copying()).run(saga_id)).status is (
                SagaStatus.COMPLETED
            )
        return await read(store, saga_id, run)

    monkeypatch.setattr(sagas_cli, "read_saga", each_look_moves_it)
    monkeypatch.setattr(sagas_cli, "WATCH_EVERY", 0.0)

    watched = inproc.ok("sagas", "show", "piped", "--watch")

    assert looks == 3
    assert "\x1b[" not in watched  # plain text: no cursor moves, no colours
    first, _, changes = watched.partition("events")  # the whole view once, then each change
    assert "No worker is alive to run this saga" in first
    lines = [line for line in changes.splitlines() if line.startswith(("piped:", "step", "it"))]
    assert lines == [
        "it no longer waits for a worker",
        "piped: completed",
        "step 0 copy: succeeded, try 1",
    ]
