"""Long work on the command line: `sagas show` gives the report of a call in progress (with
its attempt, how long it ran and the worker holding the lease), in the table and in JSON;
`sagas show --watch` follows a saga until it is at rest."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from cli_harness import InProcess
from pydantic import BaseModel

from pivotal import Catalogue, FakeClock, Orchestrator, SagaStatus, StepContext, parse_plan
from pivotal.hooks import Point
from pivotal.store import SQLiteStore
from pivotal.testing.crash import CrashAt, CrashSite, SimulatedCrash


class Files(BaseModel):
    count: int = 100


def copying() -> Catalogue:
    catalogue = Catalogue("files")

    @catalogue.pivot()
    async def copy(args: Files, ctx: StepContext) -> dict[str, int]:
        return {"copied": args.count}

    return catalogue


async def in_progress(inproc: InProcess, saga_id: str) -> None:
    """A saga whose call is in progress on worker w-1, which reported 40 of 100 files."""
    plan = parse_plan({"catalogue": "files", "steps": [{"name": "copy"}]})
    async with SQLiteStore(inproc.ledger) as store:
        crash = CrashAt(CrashSite(Point.AFTER_INTENT, 0))
        worker = Orchestrator(store, copying(), owner="w-1", hook=crash, lease_ttl=600)
        with pytest.raises(SimulatedCrash):
            await worker.execute(plan, saga_id=saga_id)
        lease = await store.lease_of(saga_id)
        assert lease is not None
        began = time.time() - 75
        report = {"message": "copying", "done": 40, "total": 100, "attempt": 1}
        assert await store.record_progress(
            saga_id, 0, report | {"since": began, "at": began + 60}, epoch=lease[1]
        )


def test_show_gives_the_report_of_the_call_in_progress(inproc: InProcess) -> None:
    asyncio.run(in_progress(inproc, "copy"))

    shown = inproc.ok("sagas", "show", "copy")
    flat = " ".join(shown.split())  # the table folds the line
    # the report is 75 s and 15 s old when written; reading it takes a moment more
    shown_line = r"40 of 100 \(40%\) · copying · attempt 1, running 1m \d+s · reported \d+s ago"
    assert re.search(shown_line, flat), flat
    assert "held by w-1" in flat
    assert max(len(line) for line in shown.splitlines()) <= 80

    data = inproc.json("sagas", "show", "copy")
    assert data["progress"]["0"]["done"] == 40
    assert data["progress"]["0"]["fraction"] == 0.4
    assert data["progress"]["0"]["text"].endswith("held by w-1")


def test_watch_follows_the_saga_until_it_is_at_rest(inproc: InProcess) -> None:
    asyncio.run(in_progress(inproc, "copy"))

    async def finish() -> None:
        async with SQLiteStore(inproc.ledger) as store:
            later = FakeClock(time.time() + 1000)  # past the lease and the call's doubt
            other = Orchestrator(store, copying(), clock=later, owner="w-2", lease_ttl=600)
            await store.expire_leases(later.now())
            assert (await other.run("copy")).status is SagaStatus.COMPLETED

    asyncio.run(finish())
    watched = inproc.ok("sagas", "show", "copy", "--watch")  # at rest: shown once, then ends
    assert "completed" in watched
    assert "copying" not in watched  # the finished call's report is gone

    refused = inproc("sagas", "show", "copy", "--watch", "--json")
    assert refused.exit_code == 2
    assert "--watch shows a table" in refused.stderr


def test_a_call_whose_worker_is_gone_is_not_shown_running(inproc: InProcess) -> None:
    async def quiet() -> None:  # w-1 went quiet after the intent, 1000 s ago on the ledger
        plan = parse_plan({"catalogue": "files", "steps": [{"name": "copy"}]})
        async with SQLiteStore(inproc.ledger) as store:
            crash = CrashAt(CrashSite(Point.AFTER_INTENT, 0))
            then = FakeClock(time.time() - 1000)
            worker = Orchestrator(store, copying(), clock=then, owner="w-1", hook=crash)
            with pytest.raises(SimulatedCrash):
                await worker.execute(plan, saga_id="quiet")

    asyncio.run(quiet())

    flat = " ".join(inproc.ok("sagas", "show", "quiet").split())
    assert "ended, unrecorded · attempt 1 · no live holder (w-1's lease expired" in flat
    assert "running" not in flat.split("steps", 1)[1]
    assert "held by" not in flat
    data = inproc.json("sagas", "show", "quiet")
    assert data["progress"]["0"]["state"] == "ended_unrecorded"
