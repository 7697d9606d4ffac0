"""``Store.sagas_updated``: the sagas of a status that changed in a period, on both ledgers."""

from __future__ import annotations

from pivotal import FakeClock, Orchestrator, SagaStatus
from pivotal.examples.commerce import Fault, Faults
from pivotal.store import Store


async def test_only_the_period_and_the_status_are_listed_newest_change_first(
    store: Store, orchestrator: Orchestrator, clock: FakeClock, faults: Faults, checkout_plan
) -> None:
    ended = {}
    for n in range(3):
        clock.advance(100)
        await orchestrator.execute(checkout_plan(f"o-{n}"), saga_id=f"ok-{n}")
        ended[f"ok-{n}"] = clock.now()
    faults.always("ship", Fault.PERMANENT)
    await orchestrator.execute(checkout_plan("o-9"), saga_id="rolled-back")

    completed = SagaStatus.COMPLETED
    found = await store.sagas_updated(completed, ended["ok-1"] - 1, ended["ok-2"] + 1)
    assert [s.saga_id for s in found] == ["ok-2", "ok-1"]
    assert all(s.status is completed for s in found)
    assert [s.saga_id for s in await store.sagas_updated(completed, 0, 1e12, limit=1)] == ["ok-2"]
    assert await store.sagas_updated(completed, 0, ended["ok-0"] - 50) == []
    rolled = await store.sagas_updated(SagaStatus.COMPENSATED, 0, 1e12)
    assert [s.saga_id for s in rolled] == ["rolled-back"]
