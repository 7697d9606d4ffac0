"""``max_active``: at most that many passes of ``execute``/``run`` at once per orchestrator.

The others wait their turn in order, before anything is checked or written, so a burst of
calls holds only the calls themselves; a saga started from inside a step never waits (it
would otherwise wait for the very pass that waits for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    InvalidInput,
    Orchestrator,
    SagaState,
    SagaStatus,
    SQLiteStore,
    StepContext,
)
from pivotal.declarations.plan import Plan


class Item(BaseModel):
    n: int = 0


class Held:
    """A step that records its start and waits until the test lets it go."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.release = asyncio.Event()
        self.changed = asyncio.Condition()
        self.children: list[str] = []
        self.orch: Orchestrator | None = None

    async def wait_for(self, n: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: len(self.started) >= n)

    def catalogue(self) -> Catalogue:
        cat = Catalogue("admit")

        async def undo(args: Item, result: object, ctx: StepContext) -> None:
            return None

        @cat.compensable(undo=undo)
        async def hold(args: Item, ctx: StepContext) -> dict[str, int]:
            async with self.changed:
                self.started.append(args.n)
                self.changed.notify_all()
            await self.release.wait()
            return {"n": args.n}

        @cat.compensable(undo=undo)
        async def spawn(args: Item, ctx: StepContext) -> dict[str, str]:
            assert self.orch is not None
            child = await self.orch.execute(plan("hold", args.n + 100), saga_id=f"child-{args.n}")
            self.children.append(child.status.value)
            return {"child": child.saga_id}

        return cat


def plan(step: str, n: int) -> Plan:
    return Plan.model_validate({"catalogue": "admit", "steps": [{"name": step, "args": {"n": n}}]})


def start(orch: Orchestrator, n: int) -> asyncio.Future[SagaState]:
    return asyncio.ensure_future(orch.execute(plan("hold", n), saga_id=f"s{n}"))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "ledger.db") as s:
        yield s


async def test_no_more_than_max_active_run_at_once_and_the_rest_go_in_order(
    store: SQLiteStore,
) -> None:
    held = Held()
    orch = Orchestrator(store, held.catalogue(), max_active=2)
    calls = [start(orch, n) for n in range(5)]
    await held.wait_for(2)
    for _ in range(20):  # give the waiting calls every chance to start: none may
        await asyncio.sleep(0)
    assert held.started == [0, 1]
    # a waiting call has written nothing yet
    assert [await store.load(f"s{n}") for n in range(2, 5)] == [None, None, None]
    held.release.set()
    states = await asyncio.gather(*calls)
    assert [s.status for s in states] == [SagaStatus.COMPLETED] * 5
    assert sorted(held.started[:2]) == [0, 1]
    assert held.started[2:] == [2, 3, 4]


async def test_a_saga_started_from_a_step_is_admitted_at_once(store: SQLiteStore) -> None:
    held = Held()
    held.release.set()
    orch = held.orch = Orchestrator(store, held.catalogue(), max_active=1)
    state = await asyncio.wait_for(orch.execute(plan("spawn", 1), saga_id="parent"), 30)
    assert state.status is SagaStatus.COMPLETED
    assert held.children == ["completed"]


async def test_a_cancelled_waiting_call_writes_nothing_and_frees_no_slot_it_never_had(
    store: SQLiteStore,
) -> None:
    held = Held()
    orch = Orchestrator(store, held.catalogue(), max_active=1)
    first = asyncio.ensure_future(orch.execute(plan("hold", 0), saga_id="first"))
    await held.wait_for(1)
    waiting = asyncio.ensure_future(orch.execute(plan("hold", 1), saga_id="waiting"))
    third = asyncio.ensure_future(orch.execute(plan("hold", 2), saga_id="third"))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await store.load("waiting") is None
    held.release.set()
    assert (await first).status is SagaStatus.COMPLETED
    assert (await third).status is SagaStatus.COMPLETED
    assert held.started == [0, 2]


async def test_unbounded_when_max_active_is_none(store: SQLiteStore) -> None:
    held = Held()
    orch = Orchestrator(store, held.catalogue(), max_active=None)
    calls = [start(orch, n) for n in range(5)]
    await held.wait_for(5)
    held.release.set()
    assert all(s.status is SagaStatus.COMPLETED for s in await asyncio.gather(*calls))


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "4"])
async def test_a_bad_max_active_is_refused(store: SQLiteStore, bad: object) -> None:
    with pytest.raises(InvalidInput, match="max_active"):
        Orchestrator(store, Held().catalogue(), max_active=bad)  # type: ignore[arg-type]
