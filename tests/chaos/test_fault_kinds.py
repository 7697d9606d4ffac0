"""Each new fault class alone, at every place it can strike: arbitrary exceptions from
providers, lookups, undos, preconditions and the approval policy; failed ledger commits;
a second process with the same owner name let in while a call is in flight."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest

from pivotal.errors import StoreError
from pivotal.examples.commerce import Fault
from pivotal.examples.commerce.chaos import CommerceWorld, chaos_scenarios
from pivotal.examples.commerce.faults import CHECKS
from pivotal.store.base import Store
from pivotal.testing import (
    CallSpan,
    Chaos,
    ChaosScenario,
    CommitFault,
    FlakyStore,
    LedgerFactory,
    RunResult,
    StoreFault,
    Takeover,
    concurrent_calls,
    flaky_ledger,
    memory_ledger,
    run_in_process,
)
from pivotal.testing.chaos import SAGA_ID
from pivotal.testing.inflight import CallLog, instrument

SCENARIOS = chaos_scenarios()
NEW_KINDS = [
    Fault.ERROR_BEFORE_EFFECT,
    Fault.KEY_ERROR_AFTER_EFFECT,
    Fault.PARSE_ERROR_AFTER_EFFECT,
    Fault.RUNTIME_ERROR_AFTER_EFFECT,
    Fault.RESET_AFTER_EFFECT,
]
PROVIDER_OPS = ("reserve", "charge", "ship", "authorize", "capture", "email")
UNDO_OPS = ("release", "refund", "void", "cancel_shipment")


@pytest.fixture(autouse=True)
def _quiet_leases() -> Iterator[None]:
    """Taken-over leases are the point here: their warnings are noise."""
    logger = logging.getLogger("pivotal.lease")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def armed(
    scenario: ChaosScenario[CommerceWorld], faults: Mapping[str, Sequence[Fault | None]]
) -> ChaosScenario[CommerceWorld]:
    """The scenario with ``faults`` scheduled once its plan is submitted."""

    def arm(world: CommerceWorld) -> None:
        scenario.arm(world)
        for op, queued in faults.items():
            world.app.services.faults.next(op, *queued)

    return ChaosScenario(scenario.name, scenario.plan, scenario.prepare, scenario.approve, arm)


class KeptWorld(CommerceWorld):
    """A world left open after its run, to look at the providers' state."""

    def close(self) -> None:
        pass


def named(name: str) -> ChaosScenario[CommerceWorld]:
    return next(s for s in SCENARIOS if s.name == name)


async def run(
    scenario: ChaosScenario[CommerceWorld],
    *,
    ledger: LedgerFactory = memory_ledger,
    takeover: Takeover | None = None,
) -> RunResult:
    result = await run_in_process(
        CommerceWorld.create, scenario, ledger=ledger, interludes=[takeover] if takeover else []
    )
    Chaos.assert_clean([result])
    return result


async def test_every_new_fault_kind_on_every_operation() -> None:
    """Each new kind alone on each operation, in scenarios that complete, compensate, pass
    the pivot, dead-letter an undo and run a parallel group (the random schedules combine
    them with crashes and the other kinds)."""
    ops = (*PROVIDER_OPS, *UNDO_OPS, "find", *CHECKS)
    chosen = [named(n) for n in ("demo-1", "demo-3", "demo-5", "demo-6", "demo-8", "parallel-ok")]
    for scenario in chosen:
        for op in ops:
            for kind in NEW_KINDS:
                await run(armed(scenario, {op: [kind]}))


async def test_an_exception_after_the_effect_is_settled_by_lookup() -> None:
    world = KeptWorld.create()
    scenario = armed(named("parallel-ok"), {"charge": [Fault.KEY_ERROR_AFTER_EFFECT]})
    result = await run_in_process(lambda: world, scenario)
    assert result.status.value == "completed"
    assert not result.violations
    charges = world.app.services.calls("charge")
    assert [c["fault"] for c in charges] == ["key_error_after_effect"]  # never called twice


async def test_an_unknown_outcome_whose_lookup_raises_is_compensated() -> None:
    # The reply fails to parse after the effect, and the lookup that would settle it
    # raises: the outcome stays unknown, so the effect is undone before the pivot.
    world = KeptWorld.create()
    faults: dict[str, list[Fault | None]] = {
        "charge": [Fault.PARSE_ERROR_AFTER_EFFECT],
        "find": [Fault.RUNTIME_ERROR_AFTER_EFFECT],
    }
    result = await run_in_process(lambda: world, armed(named("parallel-ok"), faults))
    assert result.status.value == "compensated"
    assert not result.violations
    assert not world.probe.in_place(f"{SAGA_ID}:2")


async def test_a_raising_precondition_fails_its_step_and_compensates() -> None:
    result = await run(armed(named("parallel-ok"), {"precondition": [Fault.PERMANENT]}))
    assert result.status.value == "compensated"


async def test_a_raising_approval_policy_asks_a_person() -> None:
    scenario = next(s for s in SCENARIOS if s.plan.catalogue == "fulfilment" and s.approve)
    world = KeptWorld.create()
    faulty = armed(scenario, {"approval_policy": [Fault.ERROR_BEFORE_EFFECT]})
    result = await run_in_process(lambda: world, faulty)
    assert not result.violations
    assert world.app.services.calls("capture"), "approved by the person, the pivot ran"


def _store_cases() -> Iterator[tuple[str, StoreFault]]:
    for scenario in SCENARIOS:
        for kind in StoreFault:
            if kind is not StoreFault.PARTITIONED:  # not a failure: see below
                yield scenario.name, kind


