"""A worker's start and stop in-process: its name is its own while it lives (a second live
one is refused; a stopped or stale one's name is taken over), it records what it is, and
``abandon()`` stops waiting for the calls in flight, leaving them in doubt."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    Orchestrator,
    SagaStatus,
    StepContext,
    StepStatus,
    parse_plan,
)
from pivotal.operations.worker import (
    Worker,
    WorkerConfig,
    WorkerNameTaken,
    default_name,
    pivotal_version,
)
from pivotal.store import Store

IDLE = WorkerConfig(poll_interval=3600.0, sweep_interval=3600.0, lease_ttl=30.0)
FAST = WorkerConfig(poll_interval=0.01)
# beats (and tries a taken name again) every 0.1 s of real time: a waiting test stays short
EAGER = WorkerConfig(poll_interval=0.01, sweep_interval=3600.0, lease_ttl=0.3)
BOUND = 30.0  # a safety net against a hang, never what a test measures


class Args(BaseModel):
    n: int = 1


async def noop_undo(args: Args, result: Any, ctx: StepContext) -> None:
    return None


def gated() -> tuple[Catalogue, asyncio.Event, asyncio.Event]:
    """A catalogue whose one step says it started, then holds on until released."""
    started, release = asyncio.Event(), asyncio.Event()
    catalogue = Catalogue("gated")

    @catalogue.compensable(undo=noop_undo)
    async def hold(args: Args, ctx: StepContext) -> dict[str, bool]:
        started.set()
        await release.wait()
        return {"held": True}

    return catalogue, started, release


PLAN = parse_plan({"catalogue": "gated", "steps": [{"name": "hold"}]})


async def eventually(predicate: Callable[[], Any]) -> None:
    """Poll ``predicate`` until it holds; ``BOUND`` only turns a hang into a failure."""
    async with asyncio.timeout(BOUND):
        while True:
            if predicate():
                return
            await asyncio.sleep(0.01)


def test_the_default_name_is_host_and_pid() -> None:
    assert default_name() == f"{socket.gethostname()}-{os.getpid()}"


async def test_a_second_live_worker_with_one_name_says_so_and_waits_for_it(
    store: Store, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    catalogue, _, _ = gated()
    first = Worker(Orchestrator(store, catalogue, clock=clock, owner="w"), IDLE)
    running = asyncio.create_task(first.run())
    await eventually(lambda: first._started)

    second = Worker(Orchestrator(store, catalogue, clock=clock, owner="w"), EAGER)
    with caplog.at_level(logging.WARNING, logger="pivotal.worker"):
        waiting = asyncio.create_task(second.run())
        await eventually(lambda: "waiting to start" in caplog.text)
    assert not second._started  # it claims nothing while the name is another's
    message = caplog.text
    assert "a worker named 'w' is already running" in message
    assert "serving gated" in message
    assert "another --name" in message
    assert f"more than {3 * first.beat_interval:g}s old" in message
    assert message.count("waiting to start") == 1  # said once, not every beat

    first.stop()
    await asyncio.wait_for(running, BOUND)
    [w] = await store.list_workers(clock.now())
    assert w.stopped_at is not None  # the first one's stop, not spoilt by the waiting one
    await eventually(lambda: second._started)  # the name is free: the second one starts
    second.stop()
    await asyncio.wait_for(waiting, BOUND)


def test_the_refusal_names_the_holder() -> None:
    from pivotal.store.base import WorkerInfo

    holder = WorkerInfo(
        name="w", started_at=0.0, heartbeat_at=9.0, stopped_at=None, version="1.2",
        catalogues=("gated",), beat_every=1.0, leases=(),
    )  # fmt: skip
    refused = WorkerNameTaken.of(holder, 10.0)
    assert refused.code == "worker_name_taken"
    assert "its last heartbeat was 1.0s ago" in str(refused)


async def test_a_worker_records_what_it_is_and_that_it_stopped(
    store: Store, clock: FakeClock
) -> None:
    catalogue, _, _ = gated()
    worker = Worker(Orchestrator(store, catalogue, clock=clock, owner="me"), IDLE)
    running = asyncio.create_task(worker.run())
    await eventually(lambda: worker._started)
    [w] = await store.list_workers(clock.now())
    assert (w.name, w.version, w.catalogues) == ("me", pivotal_version(), ("gated",))
    assert (w.beat_every, w.state(clock.now())) == (worker.beat_interval, "alive")
    worker.stop()
    await asyncio.wait_for(running, BOUND)
    [w] = await store.list_workers(clock.now())
    assert w.state(clock.now()) == "stopped"


async def test_a_stopped_workers_name_starts_again(store: Store, clock: FakeClock) -> None:
    catalogue, _, _ = gated()
    orchestrator = Orchestrator(store, catalogue, clock=clock, owner="again")
    await asyncio.wait_for(Worker(orchestrator, FAST).run(until_idle=True), BOUND)
    clock.advance(1)
    await asyncio.wait_for(Worker(orchestrator, FAST).run(until_idle=True), BOUND)
    [w] = await store.list_workers(clock.now())
    assert (w.started_at, w.state(clock.now())) == (clock.now(), "stopped")


async def test_a_crashed_workers_name_is_taken_over_once_its_heartbeat_is_stale(
    store: Store, clock: FakeClock
) -> None:
    catalogue, _, _ = gated()
    beat = Worker(Orchestrator(store, catalogue, clock=clock), IDLE).beat_interval
    # a worker that crashed: it started, and never beat again nor said it stopped
    assert (
        await store.start_worker(
            "crashed", clock.now(), version="0", catalogues=["gated"], beat_every=beat
        )
        is None
    )
    restarted = Worker(Orchestrator(store, catalogue, clock=clock, owner="crashed"), EAGER)
    running = asyncio.create_task(restarted.run(until_idle=True))
    await asyncio.sleep(0.05)
    assert not restarted._started  # too soon: it may be alive, only slow

    clock.advance(3 * beat + 1)  # now it is stale: the restarted one takes the name over
    await asyncio.wait_for(running, BOUND)
    [w] = await store.list_workers(clock.now())
    assert (w.version, w.started_at) == (pivotal_version(), clock.now())


async def test_abandon_stops_waiting_and_leaves_the_call_in_doubt(
    store: Store, clock: FakeClock
) -> None:
    catalogue, started, release = gated()
    orchestrator = Orchestrator(store, catalogue, clock=clock, owner="quitter")
    await orchestrator.submit(PLAN, saga_id="g")
    worker = Worker(orchestrator, IDLE)
    running = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), BOUND)
    assert worker.in_flight == ["g"]

    worker.stop()  # the first Ctrl-C: it waits for the call in flight
    await asyncio.sleep(0)
    assert not running.done()
    worker.abandon()  # the second: it stops waiting
    stats = await asyncio.wait_for(running, BOUND)

    assert not release.is_set()  # the call never finished
    assert (stats.abandoned, worker.abandoned) == (1, ["g"])
    stored = await store.load("g")
    assert stored is not None
    assert stored.state.status is SagaStatus.RUNNING
    assert stored.state.steps[0].status is StepStatus.STARTED  # the intent says: in doubt
    lease = await store.lease_of("g")
    assert lease is not None
    assert lease[0] == "quitter"  # not released: it lapses
    [w] = await store.list_workers(clock.now())
    assert (w.state(clock.now()), w.leases) == ("stopped", ("g",))
    clock.advance(IDLE.lease_ttl + 1)
    assert (await store.list_workers(clock.now()))[0].leases == ()
