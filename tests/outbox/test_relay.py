"""The relay on every backend, with a fake clock: delivery in order, retries with backoff,
dead letters, contained and bounded sinks, stopping."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus
from pivotal.declarations.retry import RetryPolicy
from pivotal.examples.commerce import Fault, Faults
from pivotal.operations.relay import (
    DEFAULT_RETRY,
    CallableSink,
    DeliveryError,
    DeliveryRejected,
    Relay,
    RelayConfigError,
    RelayReport,
)
from pivotal.sagas.outbox import Message
from pivotal.store import Store

RunSagas = Callable[..., Awaitable[list[str]]]  # the ``sagas`` fixture
STEADY = RetryPolicy(max_attempts=3, base_delay=10.0, multiplier=2.0, jitter=False)


class Recorder:
    """A sink that keeps what it got; it fails while ``failing`` says so."""

    def __init__(self, name: str = "recorder") -> None:
        self.name = name
        self.got: list[Message] = []
        self.failing: BaseException | None = None

    async def deliver(self, message: Message) -> None:
        self.got.append(message)
        if self.failing is not None:
            raise self.failing


def relay(store: Store, clock: FakeClock, *sinks: object, **options: object) -> Relay:
    return Relay(store, list(sinks), clock=clock, rng=random.Random(0), **options)  # type: ignore[arg-type]


async def test_messages_are_delivered_once_each_in_order_per_saga(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    ids = await sagas(3, count=2)
    sink = Recorder()
    report = await relay(store, clock, sink, owner="r").run(until_idle=True, poll=1.0)

    assert (report.claimed, report.delivered, report.failed, report.dead) == (9, 9, 0, 0)
    for saga_id in ids:
        kept = [m.id for m in await store.messages(saga_id=saga_id)]
        assert [m.id for m in sink.got if m.saga_id == saga_id] == kept
    assert all(m.status == "delivered" for m in await store.messages())
    assert (await relay(store, clock, sink).run_once()) == RelayReport()


async def test_a_compensated_saga_is_announced(
    store: Store,
    clock: FakeClock,
    orchestrator: Orchestrator,
    faults: Faults,
    checkout_plan: Callable[..., Plan],
) -> None:
    faults.always("ship", Fault.PERMANENT)
    state = await orchestrator.execute(checkout_plan("o-77"))
    assert state.status is SagaStatus.COMPENSATED
    sink = Recorder()
    await relay(store, clock, sink).run(until_idle=True)
    (got,) = sink.got
    envelope = got.envelope()
    assert envelope["type"] == "saga.compensated"
    assert envelope["saga_id"] == state.saga_id
    assert envelope["id"] == got.id
    assert envelope["data"]["status"] == "compensated"


async def test_a_failing_sink_is_retried_with_backoff_then_the_message_is_dead(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    (saga_id,) = await sagas(1, count=1)
    sink = Recorder("flaky")
    sink.failing = RuntimeError("receiver down")
    r = relay(store, clock, sink, retry=STEADY)
    start = clock.now()

    assert (await r.run_once()).failed == 1
    (first,) = await store.messages(saga_id=saga_id, limit=1)
    assert first.attempts == 1
    assert first.next_attempt_at == start + 10
    assert first.last_error == "flaky: RuntimeError: receiver down"
    assert (await r.run_once()).claimed == 0  # not due yet, and nothing after it goes
    clock.advance(10)
    assert (await r.run_once()).failed == 1
    (second,) = await store.messages(saga_id=saga_id, limit=1)
    assert second.next_attempt_at == start + 10 + 20
    clock.advance(20)
    assert (await r.run_once()).dead == 1
    (dead,) = await store.messages(status="dead")
    assert dead.id == first.id
    assert dead.attempts == 3
    assert [m.id for m in sink.got] == [first.id] * 3  # the same id on every attempt

    sink.failing = None  # a dead message no longer holds its saga back
    assert (await r.run_once()).delivered == 1
    assert await store.replay_message(dead.id, clock.now())
    assert (await r.run_once()).delivered == 1
    assert sink.got[-1].id == dead.id


async def test_a_rejection_makes_the_message_dead_at_once(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    await sagas(1, count=0)
    sink = Recorder()
    sink.failing = DeliveryRejected("410 Gone")
    report = await relay(store, clock, sink).run_once()
    assert (report.failed, report.dead) == (0, 1)
    (dead,) = await store.messages(status="dead")
    assert dead.attempts == 1
    assert dead.last_error == "recorder: 410 Gone"


async def test_retry_after_from_the_receiver_is_respected(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    await sagas(1, count=0)
    sink = Recorder()
    sink.failing = DeliveryError("429", retry_after=600.0)
    await relay(store, clock, sink, retry=STEADY).run_once()
    (m,) = await store.messages()
    assert m.next_attempt_at == clock.now() + 600


async def test_a_hanging_sink_is_cut_off_and_retried(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    await sagas(1, count=0)

    async def hang(message: Message) -> None:
        await asyncio.Event().wait()

    report = await relay(store, clock, CallableSink(hang, name="hang"), timeout=0.2).run_once()
    assert report.failed == 1
    (m,) = await store.messages()
    assert m.status == "pending"
    assert m.last_error == "hang: no answer within 0.2 s"


async def test_a_sink_that_ignores_its_cancellation_is_left_behind(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    await sagas(1, count=0)
    finished = asyncio.Event()

    async def stubborn(message: Message) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await finished.wait()  # goes on after being cancelled, until the test lets go

    r = relay(store, clock, CallableSink(stubborn, name="stubborn"), timeout=0.2)
    report = await asyncio.wait_for(r.run_once(), 30)
    assert report.failed == 1
    (m,) = await store.messages()
    assert m.last_error == "stubborn: no answer within 0.2 s"
    finished.set()
    await asyncio.wait_for(asyncio.gather(*r._abandoned), 30)


@pytest.mark.parametrize(
    "failure",
    [KeyError("x"), asyncio.CancelledError(), SystemError("boom")],
    ids=["error", "cancelled", "system"],
)
async def test_whatever_a_sink_raises_is_a_failed_delivery(
    store: Store, clock: FakeClock, sagas: RunSagas, failure: BaseException
) -> None:
    await sagas(1, count=0)
    sink = Recorder()
    sink.failing = failure
    assert (await relay(store, clock, sink).run_once()).failed == 1


async def test_when_one_sink_fails_the_message_goes_again_to_every_sink(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    await sagas(1, count=0)
    good, bad = Recorder("good"), Recorder("bad")
    bad.failing = ConnectionError("refused")
    r = relay(store, clock, good, bad, retry=STEADY)
    assert (await r.run_once()).failed == 1
    bad.failing = None
    clock.advance(10)
    assert (await r.run_once()).delivered == 1
    assert len(good.got) == len(bad.got) == 2
    assert good.got[0].id == good.got[1].id


async def test_a_callable_sink_takes_only_its_types(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    await sagas(1, count=2)
    seen: list[str] = []

    async def completed(message: Message) -> None:
        seen.append(message.type)

    plain: list[str] = []
    report = await relay(
        store,
        clock,
        CallableSink(completed, types={"saga.completed"}),
        CallableSink(lambda m: plain.append(m.id)),  # type: ignore[arg-type,func-returns-value]
    ).run(until_idle=True)
    assert report.delivered == 3
    assert seen == ["saga.completed"]
    assert len(plain) == 3


async def test_a_run_stops_when_told_and_reports_its_totals(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    await sagas(2, count=1)
    stop = asyncio.Event()
    outcomes: list[str] = []

    def settled(message: Message, outcome: str, error: str | None) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 4:
            stop.set()
        raise RuntimeError("an observer's failure never stops the relay")

    r = relay(store, clock, Recorder(), on_settled=settled)
    total = await asyncio.wait_for(r.run(stop=stop, poll=3600), 30)
    assert total.delivered == 4
    assert outcomes == ["delivered"] * 4
    stop.set()
    assert await r.run(stop=stop) == RelayReport()


async def test_a_message_settled_after_its_lease_passed_on_is_counted_lost(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    await sagas(1, count=0)

    class Slow:
        name = "slow"

        async def deliver(self, message: Message) -> None:
            clock.advance(120)  # the lease ran out meanwhile, and another relay took it
            assert await store.claim_messages("other", clock.now(), 60, 10)

    report = await relay(store, clock, Slow(), lease_ttl=60, timeout=10).run_once()
    assert report.lost == 1


def test_inconsistent_settings_are_refused(store: Store, clock: FakeClock) -> None:
    with pytest.raises(RelayConfigError):
        Relay(store, [])
    with pytest.raises(RelayConfigError, match="shorter than the lease"):
        Relay(store, [Recorder()], timeout=60, lease_ttl=60)
    with pytest.raises(RelayConfigError):
        Relay(store, [Recorder()], batch=0)


def test_the_default_retry_spans_about_a_day() -> None:
    ceilings = [DEFAULT_RETRY.delay(n) for n in range(1, DEFAULT_RETRY.max_attempts)]
    no_jitter = replace(DEFAULT_RETRY, jitter=False)
    assert no_jitter.delay(1) == 5
    assert no_jitter.delay(2) == 30
    assert max(no_jitter.delay(n) for n in range(1, 10)) == 86_400
    assert all(0 <= c <= 86_400 for c in ceilings)
