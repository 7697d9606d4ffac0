"""A step's announcement is derived from its recorded result, however its success was
established: by the action's own reply, by ``lookup`` after a lost reply or a crash, or by a
settling repeat. It is committed with the success, in the same transaction, exactly once."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    Orchestrator,
    SagaStatus,
    StepContext,
    parse_plan,
)
from pivotal.declarations.catalogue import Announcement
from pivotal.declarations.plan import Plan
from pivotal.hooks import Point
from pivotal.operations.worker import Sweeper
from pivotal.sagas.outbox import Message
from pivotal.sagas.state import StepStatus
from pivotal.store import Store
from pivotal.testing import CrashAt, CrashSite, SimulatedCrash

TTL = 30.0


class Charge(BaseModel):
    order_id: str
    amount: int


class Provider:
    """A payment provider that deduplicates by key; ``lose_reply`` makes the next charge
    land and then raise (the reply was lost on the way back)."""

    def __init__(self) -> None:
        self.charges: dict[str, dict[str, Any]] = {}
        self.calls = 0
        self.lose_reply = False

    def catalogue(self, *, lookup: bool = True, publish: bool = False) -> Catalogue:
        catalogue = Catalogue("announce")

        async def find(args: Charge, ctx: StepContext) -> dict[str, Any] | None:
            return self.charges.get(ctx.key)

        def charged(args: Charge, result: Any) -> list[Announcement]:
            return [
                ("order.charged", {"order_id": args.order_id, "charge": result["charge"]}),
                ("ledger.posted", {"amount": args.amount}),
            ]

        async def refund(args: Charge, result: Any, ctx: StepContext) -> str:
            self.charges.pop(ctx.action_key, None)
            return "refunded"

        @catalogue.compensable(undo=refund, lookup=find if lookup else None, announce=charged)
        async def charge(args: Charge, ctx: StepContext) -> dict[str, Any]:
            self.calls += 1
            if publish:
                ctx.publish("order.noted", {"attempt": ctx.attempt})
            found = self.charges.setdefault(
                ctx.key, {"charge": f"ch-{len(self.charges) + 1}", "amount": args.amount}
            )
            if self.lose_reply:
                self.lose_reply = False
                raise RuntimeError("the reply was lost after the charge")
            return found

        @catalogue.pivot()
        async def confirm(args: Charge, ctx: StepContext) -> None:
            return None

        return catalogue


def plan() -> Plan:
    args = {"order_id": "o-1", "amount": 180}
    return parse_plan(
        {
            "catalogue": "announce",
            "steps": [{"name": "charge", "args": args}, {"name": "confirm", "args": args}],
        }
    )


def charged(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.type in ("order.charged", "ledger.posted")]


async def test_a_direct_success_announces_from_its_result(store: Store, clock: FakeClock) -> None:
    provider = Provider()
    orch = Orchestrator(store, provider.catalogue(), clock=clock, rng=random.Random(0))
    state = await orch.execute(plan(), saga_id="a")
    assert state.status is SagaStatus.COMPLETED

    messages = await store.messages(saga_id="a")
    assert [(m.type, m.payload["data"]) for m in charged(messages)] == [
        ("order.charged", {"order_id": "o-1", "charge": "ch-1"}),
        ("ledger.posted", {"amount": 180}),
    ]
    first, second = charged(messages)
    assert (first.id, second.id) == ("a:0#0", "a:0#1")  # the step's key and the position
    assert (first.payload["step_name"], first.payload["undo"]) == ("charge", False)


async def test_a_lost_reply_settled_by_lookup_still_announces_once(
    store: Store, clock: FakeClock
) -> None:
    provider = Provider()
    provider.lose_reply = True
    orch = Orchestrator(store, provider.catalogue(), clock=clock, rng=random.Random(0))
    state = await orch.execute(plan(), saga_id="l")
    assert state.status is SagaStatus.COMPLETED
    assert provider.calls == 1  # settled by the lookup, not by charging again
    events = await store.events("l")
    [succeeded] = [e for e in events if e.type.value == "step_succeeded" and e.step == 0]
    assert succeeded.data["via"] == "lookup"

    found = charged(await store.messages(saga_id="l"))
    assert [(m.type, m.id) for m in found] == [
        ("order.charged", "l:0#0"),
        ("ledger.posted", "l:0#1"),
    ]
    assert found[0].payload["data"] == {"order_id": "o-1", "charge": "ch-1"}


@pytest.mark.parametrize("lookup", [True, False], ids=["by-lookup", "by-repeat"])
@pytest.mark.parametrize(
    "site",
    [
        CrashSite(Point.AFTER_EFFECT, 0),  # the success was never recorded
        CrashSite(Point.BEFORE_INTENT, 1),  # recorded, held back for the next commit
        CrashSite(Point.AFTER_INTENT, 1),  # committed with the next intent
    ],
    ids=str,
)
async def test_a_crash_after_the_effect_then_recovery_announces_exactly_once(
    store: Store, clock: FakeClock, site: CrashSite, lookup: bool
) -> None:
    provider = Provider()
    catalogue = provider.catalogue(lookup=lookup)
    dying = Orchestrator(
        store, catalogue, clock=clock, owner="dying", lease_ttl=TTL, hook=CrashAt(site)
    )
    with pytest.raises(SimulatedCrash):
        await dying.execute(plan(), saga_id="c")

    heir = Orchestrator(store, catalogue, clock=clock, owner="heir", lease_ttl=TTL)
    clock.advance(TTL + 1)
    await Sweeper(heir).sweep()
    state = (await heir.get("c")).state
    if state.status is not SagaStatus.COMPLETED:
        state = await heir.run("c")
    assert state.status is SagaStatus.COMPLETED
    assert state.steps[0].status is StepStatus.SUCCEEDED
    assert len(provider.charges) == 1  # one charge, whatever settled it
    [succeeded] = [
        e for e in await store.events("c") if e.type.value == "step_succeeded" and e.step == 0
    ]
    if lookup and site.point is not Point.AFTER_INTENT:  # it was never committed: found
        assert succeeded.data["via"] == "lookup"

    found = charged(await store.messages(saga_id="c"))
    assert [(m.type, m.id) for m in found] == [
        ("order.charged", "c:0#0"),
        ("ledger.posted", "c:0#1"),
    ]
    assert found[0].payload["data"] == {"order_id": "o-1", "charge": "ch-1"}


async def test_publish_keeps_working_beside_announce_but_only_for_a_returned_call(
    store: Store, clock: FakeClock
) -> None:
    """``ctx.publish`` belongs to the call that returned: a success settled by lookup has no
    such call, so only the announcement is committed."""
    provider = Provider()
    catalogue = provider.catalogue(publish=True)
    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    await orch.execute(plan(), saga_id="p")
    assert [m.type for m in await store.messages(saga_id="p")] == [
        "order.noted",
        "order.charged",
        "ledger.posted",
        "saga.completed",
    ]

    provider.lose_reply = True
    await orch.execute(plan(), saga_id="q")
    assert [m.type for m in await store.messages(saga_id="q")] == [
        "order.charged",
        "ledger.posted",
        "saga.completed",
    ]


async def test_an_announcement_that_fails_is_itself_announced_never_dropped(
    store: Store, clock: FakeClock
) -> None:
    catalogue = Catalogue("broken")

    def bad(args: Charge, result: Any) -> list[Announcement]:
        raise KeyError("charge")

    async def refund(args: Charge, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=refund, announce=bad)
    async def charge(args: Charge, ctx: StepContext) -> dict[str, str]:
        return {"id": "x"}

    orch = Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))
    state = await orch.execute(
        parse_plan(
            {
                "catalogue": "broken",
                "steps": [{"name": "charge", "args": {"order_id": "o", "amount": 1}}],
            }
        ),
        saga_id="b",
    )
    assert state.status is SagaStatus.COMPLETED  # the charge exists: it is not undone
    assert state.steps[0].result == {"id": "x"}
    [failed, _] = await store.messages(saga_id="b")
    assert failed.type == "step.announce_failed"
    assert "KeyError" in failed.payload["data"]["error"]
    assert failed.payload["step_name"] == "charge"


def test_announce_is_refused_when_it_is_not_callable() -> None:
    catalogue = Catalogue("x")
    with pytest.raises(Exception, match="announce"):

        @catalogue.pivot(announce="order.charged")  # type: ignore[typeddict-item]
        async def charge(args: Charge, ctx: StepContext) -> None:
            return None
