"""The store protocol's contract: the same test bodies on every backend (see conftest)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import pytest
from contract_orders import open_order

from pivotal import FakeClock, LeaseLost, Orchestrator, Plan, Provenance, SagaStatus, StoreError
from pivotal.declarations.catalogue import undo_key
from pivotal.errors import VersionConflict
from pivotal.examples.commerce import CommerceApp
from pivotal.sagas.state import Event, EventType, SagaState, apply
from pivotal.store import Store

NOW = 1_800_000_000.0


def plan(order: str = "o-1") -> Plan:
    return Plan.model_validate(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "name": "reserve_stock",
                    "args": {"order_id": order, "sku": "sku-1", "quantity": 1},
                },
                {"name": "charge_payment", "args": {"order_id": order, "amount": "10"}},
            ],
            "provenance": {"actor_type": "agent", "actor_id": "planner-7", "model": "m"},
        }
    )


async def submit(store: Store, app: CommerceApp, saga_id: str) -> SagaState:
    open_order(app.services, "o-1")  # the order plan() is for: 10 for one sku-1
    return await Orchestrator(store, app, clock=FakeClock(NOW)).submit(plan(), saga_id=saga_id)


def step(
    state: SagaState, type: EventType, index: int | None = None, **data: object
) -> tuple[SagaState, Event]:
    event = Event(
        type=type, at=state.updated_at + 1, step=index, attempt=1, data=data, seq=state.version + 1
    )
    return apply(state, event), event


async def test_create_is_insert_once(store: Store, app: CommerceApp) -> None:
    state = await submit(store, app, "s1")
    again = apply(None, (await store.events("s1"))[0])

    assert await store.create(again, plan(), plan().provenance, []) is False
    loaded = await store.load("s1")
    assert loaded is not None
    assert loaded.state == state
    assert loaded.plan == plan()
    assert len(await store.events("s1")) == 1
    assert await store.load("missing") is None


async def test_provenance_round_trips(store: Store, app: CommerceApp) -> None:
    state = await submit(store, app, "s1")
    assert await store.provenance(state.provenance_ref) == plan().provenance
    assert await store.provenance("prov_missing") is None
    assert isinstance(plan().provenance, Provenance)


async def test_commit_is_fenced_by_version_and_epoch(store: Store, app: CommerceApp) -> None:
    state = await submit(store, app, "s1")
    epoch = await store.claim("s1", "w1", 30, NOW)
    assert epoch == 1
    after, event = step(state, EventType.STEP_STARTED, 0, key="s1:0")

    with pytest.raises(LeaseLost):
        await store.commit(state, after, [event], epoch + 1)  # stale epoch
    stale = replace(state, version=state.version + 5)
    with pytest.raises(VersionConflict) as refused:  # the lease is ours: reload, go on
        await store.commit(stale, replace(after, version=stale.version + 1), [event], epoch)
    assert not isinstance(refused.value, LeaseLost)
    with pytest.raises(VersionConflict):  # a decision from outside, on a stale read
        await store.commit(stale, replace(after, version=stale.version + 1), [event], None)
    assert len(await store.events("s1")) == 1  # nothing written

    await store.commit(state, after, [event], epoch)
    loaded = await store.load("s1")
    assert loaded is not None
    assert loaded.state == after
    assert [e.type for e in await store.events("s1")] == [
        EventType.SAGA_SUBMITTED,
        EventType.STEP_STARTED,
    ]


async def test_claims_follow_leases(store: Store, app: CommerceApp) -> None:
    await submit(store, app, "s1")
    assert await store.claim("s1", "w1", 30, NOW) == 1
    assert await store.claim("s1", "w2", 30, NOW + 10) is None  # held
    assert await store.claim("s1", "w1", 30, NOW + 10) is None  # held, even by the same name
    assert await store.claim("s1", "w2", 30, NOW + 31) == 2  # expired: taken over
    assert await store.lease_of("s1") == ("w2", 2, NOW + 61)
    await store.release("s1", 1)  # a stale release changes nothing
    assert await store.lease_of("s1") == ("w2", 2, NOW + 61)
    await store.release("s1", 2)
    assert await store.lease_of("s1") == (None, 2, None)


async def test_claims_count_passes_without_progress(store: Store, app: CommerceApp) -> None:
    state = await submit(store, app, "s1")
    for n in range(1, 4):  # each pass ends badly, or its process dies
        epoch = await store.claim("s1", "w1", 30, NOW)
        assert epoch is not None
        await store.release("s1", epoch, f"boom {n}" if n < 3 else None)
        loaded = await store.load("s1")
        assert loaded is not None
        assert (loaded.idle_passes, loaded.last_error) == ((n, f"boom {n}") if n < 3 else (0, None))
    epoch = await store.claim("s1", "w1", 30, NOW)
    assert epoch is not None
    after, event = step(state, EventType.STEP_STARTED, 0, key="s1:0")
    await store.commit(state, after, [event], epoch)  # progress resets the count
    loaded = await store.load("s1")
    assert loaded is not None
    assert loaded.idle_passes == 0


async def test_claim_next_takes_only_runnable_sagas(store: Store, app: CommerceApp) -> None:
    for saga_id in ("a", "b", "c"):
        await submit(store, app, saga_id)
    waiting = await store.load("b")
    assert waiting is not None
    s, e1 = step(waiting.state, EventType.STEP_STARTED, 0, key="b:0")
    s, e2 = step(s, EventType.STEP_RETRY_SCHEDULED, 0, error="x", next_attempt_at=NOW + 100)
    await store.commit(waiting.state, s, [e1, e2], None)

    first = await store.claim_next("w1", 1000, NOW, 10)
    assert sorted(saga for saga, _ in first) == ["a", "c"]
    assert await store.claim_next("w2", 30, NOW, 10) == []  # leased, or not yet due
    assert [saga for saga, _ in await store.claim_next("w2", 30, NOW + 101, 10)] == ["b"]


async def test_concurrent_claimers_never_share_a_saga(store: Store, app: CommerceApp) -> None:
    for n in range(20):
        await submit(store, app, f"s{n}")
    batches = await asyncio.gather(*(store.claim_next(f"w{n}", 30, NOW, 3) for n in range(8)))
    claimed = [saga for batch in batches for saga, _ in batch]
    assert len(claimed) == len(set(claimed)) == 20


async def test_heartbeat_and_expiry(store: Store, app: CommerceApp) -> None:
    await submit(store, app, "s1")
    await submit(store, app, "s2")
    e1 = await store.claim("s1", "w1", 30, NOW)
    e2 = await store.claim("s2", "w1", 30, NOW)
    assert e1 is not None
    assert e2 is not None
    assert await store.heartbeat("w1", {"s1": e1, "s2": e2}, 30, NOW + 20) == {"s1", "s2"}
    assert await store.expire_leases(NOW + 40) == []  # extended to NOW + 50
    assert sorted(await store.expire_leases(NOW + 60)) == ["s1", "s2"]
    lease = await store.lease_of("s1")
    assert lease is not None
    assert lease[0] is None
    assert lease[1] == e1 + 1
    assert await store.heartbeat("w1", {"s1": e1}, 30, NOW + 61) == set()


async def test_listing_and_views(store: Store, app: CommerceApp) -> None:
    orch = Orchestrator(store, app, clock=FakeClock(NOW))
    for n in range(3):
        open_order(app.services, f"o-{n}")
        await orch.submit(plan(f"o-{n}"), saga_id=f"s{n}")
    await orch.run("s0")
    summaries = await store.list_sagas()
    assert [s.saga_id for s in summaries] == ["s0", "s1", "s2"]  # same created_at: by id
    assert [s.saga_id for s in await store.list_sagas(SagaStatus.COMPLETED)] == ["s0"]
    assert len(await store.list_sagas(limit=2)) == 2
    assert await store.pending_approvals() == []
    assert await store.dead_letters() == []


async def test_dead_letters_follow_undo_status(store: Store, app: CommerceApp) -> None:
    state = await submit(store, app, "s1")
    s, events = state, []
    for t, data in (
        (EventType.STEP_STARTED, {"key": "s1:0"}),
        (EventType.STEP_SUCCEEDED, {"result": {"reservation_id": "r"}}),
        (EventType.COMPENSATION_STARTED, {"reason": "test"}),
        (EventType.UNDO_STARTED, {"key": "s1:0:undo"}),
        (EventType.UNDO_DEAD_LETTERED, {"error": "boom", "next_retry_at": NOW + 60}),
    ):
        s, e = step(s, t, 0, **data)
        events.append(e)
    await store.commit(state, s, events, None)
    [letter] = await store.dead_letters()
    assert (letter.undo_key, letter.status, letter.retries) == (undo_key("s1", 0), "open", 0)
    assert await store.dead_letters("open", due_by=NOW) == []
    assert len(await store.dead_letters("open", due_by=NOW + 60)) == 1

    again, e1 = step(s, EventType.UNDO_STARTED, 0, key="s1:0:undo")
    again, e2 = step(again, EventType.UNDO_DEAD_LETTERED, 0, error="boom2", next_retry_at=None)
    await store.commit(s, again, [e1, e2], None)
    [letter] = await store.dead_letters()
    assert (letter.retries, letter.error, letter.next_retry_at) == (1, "boom2", None)

    done, e3 = step(again, EventType.DEAD_LETTER_RESOLVED, 0, by="ops", reason="refunded by hand")
    await store.commit(again, done, [e3], None)
    assert await store.dead_letters() == []
    [settled] = await store.dead_letters(None)
    assert (settled.status, settled.resolution) == ("resolved", "refunded by hand")


async def test_a_refused_write_keeps_nothing_and_the_store_goes_on(
    store: Store, app: CommerceApp, caplog: pytest.LogCaptureFixture
) -> None:
    state = await submit(store, app, "s1")
    after, event = step(state, EventType.STEP_STARTED, 0, key="s1:0")
    clash = replace(event, seq=1)  # seq 1 is the submission's event

    with pytest.raises(StoreError) as refused:
        await store.commit(state, after, [clash], None)
    assert not isinstance(refused.value, LeaseLost)
    loaded = await store.load("s1")
    assert loaded is not None
    assert loaded.state == state  # the saga's row was not updated either
    assert len(await store.events("s1")) == 1

    for _ in range(12):  # more than the pool holds: no connection was left mid-transaction
        assert await store.lease_of("s1") == (None, 0, None)
    await store.commit(state, after, [event], None)
    assert [e.type for e in await store.events("s1")][-1] is EventType.STEP_STARTED
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_tokens_keep_whether_they_require_on_behalf_of(store: Store) -> None:
    plain = await store.create_token("bot", "agent", "hash-1", NOW)
    strict = await store.create_token(
        "strict", "agent", "hash-2", NOW + 1, require_on_behalf_of=True
    )
    assert (plain.require_on_behalf_of, strict.require_on_behalf_of) == (False, True)
    found = await store.token_by_hash("hash-2")
    assert found == strict
    assert [t.require_on_behalf_of for t in await store.list_tokens()] == [False, True]
    revoked = await store.revoke_token(strict.id, NOW + 2)
    assert revoked is not None
    assert revoked.require_on_behalf_of is True
