"""A rolling deploy: workers of an older build, whose catalogue lacks a step the newer
sagas use (or gives it another kind, or lacks the whole catalogue), share the ledger with
workers of the newer build. An old worker never runs such a saga, never counts its claims
as passes without progress (so nobody parks the healthy saga as poison), does not claim it
again in a hot loop, and says why in the ledger; a worker of the newer build completes it.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from pivotal import (
    Catalogue,
    FakeClock,
    Orchestrator,
    SagaStatus,
    SQLiteStore,
    StepContext,
    parse_plan,
)
from pivotal.cli import cli as pivotal_cli
from pivotal.observability.metrics import PivotalMetrics
from pivotal.operations.worker import Worker, WorkerConfig
from pivotal.store import Store
from pivotal.testing.ledger import FlakyStore

BOUND = 30.0  # a safety net against a hang, never what a test measures
ROUNDS = 300  # looks for work by the old worker while it is alone with the sagas
TICK = 1.0  # seconds the fake clock moves on at each look for work


class Args(BaseModel):
    n: int = 1


class ArgsV2(BaseModel):
    n: int = 1
    note: str = ""


Calls = list[tuple[str, str, str]]  # (build, step, saga id)


def rolling(build: str, calls: Calls, *, b: str | None = "compensable", name: str = "rolling"):
    """The catalogue ``name`` as build ``build`` has it: step ``a`` always; step ``b`` of
    kind ``b`` (None: the build predates it). Every action call is noted in ``calls``."""
    catalogue = Catalogue(name)

    async def undo(args: Args, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo)
    async def a(args: Args, ctx: StepContext) -> dict[str, str]:
        calls.append((build, "a", ctx.saga_id))
        return {"a": build}

    async def b_action(args: Args, ctx: StepContext) -> dict[str, str]:
        calls.append((build, "b", ctx.saga_id))
        return {"b": build}

    if b == "compensable":
        catalogue.compensable(undo=undo, name="b")(b_action)
    elif b == "pivot":
        catalogue.pivot(name="b")(b_action)
    return catalogue


def plan_of(catalogue: str, *steps: str) -> Any:
    return parse_plan({"catalogue": catalogue, "steps": [{"name": s} for s in steps]})


class Counting(FlakyStore):
    """The ledger, with every ``claim_next`` through it recorded (the saga ids it took);
    each look for work moves the fake clock on by ``tick`` seconds."""

    def __init__(self, inner: Store, clock: FakeClock, tick: float = 0.0) -> None:
        super().__init__(inner, [])
        self.clock = clock
        self.tick = tick
        self.claims: list[list[str]] = []

    async def claim_next(  # type: ignore[override]
        self, owner: str, ttl: float, now: float, limit: int, **filters: Any
    ) -> list[tuple[str, int]]:
        taken = await self.inner.claim_next(owner, ttl, now, limit, **filters)
        self.claims.append(sorted(s for s, _ in taken))
        self.clock.advance(self.tick)
        return taken

    def claimed(self, saga_id: str) -> int:
        return sum(taken.count(saga_id) for taken in self.claims)


async def eventually(predicate: Callable[[], Any]) -> None:
    async with asyncio.timeout(BOUND):
        while True:
            held = predicate()
            if asyncio.iscoroutine(held):
                held = await held
            if held:
                return
            await asyncio.sleep(0.005)


async def status_of(store: Store, saga_id: str) -> SagaStatus:
    found = await store.load(saga_id)
    assert found is not None
    return found.state.status


FAST = WorkerConfig(poll_interval=0.001, sweep_interval=3600.0)


@pytest.mark.parametrize("old_b", [None, "pivot"], ids=["step-missing", "kind-changed"])
async def test_an_old_worker_never_runs_nor_poisons_what_only_a_new_one_can_serve(
    store: Store, clock: FakeClock, old_b: str | None
) -> None:
    calls: Calls = []
    new = Orchestrator(store, rolling("new", calls), clock=clock, owner="new", rng=random.Random(0))
    metrics = PivotalMetrics()
    counting = Counting(store, clock, tick=TICK)
    old = Orchestrator(
        counting,
        rolling("old", calls, b=old_b),
        clock=clock,
        owner="old",
        rng=random.Random(0),
        telemetry=[metrics],
    )
    uses_b = [f"ab-{n}" for n in range(3)]
    for saga_id in uses_b:
        await new.submit(plan_of("rolling", "a", "b"), saga_id=saga_id)
    await new.submit(plan_of("rolling", "a"), saga_id="a-only")  # the old build serves it

    old_worker = Worker(old, FAST)
    old_running = asyncio.create_task(old_worker.run())
    await eventually(lambda: len(counting.claims) >= ROUNDS)
    # Stopped before the ledger is read: a claim it made meanwhile, not yet given back,
    # would hold a lease and a pass without progress that its give-back takes back.
    old_worker.stop()
    await asyncio.wait_for(old_running, BOUND)

    # Hundreds of looks for work, hundreds of seconds on the clock: the old worker ran what
    # it can serve, and never began a saga that needs what it lacks.
    assert await status_of(store, "a-only") is SagaStatus.COMPLETED
    assert [c for c in calls if c[2] in uses_b] == []
    refusals = 0
    for saga_id in uses_b:
        claimed = counting.claimed(saga_id)
        refusals += claimed
        assert 1 <= claimed <= 12, (saga_id, claimed)  # backed off: no hot loop
        stored = await store.load(saga_id)
        assert stored is not None
        assert stored.state.status is SagaStatus.SUBMITTED  # never parked as poison
        assert stored.idle_passes == 0  # a refusal is no pass without progress
        assert stored.last_error is not None
        assert "worker old cannot serve it" in stored.last_error
        assert "'b'" in stored.last_error
        assert "'rolling'" in stored.last_error
        if old_b is None:
            assert "is not in its catalogue" in stored.last_error
        else:
            assert "pivot" in stored.last_error
            assert "compensable" in stored.last_error
        assert (await store.lease_of(saga_id) or ("?",))[0] is None  # released
    assert old_worker.stats.errors == 0
    sample = metrics.registry.get_sample_value
    assert sample("pivotal_sagas_unserved_total", {"catalogue": "rolling"}) == refusals
    assert (sample("pivotal_poison_sagas_total", {"catalogue": "rolling"}) or 0) == 0

    # The new build arrives beside the old one: it completes them, each step once.
    old_worker = Worker(old, FAST)
    old_running = asyncio.create_task(old_worker.run())
    new_worker = Worker(new, FAST)
    new_running = asyncio.create_task(new_worker.run())

    async def all_completed() -> bool:
        return all([await status_of(store, s) is SagaStatus.COMPLETED for s in uses_b])

    await eventually(all_completed)
    new_worker.stop()
    old_worker.stop()
    await asyncio.wait_for(asyncio.gather(new_running, old_running), BOUND)
    for saga_id in uses_b:
        assert sorted(c for c in calls if c[2] == saga_id) == [
            ("new", "a", saga_id),
            ("new", "b", saga_id),
        ]
        stored = await store.load(saga_id)
        assert stored is not None
        assert (stored.idle_passes, stored.last_error) == (0, None)
        events = await store.events(saga_id)
        assert not [e for e in events if e.type.value == "saga_needs_human"]


async def test_a_worker_serving_only_catalogue_a_never_claims_sagas_of_b(
    store: Store, clock: FakeClock
) -> None:
    calls: Calls = []
    of_b = Orchestrator(store, rolling("b", calls, name="B"), clock=clock, owner="submitter")
    for n in range(3):
        await of_b.submit(plan_of("B", "a", "b"), saga_id=f"b-{n}")
    counting = Counting(store, clock, tick=TICK)
    only_a = Orchestrator(counting, rolling("a", calls, name="A"), clock=clock, owner="w-a")
    await of_b.submit(plan_of("B", "a"), saga_id="b-short")
    await Orchestrator(store, rolling("x", calls, name="A"), clock=clock).submit(
        plan_of("A", "a", "b"), saga_id="a-1"
    )

    worker = Worker(only_a, FAST)
    running = asyncio.create_task(worker.run())
    await eventually(lambda: len(counting.claims) >= ROUNDS)
    worker.stop()
    await asyncio.wait_for(running, BOUND)

    claimed = {s for taken in counting.claims for s in taken}
    assert claimed == {"a-1"}
    assert await status_of(store, "a-1") is SagaStatus.COMPLETED
    for saga_id in ("b-0", "b-1", "b-2", "b-short"):
        stored = await store.load(saga_id)
        assert stored is not None
        assert stored.state.status is SagaStatus.SUBMITTED
        assert (stored.idle_passes, stored.last_error) == (0, None)
        assert await store.lease_of(saga_id) == (None, 0, None)  # never leased, by anyone
    assert [c for c in calls if c[2].startswith("b-")] == []
    assert worker.stats.errors == 0


async def test_a_worker_until_idle_stops_when_only_sagas_it_cannot_serve_are_left(
    store: Store, clock: FakeClock
) -> None:
    calls: Calls = []
    new = Orchestrator(store, rolling("new", calls), clock=clock, owner="new")
    await new.submit(plan_of("rolling", "a", "b"), saga_id="needs-b")
    other = Orchestrator(store, rolling("other", calls, name="other"), clock=clock)
    await other.submit(plan_of("other", "a"), saga_id="other-1")
    old = Orchestrator(store, rolling("old", calls, b=None), clock=clock, owner="old")

    stats = await asyncio.wait_for(Worker(old, FAST).run(until_idle=True), BOUND)

    assert stats.finished == {}
    assert calls == []
    for saga_id in ("needs-b", "other-1"):
        stored = await store.load(saga_id)
        assert stored is not None
        assert (stored.state.status, stored.idle_passes) == (SagaStatus.SUBMITTED, 0)


async def test_running_a_saga_this_process_cannot_serve_is_refused_and_not_counted(
    store: Store, clock: FakeClock
) -> None:
    calls: Calls = []
    new = Orchestrator(store, rolling("new", calls), clock=clock, owner="new")
    await new.submit(plan_of("rolling", "a", "b"), saga_id="s")
    old = Orchestrator(store, rolling("old", calls, b=None), clock=clock, owner="old")

    for _ in range(old.poison_after + 3):
        with pytest.raises(Exception, match="cannot serve it") as refused:
            await old.run("s")
        assert getattr(refused.value, "code", None) == "saga_unserved"

    stored = await store.load("s")
    assert stored is not None
    assert (stored.state.status, stored.idle_passes) == (SagaStatus.SUBMITTED, 0)
    assert await store.lease_of("s") == (None, old.poison_after + 3, None)
    assert calls == []
    state = await new.run("s")  # not poison: it runs
    assert state.status is SagaStatus.COMPLETED


def ledger_url(store: Store, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if isinstance(store, SQLiteStore):
        return f"sqlite:///{store.path}"
    url: str = request.getfixturevalue("postgres_url")
    return url


async def test_the_refusal_and_the_catalogue_digest_are_shown_by_sagas_show(
    store: Store, clock: FakeClock, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    calls: Calls = []
    new = Orchestrator(store, rolling("new", calls), clock=clock, owner="new")
    await new.submit(plan_of("rolling", "a", "b"), saga_id="s")
    submitted = (await store.events("s"))[0].data
    assert [(s["name"], s["kind"]) for s in submitted["steps"]] == [
        ("a", "compensable"),
        ("b", "compensable"),
    ]
    digest = submitted["catalogue_digest"]
    assert isinstance(digest, str)
    assert len(digest) >= 12
    old = Orchestrator(store, rolling("old", calls, b=None), clock=clock, owner="old-7")
    await asyncio.wait_for(Worker(old, FAST).run(until_idle=True), BOUND)
    stored = await store.load("s")
    assert stored is not None
    assert stored.last_error is not None

    runner = CliRunner()
    url = ledger_url(store, request, tmp_path)

    def show(*extra: str) -> str:
        done = runner.invoke(pivotal_cli, ["--db", url, "sagas", "show", "s", *extra])
        assert done.exit_code == 0, (done.stdout, done.stderr)
        return done.stdout

    text = await asyncio.to_thread(show)
    flat = " ".join(text.replace("│", " ").split())
    assert "worker old-7 cannot serve it: step 'b' is not in its catalogue 'rolling'" in flat
    assert digest in flat
    shown = json.loads(await asyncio.to_thread(show, "--json"))
    assert shown["last_error"] == stored.last_error
    assert shown["catalogue_digest"] == digest


async def test_the_catalogue_digest_follows_step_names_kinds_and_argument_schemas(
    store: Store, clock: FakeClock
) -> None:
    calls: Calls = []
    found: dict[str, str] = {}
    variants = {
        "same-1": rolling("x", calls),
        "same-2": rolling("y", calls),
        "pivot-b": rolling("x", calls, b="pivot"),
    }
    wider = rolling("x", calls, b=None)

    async def undo(args: ArgsV2, result: Any, ctx: StepContext) -> None:
        return None

    async def b_v2(args: ArgsV2, ctx: StepContext) -> dict[str, str]:
        return {}

    wider.compensable(undo=undo, name="b")(b_v2)
    variants["wider-args"] = wider
    for n, (label, catalogue) in enumerate(variants.items()):
        orch = Orchestrator(store, catalogue, clock=clock)
        await orch.submit(plan_of("rolling", "a"), saga_id=f"d-{n}")
        found[label] = (await store.events(f"d-{n}"))[0].data["catalogue_digest"]

    assert found["same-1"] == found["same-2"]  # built twice, the same catalogue
    assert found["pivot-b"] != found["same-1"]
    assert found["wider-args"] != found["same-1"]


async def test_the_ledger_claims_by_catalogue_passes_over_skipped_sagas_and_uncounts(
    store: Store, clock: FakeClock
) -> None:
    calls: Calls = []
    for name in ("A", "B"):
        orch = Orchestrator(store, rolling("x", calls, name=name), clock=clock)
        for n in range(2):
            await orch.submit(plan_of(name, "a"), saga_id=f"{name}-{n}")
    now, ttl = clock.now(), 30.0

    assert await store.claim_next("w", ttl, now, 10, catalogues=[]) == []
    taken = await store.claim_next("w", ttl, now, 10, catalogues=["A", "C"], skip=["A-0"])
    assert [s for s, _ in taken] == ["A-1"]
    taken += await store.claim_next("w", ttl, now, 10, catalogues=["B"])
    assert sorted(s for s, _ in taken) == ["A-1", "B-0", "B-1"]
    epochs = dict(taken)

    await store.release("B-0", epochs["B-0"], "worker w cannot serve it: …", counted=False)
    await store.release("B-1", epochs["B-1"], "it failed")  # a pass that counts
    b0, b1 = await store.load("B-0"), await store.load("B-1")
    assert b0 is not None
    assert b1 is not None
    assert (b0.idle_passes, b0.last_error) == (0, "worker w cannot serve it: …")
    assert (b1.idle_passes, b1.last_error) == (1, "it failed")
    assert (await store.lease_of("B-0") or ("?",))[0] is None
    # never below nothing: a decision may have reset the count meanwhile
    [(_, epoch)] = await store.claim_next("w", ttl, now, 10, skip=["A-0", "B-1"])
    await store.release("B-0", epoch, "again", counted=False)
    await store.release("B-0", epoch, "and again", counted=False)
    b0 = await store.load("B-0")
    assert b0 is not None
    assert (b0.idle_passes, b0.last_error) == (0, "and again")
