"""Long work reports progress (``ctx.progress``): kept on the step's row under the lease,
which it renews; at most once a second; refused with a reason when malformed; a report
from a holder whose lease was taken over stops it; a report the ledger cannot keep is
dropped while the call goes on."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    LeaseLost,
    Orchestrator,
    ProgressError,
    SagaStatus,
    StepContext,
    StoreError,
    parse_plan,
)
from pivotal.sagas.lease import LeaseKeeper
from pivotal.sagas.progress import EVERY, check, describe
from pivotal.sagas.state import StepStatus

BOUND = 30.0  # a safety net against a hang, never what a test measures
TTL = 10.0


class Files(BaseModel):
    count: int = 3


class Copier:
    """A step that copies files one at a time, reporting each, and waits for the test
    between two files."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.reported = asyncio.Event()
        self.go_on = asyncio.Event()
        self.errors: list[BaseException] = []

    async def copy(self, args: Files, ctx: StepContext) -> dict[str, int]:
        for done in range(args.count):
            try:
                await ctx.progress(f"copying file {done + 1}", done=done, total=args.count)
            except LeaseLost as exc:
                self.errors.append(exc)
                raise
            self.reported.set()
            await self.go_on.wait()
            self.go_on.clear()
        return {"copied": args.count}

    async def next_file(self) -> None:
        await asyncio.wait_for(self.reported.wait(), BOUND)
        self.reported.clear()


def copying(copier: Copier) -> Catalogue:
    catalogue = Catalogue("files", default_timeout=3600)

    @catalogue.pivot()
    async def copy(args: Files, ctx: StepContext) -> dict[str, int]:
        return await copier.copy(args, ctx)

    return catalogue


def plan(count: int = 3) -> Any:
    return parse_plan({"catalogue": "files", "steps": [{"name": "copy", "args": {"count": count}}]})


async def test_a_report_is_kept_with_its_attempt_and_renews_the_lease(store, clock) -> None:
    copier = Copier(clock)
    orchestrator = Orchestrator(store, copying(copier), clock=clock, owner="w-1", lease_ttl=TTL)
    began = clock.now()
    task = asyncio.create_task(orchestrator.execute(plan(), saga_id="copy"))

    await copier.next_file()
    [record] = (await store.progress_of("copy")).values()
    assert record == {
        "message": "copying file 1",
        "done": 0,
        "total": 3,
        "attempt": 1,
        "since": began,
        "at": began,
    }

    clock.advance(TTL * 0.9)  # nearly out: the next report renews the lease with it
    copier.go_on.set()
    await copier.next_file()
    owner, _, expires = await store.lease_of("copy") or (None, 0, None)
    assert owner == "w-1"
    assert expires == clock.now() + TTL
    stored = await orchestrator.get("copy")
    step = stored.state.steps[0]
    assert step.status is StepStatus.STARTED
    progress = await store.progress_of("copy")
    shown = describe(step, progress[0], clock.now() + 5, owner)
    assert shown is not None
    assert shown.fraction == pytest.approx(1 / 3)
    assert shown.text == (
        "in flight · 1 of 3 (33%) · copying file 2 · attempt 1, running 14s · "
        "reported 5s ago · held by w-1"
    )

    copier.go_on.set()
    await copier.next_file()
    copier.go_on.set()
    state = await asyncio.wait_for(task, BOUND)
    assert state.status is SagaStatus.COMPLETED
    done = (await orchestrator.get("copy")).state.steps[0]
    assert describe(done, (await store.progress_of("copy"))[0], clock.now(), None) is None


async def test_reports_are_kept_at_most_once_a_second(store, clock) -> None:
    catalogue = Catalogue("files")

    @catalogue.pivot()
    async def copy(args: Files, ctx: StepContext) -> None:
        await ctx.progress("first")
        await ctx.progress("second, too soon")
        clock.advance(EVERY)
        await ctx.progress("third, a second later")
        await ctx.progress("fourth, too soon")

    orchestrator = Orchestrator(store, catalogue, clock=clock)
    state = await orchestrator.execute(plan(), saga_id="often")

    assert state.status is SagaStatus.COMPLETED
    assert (await store.progress_of("often"))[0]["message"] == "third, a second later"


