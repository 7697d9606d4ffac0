"""The workers a ledger knows (``start_worker``, ``list_workers``): the same on every backend.

A worker's name is taken while its worker is live (not stopped, its heartbeat not stale);
a stopped or stale one's name may be taken over (a restart after a crash)."""

from __future__ import annotations

import asyncio

from pivotal import FakeClock, Orchestrator
from pivotal.store import Store
from pivotal.store.base import MISSED_BEATS, UNKNOWN_BEAT_SPAN, WorkerInfo
from pivotal.store.primitives import SQLPrimitives, Stmt


async def start(store: Store, name: str, now: float, every: float = 10.0) -> WorkerInfo | None:
    return await store.start_worker(
        name, now, version="1.2.3", catalogues=["b", "a"], beat_every=every
    )


async def test_no_workers_lists_nothing(store: Store, clock: FakeClock) -> None:
    assert await store.list_workers(clock.now()) == []


async def test_a_started_worker_is_listed_with_what_it_is(store: Store, clock: FakeClock) -> None:
    t0 = clock.now()
    assert await start(store, "host-1", t0) is None
    await store.beat_worker("host-1", t0 + 7)

    [w] = await store.list_workers(t0 + 8)

    assert (w.name, w.started_at, w.heartbeat_at, w.stopped_at) == ("host-1", t0, t0 + 7, None)
    assert (w.version, w.catalogues, w.beat_every, w.leases) == ("1.2.3", ("a", "b"), 10.0, ())
    assert w.state(t0 + 8) == "alive"
    assert w.state(t0 + 7 + MISSED_BEATS * 10) == "alive"
    assert w.state(t0 + 7 + MISSED_BEATS * 10 + 0.01) == "stale"


async def test_a_live_name_is_refused_and_nothing_is_written(
    store: Store, clock: FakeClock
) -> None:
    t0 = clock.now()
    assert await start(store, "w", t0) is None
    await store.beat_worker("w", t0 + 20)

    holder = await store.start_worker(
        "w", t0 + 25, version="9.9", catalogues=["other"], beat_every=1.0
    )

    assert holder is not None
    assert (holder.name, holder.started_at, holder.heartbeat_at) == ("w", t0, t0 + 20)
    [w] = await store.list_workers(t0 + 25)
    assert (w.started_at, w.version, w.catalogues, w.beat_every) == (t0, "1.2.3", ("a", "b"), 10.0)


async def test_two_starts_at_once_under_one_name_take_it_once(
    store: Store, clock: FakeClock
) -> None:
    t0 = clock.now()
    results = await asyncio.gather(*(start(store, "same", t0) for _ in range(8)))
    assert sum(r is None for r in results) == 1


async def test_a_stopped_workers_name_is_taken_over(store: Store, clock: FakeClock) -> None:
    t0 = clock.now()
    assert await start(store, "w", t0) is None
    await store.beat_worker("w", t0 + 1, stopped=True)
    [w] = await store.list_workers(t0 + 2)
    assert (w.stopped_at, w.state(t0 + 2)) == (t0 + 1, "stopped")

    assert await store.start_worker("w", t0 + 2, version="2", catalogues=[], beat_every=5) is None

    [w] = await store.list_workers(t0 + 2)
    assert (w.started_at, w.stopped_at, w.version, w.catalogues) == (t0 + 2, None, "2", ())
    assert w.state(t0 + 2) == "alive"


async def test_a_stale_workers_name_is_taken_over_a_live_ones_is_not(
    store: Store, clock: FakeClock
) -> None:
    t0 = clock.now()
    assert await start(store, "w", t0, every=2.0) is None
    # exactly at the edge it is still live: refused
    assert await start(store, "w", t0 + MISSED_BEATS * 2.0) is not None
    # it missed its beats: crashed (or frozen); a restart takes the name
    assert await start(store, "w", t0 + MISSED_BEATS * 2.0 + 0.5) is None
    [w] = await store.list_workers(t0 + 7)
    assert w.started_at == t0 + MISSED_BEATS * 2.0 + 0.5


async def test_a_worker_beating_before_its_start_was_recorded_goes_stale_after_a_minute(
    store: Store, clock: FakeClock
) -> None:
    t0 = clock.now()
    await store.beat_worker("old", t0)  # an older Pivotal: no version, no interval
    [w] = await store.list_workers(t0)
    assert (w.version, w.catalogues, w.beat_every) == (None, (), None)
    assert await start(store, "old", t0 + UNKNOWN_BEAT_SPAN) is not None
    assert w.state(t0 + UNKNOWN_BEAT_SPAN + 1) == "stale"
    assert await start(store, "old", t0 + UNKNOWN_BEAT_SPAN + 1) is None


async def test_leases_held_are_listed_by_worker_and_expired_ones_are_not(
    store: Store,
    orchestrator: Orchestrator,
    clock: FakeClock,
    checkout_plan,
) -> None:
    for n in range(3):
        await orchestrator.submit(checkout_plan(f"o-{n}"), saga_id=f"s{n}")
    t0 = clock.now()
    assert await start(store, "a", t0) is None
    assert await start(store, "b", t0) is None
    assert await store.claim("s0", "a", 30, t0) is not None
    assert await store.claim("s2", "a", 30, t0) is not None
    assert await store.claim("s1", "b", 5, t0) is not None

    found = {w.name: w.leases for w in await store.list_workers(t0 + 1)}
    assert found == {"a": ("s0", "s2"), "b": ("s1",)}

    later = {w.name: w.leases for w in await store.list_workers(t0 + 6)}
    assert later == {"a": ("s0", "s2"), "b": ()}  # b's lease lapsed


async def test_the_latest_heartbeat_comes_first_and_the_limit_holds(
    store: Store, clock: FakeClock
) -> None:
    t0 = clock.now()
    for n in range(5):
        assert await start(store, f"w{n}", t0 + n) is None
    names = [w.name for w in await store.list_workers(t0 + 10, limit=3)]
    assert names == ["w4", "w3", "w2"]


async def test_a_garbled_catalogue_list_reads_as_none(store: Store, clock: FakeClock) -> None:
    assert isinstance(store, SQLPrimitives)
    t0 = clock.now()
    assert await start(store, "w", t0) is None
    await store._batch([Stmt("UPDATE workers SET catalogues = ? WHERE name = ?", ("{", "w"))])
    [w] = await store.list_workers(t0)
    assert w.catalogues == ()
