"""Faults of the stores' writers: one batch's failure, a batch queued at the wrong moment,
a creation whose reply was lost.

* Whatever one batch of a group raises (a value the driver cannot send, statements that
  cannot be built, any exception at all) fails that batch alone, as a ``StoreError``; every
  other batch of its group commits and hears back.
* A batch queued while the PostgreSQL writer hands its connection back is served, without
  waiting for another write to wake the writer.
* A creation whose reply was lost is resolved by its lease token: landed (the pass goes on,
  holding its lease) or someone else's, never "it exists already" on a guess; when it cannot
  be resolved, the pass ends without calling anything.

Every interleaving is forced (a writer held on an event, a hook), never raced on the clock;
a ``wait_for`` bound only turns a hang (the bug) into a failure.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, cast

import psycopg
import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    LeaseLost,
    Orchestrator,
    Plan,
    RetryPolicy,
    SagaConflict,
    SagaStatus,
    SQLiteStore,
    StepContext,
    StoreError,
    parse_plan,
)
from pivotal.sagas.state import Event, EventType, SagaState, apply
from pivotal.store import Store
from pivotal.store import postgres as pg
from pivotal.store import queries as q
from pivotal.store.pg_writer import stepwise
from pivotal.store.postgres import PostgresStore
from pivotal.store.primitives import BatchResult, Stmt

NOW = 1_800_000_000.0
TTL = 30.0
UNENCODABLE = "\ud800"  # a lone surrogate: no driver can encode it
HANG = 30.0  # seconds: only a bug waits this long (a served write takes milliseconds)


class Item(BaseModel):
    n: int = 0


class Effects:
    """What the provider saw: one entry per call, by idempotency key."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def catalogue(self) -> Catalogue:
        """Two one-attempt steps: an attempt recorded is an attempt spent."""
        catalogue = Catalogue("faults")
        once = RetryPolicy(max_attempts=1)

        async def undo(args: Item, result: Any, ctx: StepContext) -> None:
            self.calls.append(f"undo {ctx.key}")

        @catalogue.compensable(undo=undo, retry=once)
        async def reserve(args: Item, ctx: StepContext) -> dict[str, int]:
            self.calls.append(ctx.key)
            return {"n": args.n}

        return catalogue


def two_reserves(n: int = 0) -> Plan:
    steps = [{"name": "reserve", "args": {"n": n}}, {"name": "reserve", "args": {"n": n + 1}}]
    return parse_plan({"catalogue": "faults", "steps": steps})


async def leased(store: Store, n: int) -> list[tuple[SagaState, int]]:
    """``n`` submitted sagas, each claimed: (state, lease epoch)."""
    orch = Orchestrator(store, Effects().catalogue(), clock=FakeClock(NOW))
    found = []
    for i in range(n):
        state = await orch.submit(two_reserves(i), saga_id=f"s{i}")
        epoch = await store.claim(state.saga_id, "w1", TTL, NOW)
        assert epoch is not None
        found.append((state, epoch))
    return found


def started(state: SagaState) -> tuple[SagaState, Event]:
    """The saga's state after its first step's intent, and that event."""
    event = Event(
        type=EventType.STEP_STARTED,
        at=state.updated_at + 1,
        step=0,
        attempt=1,
        data={"key": f"{state.saga_id}:0"},
        seq=state.version + 1,
    )
    return apply(state, event), event


def unencodable(state: SagaState, where: str) -> tuple[SagaState, Event]:
    """A next state holding a string no driver can send: in the saga's row (one statement)
    or in a step's row (a multi-row statement)."""
    if where == "reason":
        after, event = started(state)
        return replace(after, reason=UNENCODABLE), event
    event = Event(
        type=EventType.STEP_FAILED,
        at=state.updated_at + 1,
        step=0,
        attempt=1,
        data={"error": f"the provider said {UNENCODABLE}", "outcome": "permanent"},
        seq=state.version + 1,
    )
    return apply(state, event), event


def commits(store: Store) -> int:
    """How many commits the store's writer made."""
    if isinstance(store, SQLiteStore):
        return store.writer.commits
    assert isinstance(store, PostgresStore)
    return store._writer.commits


