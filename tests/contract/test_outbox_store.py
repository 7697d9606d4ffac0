"""The outbox side of the store protocol, on every backend: messages of real sagas are
claimed in order per saga, leased exclusively, settled only by their holder, retried,
dead-lettered and replayed; concurrent claimers never hold one message at once."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import Catalogue, FakeClock, Orchestrator, SagaStatus, SQLiteStore, StepContext
from pivotal.declarations.plan import parse_plan
from pivotal.sagas.outbox import Message
from pivotal.store import Store
from pivotal.store.postgres import PostgresStore

TTL = 30.0


class Note(BaseModel):
    count: int = 1


def announcing() -> Catalogue:
    """One step that publishes ``count`` messages; a saga of it announces count + 1."""
    catalogue = Catalogue("announce")

    @catalogue.compensable()
    async def note(args: Note, ctx: StepContext) -> dict[str, int]:
        for n in range(args.count):
            ctx.publish("note.made", {"n": n})
        return {"count": args.count}

    @note.undo
    async def unnote(args: Note, result: Any, ctx: StepContext) -> None:
        return None

    return catalogue


async def sagas(store: Store, clock: FakeClock, n: int, count: int = 2) -> list[str]:
    """Run ``n`` sagas that each leave ``count + 1`` messages; their ids."""
    orch = Orchestrator(store, announcing(), clock=clock, rng=random.Random(0))
    plan = parse_plan(
        {"catalogue": "announce", "steps": [{"name": "note", "args": {"count": count}}]}
    )
    ids = []
    for i in range(n):
        state = await orch.execute(plan, saga_id=f"s-{i}")
        assert state.status is SagaStatus.COMPLETED
        ids.append(state.saga_id)
    return ids


async def deliver_all(store: Store, owner: str, now: float) -> list[Message]:
    """Claim and settle as delivered until nothing is due; what was delivered, in order."""
    out: list[Message] = []
    while claimed := await store.claim_messages(owner, now, TTL, 100):
        for m in claimed:
            assert await store.settle_message(m.id, owner, now, delivered=True)
        out += claimed
    return out


@pytest.fixture
async def other(
    store: Store, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Store]:
    """A second store on the same ledger (another process's view of it)."""
    second: Store
    if isinstance(store, PostgresStore):
        second = PostgresStore(request.getfixturevalue("postgres_url"))
    else:
        second = SQLiteStore(tmp_path / "ledger.db")
    await second.open()
    yield second
    await second.close()


async def test_messages_of_a_saga_are_in_its_log_order(store: Store, clock: FakeClock) -> None:
    ids = await sagas(store, clock, 2, count=2)
    kept = await store.messages(saga_id=ids[0])
    assert [m.type for m in kept] == ["note.made", "note.made", "saga.completed"]
    assert [m.payload["data"] for m in kept[:2]] == [{"n": 0}, {"n": 1}]
    assert all(m.status == "pending" and m.attempts == 0 for m in kept)
    assert [m.seq for m in kept] == sorted(m.seq for m in kept)
    assert len(await store.messages()) == 6
    assert len(await store.messages(limit=4)) == 4
    assert await store.messages(status="dead") == []


async def test_only_the_oldest_pending_message_of_each_saga_is_claimed(
    store: Store, clock: FakeClock
) -> None:
    ids = await sagas(store, clock, 3)
    now = clock.now()
    first = await store.claim_messages("r1", now, TTL, 100)
    assert [m.saga_id for m in first] == ids  # one per saga, in outbox order
    for m in first:
        assert m.id == (await store.messages(saga_id=m.saga_id))[0].id
    for m in first:
        assert await store.settle_message(m.id, "r1", now, delivered=True)
    delivered = first + await deliver_all(store, "r1", now)
    for saga_id in ids:
        order = [m.id for m in delivered if m.saga_id == saga_id]
        assert order == [m.id for m in await store.messages(saga_id=saga_id)]
    done = await store.messages(status="delivered")
    assert len(done) == 9
    assert all(m.delivered_at == now and m.attempts == 1 for m in done)


async def test_a_claim_respects_its_limit(store: Store, clock: FakeClock) -> None:
    await sagas(store, clock, 3)
    assert len(await store.claim_messages("r1", clock.now(), TTL, 2)) == 2
    assert await store.claim_messages("r1", clock.now(), TTL, 0) == []


async def test_a_leased_message_is_not_claimed_by_another_relay_until_its_lease_ends(
    store: Store, clock: FakeClock
) -> None:
    await sagas(store, clock, 2)
    now = clock.now()
    held = await store.claim_messages("r1", now, TTL, 100)
    assert len(held) == 2
    assert await store.claim_messages("r2", now + TTL - 1, TTL, 100) == []
    # the holder claiming again (a retry after a lost reply) gets its own messages back
    assert [m.id for m in await store.claim_messages("r1", now, TTL, 100)] == [m.id for m in held]
    later = now + TTL + 1
    taken = await store.claim_messages("r2", later, TTL, 100)
    assert [m.id for m in taken] == [m.id for m in held]
    # the first holder lost them: its settling is refused and changes nothing
    assert not await store.settle_message(held[0].id, "r1", later, delivered=True)
    assert not await store.settle_message(held[1].id, "r1", later, delivered=False, error="x")
    assert next(m.status for m in await store.messages(saga_id=held[0].saga_id)) == "pending"
    assert await store.settle_message(held[0].id, "r2", later, delivered=True)
    assert await store.settle_message(held[0].id, "r2", later, delivered=True)  # idempotent
    assert not await store.settle_message(held[0].id, "r2", later + 1, delivered=True)
    assert not await store.settle_message("no-such-id", "r2", later, delivered=True)


async def test_a_failed_message_is_retried_when_due_and_holds_back_its_saga(
    store: Store, clock: FakeClock
) -> None:
    (saga_id,) = await sagas(store, clock, 1)
    now = clock.now()
    (m,) = await store.claim_messages("r1", now, TTL, 100)
    assert await store.settle_message(
        m.id, "r1", now, delivered=False, error="503 from receiver", next_attempt_at=now + 10
    )
    (kept,) = await store.messages(saga_id=saga_id, limit=1)
    assert (kept.status, kept.attempts, kept.last_error) == ("pending", 1, "503 from receiver")
    assert kept.next_attempt_at == now + 10
    assert await store.claim_messages("r2", now + 9, TTL, 100) == []  # not due; nothing after it
    (again,) = await store.claim_messages("r2", now + 10, TTL, 100)
    assert again.id == m.id
    assert again.attempts == 1


async def test_a_dead_message_stops_blocking_and_a_replay_makes_it_due(
    store: Store, clock: FakeClock
) -> None:
    (saga_id,) = await sagas(store, clock, 1)
    now = clock.now()
    (m,) = await store.claim_messages("r1", now, TTL, 100)
    assert await store.settle_message(m.id, "r1", now, delivered=False, error="x" * 5000)
    (dead,) = await store.messages(status="dead")
    assert dead.id == m.id
    assert dead.attempts == 1
    assert len(dead.last_error or "") == 2000
    (nxt,) = await store.claim_messages("r1", now, TTL, 100)
    assert nxt.id != m.id
    assert nxt.saga_id == saga_id
    assert await store.settle_message(nxt.id, "r1", now, delivered=True)

    assert await store.replay_message(m.id, now + 50)
    (replayed,) = await store.messages(saga_id=saga_id, limit=1)
    assert (replayed.status, replayed.attempts, replayed.next_attempt_at) == (
        "pending",
        0,
        now + 50,
    )
    assert await store.claim_messages("r1", now + 49, TTL, 100) == []
    assert [x.id for x in await store.claim_messages("r1", now + 50, TTL, 100)] == [m.id]
    assert not await store.replay_message(m.id, now)  # pending: nothing to replay
    assert not await store.replay_message("no-such-id", now)
    assert await store.replay_message(nxt.id, now)  # a delivered one may be sent again


async def test_concurrent_relays_never_hold_one_message_at_once(
    store: Store, other: Store, clock: FakeClock
) -> None:
    ids = await sagas(store, clock, 8, count=4)
    now = clock.now()
    seen: list[tuple[str, str]] = []  # (owner, message id) per claim, in settle order

    async def relay(ledger: Store, owner: str) -> None:
        for _ in range(200):
            claimed = await ledger.claim_messages(owner, now, TTL, 3)
            if not claimed:
                if len(seen) == 40:
                    return
                await asyncio.sleep(0)
                continue
            for m in claimed:
                seen.append((owner, m.id))
                assert await ledger.settle_message(m.id, owner, now, delivered=True)

    await asyncio.gather(relay(store, "a"), relay(other, "b"))
    delivered = [mid for _, mid in seen]
    assert len(delivered) == len(set(delivered)) == 40  # each once: never two holders
    for saga_id in ids:
        kept = [m.id for m in await store.messages(saga_id=saga_id)]
        assert [mid for mid in delivered if mid.startswith(f"{saga_id}:")] == kept


async def test_two_claimers_racing_many_times_get_disjoint_messages(
    store: Store, other: Store, clock: FakeClock
) -> None:
    await sagas(store, clock, 6)
    now = clock.now()
    for round_ in range(30):
        at = now + round_ * (TTL + 1)  # every earlier lease has run out
        a, b = await asyncio.gather(
            store.claim_messages("a", at, TTL, 100), other.claim_messages("b", at, TTL, 100)
        )
        assert not {m.id for m in a} & {m.id for m in b}
        assert len(a) + len(b) == 6  # together, the head of every saga
