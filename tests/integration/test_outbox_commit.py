"""Outbox messages are committed with the state change they announce, exactly then."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    MessageError,
    NothingToUndo,
    Orchestrator,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    Transient,
    parse_plan,
    replay,
)
from pivotal.examples.commerce import Fault
from pivotal.sagas.outbox import check_message
from pivotal.store import Store
from pivotal.testing import CommitFault, StoreFault, flaky_ledger


class Item(BaseModel):
    n: int


def one_step(catalogue: str, *names: str) -> Any:
    return parse_plan(
        {
            "catalogue": catalogue,
            "steps": [{"name": n, "args": {"n": i}} for i, n in enumerate(names)],
        }
    )


async def test_a_completed_saga_announces_its_outcome_once(orchestrator, store, checkout_plan):
    state = await orchestrator.execute(checkout_plan("o-1"), saga_id="ok")
    assert state.status is SagaStatus.COMPLETED

    [message] = await store.messages(saga_id="ok")
    assert message.type == "saga.completed"
    assert message.id == f"ok:{state.version}"  # the event's place in the saga's log
    assert message.status == "pending"
    assert message.payload["status"] == "completed"
    assert message.payload["provenance_ref"] == state.provenance_ref
    assert message.envelope()["id"] == message.id


async def test_a_compensated_saga_says_why_and_since_when(
    orchestrator, store, faults, checkout_plan, clock
):
    faults.always("ship", Fault.PERMANENT)
    state = await orchestrator.execute(checkout_plan("o-2"), saga_id="comp")
    assert state.status is SagaStatus.COMPENSATED
    assert state.compensating_since is not None

    [message] = await store.messages(saga_id="comp")
    assert message.type == "saga.compensated"
    assert "create_shipment" in message.payload["reason"]
    assert message.payload["compensating_since"] == state.compensating_since
    # what the ledger keeps is what its events say
    assert replay(await store.events("comp")) == (await store.load("comp")).state  # type: ignore[union-attr]


async def test_an_approval_request_is_announced_with_its_expiry(
    orchestrator, store, fulfilment_plan
):
    state = await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="big")
    assert state.status is SagaStatus.AWAITING_APPROVAL

    [message] = await store.messages(saga_id="big")
    assert message.type == "approval.requested"
    assert message.payload["step_name"] == "capture_payment"
    assert message.payload["expires_at"] == state.approval.expires_at  # type: ignore[union-attr]

    await orchestrator.reject("big", "ana", "not this one")
    types = [m.type for m in await store.messages(saga_id="big")]
    assert types == ["approval.requested", "saga.compensated"]


async def test_a_small_order_is_not_announced_until_it_ends(orchestrator, store, fulfilment_plan):
    await orchestrator.submit(fulfilment_plan(), saga_id="small")
    assert await store.messages(saga_id="small") == []
    await orchestrator.run("small")
    assert [m.type for m in await store.messages(saga_id="small")] == ["saga.completed"]


async def test_a_step_publishes_with_its_success_only(store: Store, clock: FakeClock) -> None:
    catalogue = Catalogue("pub")
    tries = {"n": 0}

    async def undo(args: Item, result: Any, ctx: StepContext) -> str:
        ctx.publish("order.refunded", {"n": args.n})
        return "refunded"

    @catalogue.compensable(undo=undo, retry=RetryPolicy(max_attempts=3, base_delay=0.0))
    async def charge(args: Item, ctx: StepContext) -> dict[str, int]:
        tries["n"] += 1
        ctx.publish("order.charged", {"n": args.n, "attempt": ctx.attempt})
        if tries["n"] == 1:
            raise Transient("gateway busy")  # this attempt's message is dropped with it
        return {"charged": args.n}

    @catalogue.compensable(undo=undo)
    async def ship(args: Item, ctx: StepContext) -> None:
        ctx.publish("order.shipped", {"n": args.n})
        raise Permanent("no carrier")  # took no effect: nothing announced

    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    state = await orch.execute(one_step("pub", "charge", "ship"), saga_id="p")
    assert state.status is SagaStatus.COMPENSATED

    messages = await store.messages(saga_id="p")
    assert [(m.type, m.payload.get("data")) for m in messages] == [
        ("order.charged", {"n": 0, "attempt": 2}),
        ("order.refunded", {"n": 0}),
        ("saga.compensated", None),
    ]
    charged, refunded, _ = messages
    assert (charged.payload["step_name"], charged.payload["undo"]) == ("charge", False)
    assert (refunded.payload["step_name"], refunded.payload["undo"]) == ("charge", True)
    assert len({m.id for m in messages}) == 3
    assert [m.seq for m in messages] == sorted(m.seq for m in messages)


@pytest.mark.parametrize(
    ("type_", "data", "why"),
    [
        ("", {}, "printable"),
        ("x" * 101, {}, "printable"),
        ("a\nb", {}, "printable"),
        ("t", [1, 2], "mapping"),
        ("t", {"x": object()}, "JSON"),
        ("t", {"x": float("nan")}, "JSON"),
        ("t", {"x": "y" * 20_001}, "larger"),
    ],
)
def test_a_message_that_cannot_be_kept_is_refused_with_the_reason(type_, data, why) -> None:
    with pytest.raises(MessageError, match=why):
        check_message(type_, data)


async def test_a_bad_publish_makes_the_outcome_unknown_not_no_effect(
    store: Store, clock: FakeClock
) -> None:
    catalogue = Catalogue("badpub")
    undone: list[str] = []

    async def undo(args: Item, result: Any, ctx: StepContext) -> str:
        undone.append(ctx.key)
        return NothingToUndo("no charge found")

    @catalogue.compensable(undo=undo)
    async def charge(args: Item, ctx: StepContext) -> None:
        ctx.publish("order.charged", {"when": object()})  # the effect may have happened

    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    state = await orch.execute(one_step("badpub", "charge"), saga_id="b")
    assert state.status is SagaStatus.COMPENSATED
    assert "MessageError" in (state.steps[0].error or "")
    assert undone == ["b:0:undo"]
    events = await store.events("b")
    assert events[-2].data == {"note": "no charge found", "noop": True}


@pytest.mark.parametrize("kind", [StoreFault.BEFORE_WRITE, StoreFault.AFTER_WRITE])
async def test_a_message_exists_exactly_when_its_change_does(
    store: Store, app, clock, checkout_plan, kind
) -> None:
    """The final commit fails: refused (no change, no message) or its reply lost (both
    landed); the next pass finishes the saga, and no message is doubled."""

    class Same:
        async def __aenter__(self) -> Store:
            return store

        async def __aexit__(self, *exc: object) -> None:
            return None

    counting = flaky_ledger(Same, [])
    async with counting() as counted:
        await Orchestrator(counted, app, clock=clock).execute(checkout_plan("o-8"), saga_id="n")
    last = counting.stores[0].commits  # the commit that completes a checkout saga
    ledger = flaky_ledger(Same, [CommitFault(last, kind)])
    async with ledger() as flaky:
        orch = Orchestrator(flaky, app, clock=clock, rng=random.Random(0))
        with pytest.raises(Exception, match="injected"):
            await orch.execute(checkout_plan("o-9"), saga_id="f")
        stored = await store.load("f")
        assert stored is not None
        landed = stored.state.status is SagaStatus.COMPLETED
        assert landed is (kind is StoreFault.AFTER_WRITE)
        assert [m.type for m in await store.messages(saga_id="f")] == (
            ["saga.completed"] if landed else []
        )
        if not landed:
            await orch.run("f")
    assert [m.type for m in await store.messages(saga_id="f")] == ["saga.completed"]