@pytest.mark.parametrize(("name", "kind"), list(_store_cases()))
async def test_a_failed_commit_at_every_commit(name: str, kind: StoreFault) -> None:
    """The n-th commit fails, for every n the run reaches; the run recovers as from a
    crash and every invariant holds."""
    scenario, n = named(name), 0
    while True:
        n += 1
        result = await run(scenario, ledger=flaky_ledger(memory_ledger, [CommitFault(n, kind)]))
        if not result.store_errors:
            break
    assert n > 3, "the run made too few commits to be interesting"


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
async def test_a_partition_from_the_ledger_at_every_commit(name: str) -> None:
    """The n-th commit is held back by a partition past the lease, for every n the run
    reaches: another process takes the saga over and drives it to rest meanwhile, then the
    held commit arrives. It is fenced, the first process calls nothing more, and every
    invariant holds."""
    scenario, n, outcomes = named(name), 0, set()
    while True:
        n += 1
        ledger = flaky_ledger(memory_ledger, [CommitFault(n, StoreFault.PARTITIONED)])
        await run(scenario, ledger=ledger)
        [store] = ledger.stores
        if not store.fired:
            break
        outcomes.update(store.partitions)
    assert n > 3, "the run made too few commits to be interesting"
    assert "took over" in outcomes


class CommitRecorder:
    """Stands in for a ledger: records the commits that reach it."""

    def __init__(self) -> None:
        self.commits: list[object] = []

    async def commit(self, before: object, after: object, events: object, epoch: object) -> None:
        self.commits.append(after)


async def test_a_transaction_lost_as_a_whole_takes_its_group_with_it() -> None:
    inner = CommitRecorder()
    store = FlakyStore(cast(Store, inner), [CommitFault(2, StoreFault.LOST)])
    state = cast(Any, "state")
    await store.commit(state, state, [], 1)  # the first goes through
    queued = await asyncio.gather(
        store.commit(state, state, [], 1),  # lost as a whole...
        store.commit(state, state, [], 2),  # ...with the one queued with it
        return_exceptions=True,
    )
    assert all(isinstance(r, StoreError) for r in queued)
    assert len(inner.commits) == 1
    assert store.lost_with_group == 1
    await store.commit(state, state, [], 1)  # and the ledger goes on afterwards
    assert len(inner.commits) == 2


def _takeovers() -> Iterator[Takeover]:
    for index in range(5):
        for undo in (False, True):
            for expire in (True, False):
                for heartbeat in (False, True):
                    yield Takeover(index, undo=undo, expire=expire, heartbeat=heartbeat)


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
async def test_a_second_process_with_the_same_name_during_every_call(name: str) -> None:
    fired = 0
    for takeover in _takeovers():
        await run(named(name), takeover=takeover)
        if not takeover.fired:
            continue
        fired += 1
        expected = "took over" if takeover.expire else "refused"
        assert takeover.outcome == expected, f"{takeover}: {takeover.outcome}"
    assert fired >= 4


class ReentrantStore(FlakyStore):
    """A broken ledger whose leases re-enter by owner name (what the engine must not do)."""

    async def claim(self, saga_id: str, owner: str, ttl: float, now: float) -> int | None:
        lease = await self.inner.lease_of(saga_id)
        if lease is not None and lease[0] == owner:
            await self.inner.expire_leases(now + 10 * ttl)
        return await self.inner.claim(saga_id, owner, ttl, now)


def reentrant(base: LedgerFactory) -> LedgerFactory:
    @asynccontextmanager
    async def open_reentrant() -> AsyncIterator[Store]:
        async with base() as store:
            yield ReentrantStore(store, [])

    return open_reentrant


async def test_the_invariants_catch_a_step_called_concurrently_with_itself() -> None:
    takeover = Takeover(0, expire=False)
    result = await run_in_process(
        CommerceWorld.create,
        named("demo-1"),
        ledger=reentrant(memory_ledger),
        interludes=[takeover],
    )
    assert takeover.outcome == "took over"
    assert any(v.rule == "no_concurrent_calls" for v in result.violations), result.violations


def test_concurrent_calls_compares_spans_of_one_key_and_one_recorder() -> None:
    spans = [
        CallSpan("s:0", 1, 3, "a", recorder="r"),
        CallSpan("s:0", 2, 2, "b", recorder="r"),  # inside the first
        CallSpan("s:0", 4, 5, "c", recorder="r"),  # after it
        CallSpan("s:1", 2, 9, "a", recorder="r"),  # another key
        CallSpan("s:0", 2, 3, "x", recorder="other"),  # another recorder's ticks
        CallSpan("s:0", 3, 3, "z", recorder="r", stale=True),  # a zombie: not compared
        CallSpan("s:0", 6, None, "d", recorder="r"),  # never returned
        CallSpan("s:0", 7, 7, "e", recorder="r"),
    ]
    found = concurrent_calls(spans)
    assert [v.detail for v in found] == [
        "s:0 was called while an earlier call of it was in flight (a and b)"
    ]


def test_an_older_build_leaves_out_a_catalogue_that_is_not_whole_without_the_step() -> None:
    """A fulfilment without its capture (its approval policy looks at the capture) cannot
    be built at all: the older build serves no fulfilment, and still serves the checkout."""
    world = CommerceWorld.create()
    try:
        older = instrument(world.app, CallLog(), without="capture_payment")
        assert sorted(older.catalogues) == ["checkout"]
        trimmed = instrument(world.app, CallLog(), without="send_confirmation")
        assert "send_confirmation" not in trimmed.catalogue("fulfilment")
        assert "create_shipment" in trimmed.catalogue("fulfilment")
    finally:
        world.close()