async def one_group(store: Store, writes: Sequence[Awaitable[Any]]) -> list[Any]:
    """Run ``writes`` as one group of the store's writer: their results, or errors.

    On SQLite the writer thread is held inside a call while they queue; on PostgreSQL they
    queue before the writer's task first runs (it is started by the first of them)."""
    if not isinstance(store, SQLiteStore):
        return await asyncio.gather(*writes, return_exceptions=True)
    writer, inside, gate = store.writer, threading.Event(), threading.Event()

    def hold(conn: object) -> None:
        inside.set()
        gate.wait()

    held = asyncio.ensure_future(writer.call(hold))
    await asyncio.to_thread(inside.wait)
    try:
        running = asyncio.gather(*writes, return_exceptions=True)
        await asyncio.sleep(0)  # each write queues in its first step, run before this returns
        assert writer._jobs.qsize() == len(writes)
    finally:
        gate.set()  # a failed check must not leave the writer held
    await held
    return await asyncio.wait_for(running, HANG)


async def versions(store: Store, sagas: list[tuple[SagaState, int]]) -> list[int]:
    return [len(await store.events(state.saga_id)) for state, _ in sagas]


# -- 1. one batch's failure is its own ----------------------------------------------------


@pytest.fixture
async def ledger(postgres_url: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(postgres_url)
    await store.open()
    yield store
    await store.close()


@pytest.mark.parametrize("where", ["reason", "step"])
async def test_an_unencodable_value_fails_only_its_own_write(store: Store, where: str) -> None:
    sagas = await leased(store, 6)
    before, made = await versions(store, sagas), commits(store)
    bad = 2

    def commit(i: int) -> Awaitable[None]:
        state, epoch = sagas[i]
        after, event = unencodable(state, where) if i == bad else started(state)
        return store.commit(state, after, [event], epoch)

    results = await one_group(store, [commit(i) for i in range(len(sagas))])

    assert commits(store) - made == 1  # they went together
    assert isinstance(results[bad], StoreError), results[bad]
    assert isinstance(results[bad].__cause__, UnicodeEncodeError)
    assert [r for i, r in enumerate(results) if i != bad] == [None] * 5
    assert await versions(store, sagas) == [n + (i != bad) for i, n in enumerate(before)]
    for i, (state, _) in enumerate(sagas):
        loaded = await store.load(state.saga_id)
        assert loaded is not None
        assert loaded.state == (state if i == bad else started(state)[0])
    state, epoch = sagas[bad]  # the store goes on, and so does that saga
    await store.commit(state, started(state)[0], [started(state)[1]], epoch)


async def test_a_batch_that_cannot_be_built_fails_alone(store: Store) -> None:
    """A multi-row statement whose row is no row: PostgreSQL's writer fails building the
    group's merged statements, SQLite's running the batch."""
    assert isinstance(store, SQLiteStore | PostgresStore)
    sagas = await leased(store, 4)
    before = await versions(store, sagas)
    broken = store._batch([Stmt(q.INSERT_SUBJECT, [None], many=True)])

    def commit(state: SagaState, epoch: int) -> Awaitable[None]:
        after, event = started(state)
        return store.commit(state, after, [event], epoch)

    results = await one_group(store, [commit(*sagas[0]), broken, *(commit(*s) for s in sagas[1:])])

    assert isinstance(results[1], StoreError), results[1]
    assert results[:1] + results[2:] == [None] * 4
    assert await versions(store, sagas) == [n + 1 for n in before]


async def test_a_driver_error_of_one_batch_on_a_live_link_fails_it_alone(
    ledger: PostgresStore,
) -> None:
    """PostgreSQL counts some errors of a statement's own among its "operational" ones (a
    value too large for its index: ``ProgramLimitExceeded``, a statement timeout), as it
    does a lost link; the link still up, the batch that met one fails alone."""
    sagas = await leased(ledger, 4)
    before, made = await versions(ledger, sagas), commits(ledger)
    huge = secrets.token_hex(4000)  # random: no compression brings it under the index's limit
    too_large = ledger._batch([Stmt(q.INSERT_SUBJECT, [("order", huge, "s0")], many=True)])

    def commit(state: SagaState, epoch: int) -> Awaitable[None]:
        after, event = started(state)
        return ledger.commit(state, after, [event], epoch)

    results = await one_group(
        ledger, [commit(*sagas[0]), too_large, *(commit(*s) for s in sagas[1:])]
    )

    assert commits(ledger) - made == 1
    assert isinstance(results[1], StoreError), results[1]
    assert isinstance(results[1].__cause__, psycopg.errors.ProgramLimitExceeded)
    assert results[:1] + results[2:] == [None] * 4
    assert await versions(ledger, sagas) == [n + 1 for n in before]


class Boom(StopIteration):
    """What no future can carry as it is (asyncio refuses to set a StopIteration); raised
    out of a coroutine, it arrives as a ``RuntimeError``."""


class Unreadable:
    """A statement whose SQL cannot be read."""

    @property
    def sql(self) -> str:
        raise Boom()


async def test_any_exception_of_one_batch_fails_it_alone(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite's Python writer the batch's statements are built on the writer thread,
    and building them raises; the native writer reads them there, and reading one raises;
    on PostgreSQL running them does (the careful runner, swapped in)."""
    assert isinstance(store, SQLiteStore | PostgresStore)
    sagas = await leased(store, 4)
    before = await versions(store, sagas)
    marker = "SELECT 1 -- boom"

    async def runner(conn: pg.Conn, stmts: Sequence[Stmt]) -> BatchResult:
        if any(s.sql == marker for s in stmts):
            raise Boom()
        return await stepwise(conn, stmts)

    def build() -> list[Stmt]:
        raise Boom()

    if isinstance(store, PostgresStore):
        monkeypatch.setattr(pg, "_stepwise", runner)
        failing = store._batch([Stmt(marker)])
    elif store.writer.native:
        failing = store._batch([cast(Stmt, Unreadable())])
    else:
        failing = store._batch_built(build)

    def commit(state: SagaState, epoch: int) -> Awaitable[None]:
        after, event = started(state)
        return store.commit(state, after, [event], epoch)

    writes = [commit(*sagas[0]), failing, *(commit(*s) for s in sagas[1:])]
    results = await asyncio.wait_for(one_group(store, writes), HANG)

    assert isinstance(results[1], StoreError), results[1]
    assert results[:1] + results[2:] == [None] * 4
    assert await versions(store, sagas) == [n + 1 for n in before]


# -- 2. a batch queued while the connection is handed back --------------------------------


async def test_a_batch_queued_while_the_connection_is_handed_back_is_served(
    ledger: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer, its queue empty, hands its connection back to the pool (which takes a
    turn of the loop); a batch queued meanwhile is served, without another write."""
    (first, epoch), _ = await leased(ledger, 2)
    handing_back, go_on = asyncio.Event(), asyncio.Event()
    real = ledger._pool.putconn
    held = [True]

    async def putconn(conn: psycopg.AsyncConnection[Any]) -> None:
        if held and held.pop():  # the first connection handed back waits for go_on
            handing_back.set()
            await go_on.wait()
        await real(conn)

    monkeypatch.setattr(ledger._pool, "putconn", putconn)  # writes only, until go_on
    released = asyncio.ensure_future(ledger.release(first.saga_id, epoch))
    await handing_back.wait()  # the write is answered; its writer hands the connection back
    claimed = asyncio.ensure_future(ledger.claim(first.saga_id, "w2", TTL, NOW))
    await asyncio.sleep(0)  # queued now, while the connection is on its way back
    go_on.set()

    assert await asyncio.wait_for(claimed, HANG) == epoch + 1
    await released
    assert await ledger.lease_of(first.saga_id) == ("w2", epoch + 1, NOW + TTL)


# -- 3. a creation whose reply was lost -----------------------------------------------------


async def assert_ran_once(orch: Orchestrator, effects: Effects, saga_id: str) -> None:
    """Each step was called once, and each attempt recorded was called."""
    assert effects.calls == [f"{saga_id}:0", f"{saga_id}:1"]
    events = await orch.store.events(saga_id)
    assert [e.type for e in events].count(EventType.SAGA_SUBMITTED) == 1
    assert [(e.step, e.attempt) for e in events if e.type is EventType.STEP_STARTED] == [
        (0, 1),
        (1, 1),
    ]
    lease = await orch.store.lease_of(saga_id)
    assert lease is not None
    assert lease[0] is None  # released when the pass ended
    assert orch.leases.held == {}
    assert await orch.replayed(saga_id) == (await orch.get(saga_id)).state


async def test_a_lost_reply_on_creation_is_resolved_by_the_lease_token(
    ledger: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link drops after the creation's COMMIT: the writer runs the group again, whose
    guard finds the saga. It is ours (our token): the pass goes on holding its lease."""
    effects = Effects()
    orch = Orchestrator(ledger, effects.catalogue(), clock=FakeClock(NOW), lease_ttl=TTL)
    writer, real = ledger._writer, ledger._writer._once
    tries: list[int] = []

    async def once(group: list[Any]) -> None:
        tries.append(len(group))
        await real(group)
        if len(tries) == 1:  # committed; the reply is lost on the way back
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(writer, "_once", once)
    state = await orch.execute(two_reserves(), saga_id="s")

    assert len(tries) > 2  # the creation's group ran twice, then the pass went on
    assert state.status is SagaStatus.COMPLETED
    await assert_ran_once(orch, effects, "s")


Injected = Callable[[Callable[[], Sequence[Stmt]]], Awaitable[BatchResult]]


def lose_first_reply(
    store: Store, monkeypatch: pytest.MonkeyPatch, *, landed: bool
) -> list[StoreError]:
    """The store's next write (the creation) fails with a ``StoreError`` as a lost link
    does after the writer's last try: ``landed`` or not. Returns the errors raised."""
    assert isinstance(store, SQLiteStore | PostgresStore)
    real: Injected = store._batch_built
    raised: list[StoreError] = []

    async def batch_built(build: Callable[[], Sequence[Stmt]]) -> BatchResult:
        if raised:
            return await real(build)
        if landed:
            await real(build)
        raised.append(StoreError("the ledger: the connection was lost (injected)"))
        raise raised[-1]

    monkeypatch.setattr(store, "_batch_built", batch_built)
    return raised


async def test_a_creation_whose_reply_was_lost_goes_on_holding_its_lease(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    effects = Effects()
    orch = Orchestrator(store, effects.catalogue(), clock=FakeClock(NOW), lease_ttl=TTL)
    raised = lose_first_reply(store, monkeypatch, landed=True)

    state = await orch.execute(two_reserves(), saga_id="s")

    assert len(raised) == 1
    assert state.status is SagaStatus.COMPLETED
    await assert_ran_once(orch, effects, "s")


async def test_a_lost_reply_meeting_someone_elses_saga_leaves_it_theirs(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The id exists with another plan, and no token of ours: our creation never landed,
    and the saga is theirs. Nothing of ours is written, nothing is called."""
    theirs = Orchestrator(store, Effects().catalogue(), clock=FakeClock(NOW), owner="them")
    await theirs.submit(two_reserves(5), saga_id="s")
    existing = await store.events("s")
    effects = Effects()
    orch = Orchestrator(store, effects.catalogue(), clock=FakeClock(NOW), lease_ttl=TTL)
    lose_first_reply(store, monkeypatch, landed=False)

    with pytest.raises(SagaConflict):
        await orch.execute(two_reserves(), saga_id="s")

    assert await store.events("s") == existing
    assert effects.calls == []
    assert orch.leases.held == {}


async def test_a_creation_whose_outcome_cannot_be_told_ends_the_pass_calling_nothing(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The creation landed, its reply was lost, and reading it back fails too: the pass
    ends with the ``StoreError``, before calling any action, holding nothing."""
    assert isinstance(store, SQLiteStore | PostgresStore)
    effects = Effects()
    orch = Orchestrator(store, effects.catalogue(), clock=FakeClock(NOW), lease_ttl=TTL)
    raised = lose_first_reply(store, monkeypatch, landed=True)

    async def unreachable(*args: object) -> object:
        raise StoreError("the ledger: the server cannot be reached (injected)")

    fetch, reading = store._fetch, store._reading

    def failing_reads(read: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(read)
        async def after(*args: Any) -> Any:
            if raised:  # once the creation's reply was lost, nothing can be read
                return await unreachable()
            return await read(*args)

        return after

    monkeypatch.setattr(store, "_fetch", failing_reads(fetch))
    monkeypatch.setattr(store, "_reading", failing_reads(reading))

    with pytest.raises(StoreError) as caught:
        await orch.execute(two_reserves(), saga_id="s")

    assert not isinstance(caught.value, LeaseLost)  # nor taken for someone else's
    assert "unknown" in str(caught.value)
    assert effects.calls == []
    assert orch.leases.held == {}
    monkeypatch.undo()
    assert await store.load("s") is not None  # it did land
