"""The operations views of the store protocol (``ops_snapshot``, ``beat_worker``): the same
bodies on every backend, over sagas run for real."""

from __future__ import annotations

from pivotal import FakeClock, Orchestrator, SagaStatus
from pivotal.declarations.policy import DAY
from pivotal.examples.commerce import Fault, Faults
from pivotal.store import Store
from pivotal.store.primitives import SQLPrimitives, Stmt

CHARGE_FIRST = ("charge_payment", "reserve_stock", "create_shipment")


async def test_an_empty_ledger_has_nothing_and_no_ages(store: Store, clock: FakeClock) -> None:
    snap = await store.ops_snapshot(clock.now())

    assert snap.at == clock.now()
    assert dict(snap.sagas_by_status) == {}
    assert (snap.open_dead_letters, snap.oldest_open_dead_letter_at) == (0, None)
    assert snap.pending_approvals == 0
    assert snap.oldest_approval_requested_at is None
    assert snap.soonest_approval_expires_at is None
    assert (snap.outbox_pending, snap.outbox_dead, snap.oldest_pending_message_at) == (0, 0, None)
    assert (snap.workers_alive, snap.last_worker_heartbeat_at) == (0, None)


async def test_snapshot_counts_what_real_sagas_left(
    store: Store,
    orchestrator: Orchestrator,
    clock: FakeClock,
    faults: Faults,
    checkout_plan,
    fulfilment_plan,
) -> None:
    start = clock.now()
    assert (await orchestrator.execute(checkout_plan("o-1"), saga_id="ok")).status is (
        SagaStatus.COMPLETED
    )
    clock.advance(10)
    faults.always("ship", Fault.PERMANENT).always("release", Fault.PERMANENT)
    failed = await orchestrator.execute(checkout_plan("o-2", order=CHARGE_FIRST), saga_id="dl")
    assert failed.status is SagaStatus.COMPENSATION_FAILED
    faults.clear()
    clock.advance(10)
    paused = await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="big")
    assert paused.status is SagaStatus.AWAITING_APPROVAL
    clock.advance(10)
    await orchestrator.submit(checkout_plan("o-3"), saga_id="new")
    clock.advance(5)

    snap = await store.ops_snapshot(clock.now())

    assert dict(snap.sagas_by_status) == {
        "completed": 1,
        "compensation_failed": 1,
        "awaiting_approval": 1,
        "submitted": 1,
    }
    assert (snap.open_dead_letters, snap.oldest_open_dead_letter_at) == (1, start + 10)
    assert snap.pending_approvals == 1
    assert snap.oldest_approval_requested_at == start + 20
    assert snap.soonest_approval_expires_at == start + 20 + DAY
    # saga.completed, saga.compensation_failed, approval.requested: none relayed yet
    assert snap.outbox_pending >= 3
    assert snap.oldest_pending_message_at == start
    assert snap.outbox_dead == 0


async def test_outbox_counts_pending_and_dead_but_not_delivered(
    store: Store, orchestrator: Orchestrator, clock: FakeClock, checkout_plan
) -> None:
    for n in range(3):
        await orchestrator.execute(checkout_plan(f"o-{n}"), saga_id=f"s{n}")
        clock.advance(1)
    assert isinstance(store, SQLPrimitives)
    before = await store.ops_snapshot(clock.now())
    ids = [r[0] for r in await store._fetch("SELECT id FROM outbox ORDER BY seq", ())]
    assert before.outbox_pending == len(ids) >= 3
    # the first is delivered, the second dead: the oldest pending is the third's time
    await store._batch(
        [
            Stmt(
                "UPDATE outbox SET status = 'delivered', delivered_at = ? WHERE id = ?",
                (clock.now(), ids[0]),
            ),
            Stmt("UPDATE outbox SET status = 'dead' WHERE id = ?", (ids[1],)),
        ]
    )
    third = await store._fetch("SELECT created_at FROM outbox WHERE id = ?", (ids[2],))

    snap = await store.ops_snapshot(clock.now())

    assert (snap.outbox_pending, snap.outbox_dead) == (len(ids) - 2, 1)
    assert snap.oldest_pending_message_at == third[0][0]


async def test_a_worker_is_alive_while_it_beats_and_until_it_stops(
    store: Store, clock: FakeClock
) -> None:
    t0 = clock.now()
    await store.beat_worker("w1", t0)
    await store.beat_worker("w2", t0 + 5)

    snap = await store.ops_snapshot(t0 + 10, alive_within=60)
    assert (snap.workers_alive, snap.last_worker_heartbeat_at) == (2, t0 + 5)

    # w1 is silent past the window; w2 is still within it
    snap = await store.ops_snapshot(t0 + 62, alive_within=60)
    assert (snap.workers_alive, snap.last_worker_heartbeat_at) == (1, t0 + 5)

    await store.beat_worker("w2", t0 + 63, stopped=True)
    snap = await store.ops_snapshot(t0 + 64, alive_within=60)
    assert snap.workers_alive == 0
    assert snap.last_worker_heartbeat_at == t0  # only w1 has not said it stopped


async def test_beats_keep_the_start_and_a_beat_after_a_stop_is_a_restart(
    store: Store, clock: FakeClock
) -> None:
    assert isinstance(store, SQLPrimitives)
    t0 = clock.now()

    async def row() -> tuple[float, float, float | None]:
        [found] = await store._fetch(
            "SELECT started_at, heartbeat_at, stopped_at FROM workers WHERE name = ?", ("w",)
        )
        return found[0], found[1], found[2]

    await store.beat_worker("w", t0)
    await store.beat_worker("w", t0 + 1)
    assert await row() == (t0, t0 + 1, None)
    await store.beat_worker("w", t0 + 2, stopped=True)
    assert await row() == (t0, t0 + 2, t0 + 2)
    assert (await store.ops_snapshot(t0 + 2)).workers_alive == 0
    await store.beat_worker("w", t0 + 3)  # the same name runs again
    assert await row() == (t0 + 3, t0 + 3, None)
    assert (await store.ops_snapshot(t0 + 3)).workers_alive == 1


async def test_every_status_is_counted(
    store: Store, orchestrator: Orchestrator, clock: FakeClock, checkout_plan
) -> None:
    assert isinstance(store, SQLPrimitives)
    statuses = list(SagaStatus)
    for n, status in enumerate(statuses):
        await orchestrator.submit(checkout_plan(f"o-{n}"), saga_id=f"s{n}")
        await orchestrator.submit(checkout_plan(f"p-{n}"), saga_id=f"t{n}")
        sql = "UPDATE sagas SET status = ? WHERE saga_id IN (?, ?)"
        await store._batch([Stmt(sql, (status.value, f"s{n}", f"t{n}"))])

    snap = await store.ops_snapshot(clock.now())

    assert dict(snap.sagas_by_status) == {status.value: 2 for status in statuses}