@pytest.mark.parametrize(
    ("message", "done", "total", "why"),
    [
        ("x" * 501, None, None, "at most 500 characters"),
        (3, None, None, "at most 500 characters"),
        ("", True, None, "done is a number"),
        ("", "4", None, "done is a number"),
        ("", float("nan"), None, "finite number"),
        ("", -1, None, "finite number"),
        ("", 5, 3, "done (5) is more than its total (3)"),
        ("", None, 3, "says how much is done"),
    ],
)
def test_a_malformed_report_is_refused_with_its_reason(message, done, total, why) -> None:
    with pytest.raises(ProgressError, match=re.escape(why)):
        check(message, done, total)


async def test_a_malformed_report_fails_the_call_and_keeps_nothing(store, clock) -> None:
    catalogue = Catalogue("files")

    @catalogue.pivot()
    async def copy(args: Files, ctx: StepContext) -> None:
        await ctx.progress("half", done=5, total=3)

    orchestrator = Orchestrator(store, catalogue, clock=clock)
    state = await orchestrator.execute(plan(), saga_id="bad")

    assert "done (5) is more than its total (3)" in (state.steps[0].error or "")
    assert await store.progress_of("bad") == {}


async def test_a_report_after_the_lease_was_taken_over_stops_the_call(store, clock) -> None:
    copier = Copier(clock)
    a = Orchestrator(store, copying(copier), clock=clock, owner="A", lease_ttl=TTL)
    await a.submit(plan(count=2), saga_id="taken")
    epoch = await store.claim("taken", "A", TTL, clock.now())
    assert epoch is not None
    task = asyncio.create_task(a.drive("taken", epoch))
    await copier.next_file()

    clock.advance(TTL + 1)  # A was paused past its lease: B takes the saga over
    assert await store.claim("taken", "B", TTL, clock.now()) == epoch + 1
    copier.go_on.set()

    with pytest.raises(LeaseLost):
        await asyncio.wait_for(task, BOUND)
    assert len(copier.errors) == 1  # the report told the call, which stopped
    record = (await store.progress_of("taken"))[0]
    assert record["message"] == "copying file 1"  # A's late report was not kept


async def test_the_keepers_report_renews_or_loses_the_lease(store, clock) -> None:
    a = Orchestrator(store, copying(Copier(clock)), clock=clock, owner="A", lease_ttl=TTL)
    await a.submit(plan(), saga_id="kept")
    keeper = LeaseKeeper(store, "A", clock)
    lease = await keeper.acquire("kept", TTL)
    assert lease is not None
    keeper.forget(lease)  # no heartbeat: only the reports renew it here

    clock.advance(TTL / 2)
    await keeper.report(lease, 0, {"message": "half", "attempt": 1, "since": 0, "at": 0})
    assert lease.expires == clock.now() + TTL
    assert (await store.lease_of("kept") or ())[2] == clock.now() + TTL

    clock.advance(TTL + 1)
    assert await store.claim("kept", "B", TTL, clock.now()) == lease.epoch + 1
    with pytest.raises(LeaseLost):
        await keeper.report(lease, 0, {"message": "late", "attempt": 1, "since": 0, "at": 0})
    assert lease.lost
    assert (await store.progress_of("kept"))[0]["message"] == "half"


async def test_a_report_the_ledger_cannot_keep_is_dropped_and_the_call_goes_on(
    store, clock, monkeypatch, caplog
) -> None:
    catalogue = Catalogue("files")

    @catalogue.pivot()
    async def copy(args: Files, ctx: StepContext) -> dict[str, bool]:
        await ctx.progress("halfway", done=1, total=2)
        return {"copied": True}

    async def unreachable(*args: Any, **kwargs: Any) -> bool:
        raise StoreError("the ledger did not answer")

    monkeypatch.setattr(store, "record_progress", unreachable)
    orchestrator = Orchestrator(store, catalogue, clock=clock)
    state = await orchestrator.execute(plan(), saga_id="dropped")

    assert state.status is SagaStatus.COMPLETED
    assert "progress of saga dropped step 0 dropped: the ledger did not answer" in caplog.text


def test_a_context_nobody_keeps_still_checks_its_reports() -> None:
    ctx = StepContext(saga_id="s", index=0, step="copy", key="s:0", action_key="s:0", attempt=1)
    with pytest.raises(ProgressError):
        asyncio.run(ctx.progress(done=-1))
    asyncio.run(ctx.progress("fine", done=1, total=2))
