"""The rules of ``pivotal.engine.machine`` met through the real driver and ledger: a client
library's own timeout, a pass stalled between its intent and its call, a compensation that
must not repeat a call just to undo it, a non-repeatable step after a transient error, and
a hold whose age is known after a crash."""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable
from typing import Any

from pydantic import BaseModel

from pivotal import (
    Catalogue,
    EventType,
    FakeClock,
    Orchestrator,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    StepStatus,
    Transient,
    UndoStatus,
    parse_plan,
)
from pivotal.declarations.plan import Plan
from pivotal.hooks import Point
from pivotal.store import Store

ONCE = RetryPolicy(max_attempts=1)
TWICE = RetryPolicy(max_attempts=2, base_delay=0.01)
LANDS_AFTER = 5.0  # seconds after a call that its effect lands (well inside the window)


class Item(BaseModel):
    n: int = 0


class SlowProvider:
    """A provider that does NOT deduplicate by key: every call makes an effect, which lands
    ``LANDS_AFTER`` seconds after the call (on the fake clock); its lookup and its undo see
    only what has landed."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.landings: list[tuple[str, float]] = []
        self.undone: list[str] = []
        self.calls: list[str] = []

    def apply(self, key: str) -> None:
        self.calls.append(key)
        self.landings.append((key, self.clock.now() + LANDS_AFTER))

    def landed(self, key: str) -> int:
        return sum(1 for k, at in self.landings if k == key and at <= self.clock.now())

    def find(self, key: str) -> dict[str, Any] | None:
        return {"key": key} if self.landed(key) else None

    def undo(self, key: str) -> str:
        if self.landed(key) > self.undone.count(key):
            self.undone.append(key)
            return f"undid {key}"
        return "nothing to undo"

    def in_place(self, key: str) -> int:
        """Effects of ``key`` that exist once everything has landed, less the undone."""
        return sum(1 for k, _ in self.landings if k == key) - self.undone.count(key)


def plan(*names: str) -> Plan:
    return parse_plan(
        {
            "catalogue": "doubt",
            "steps": [{"name": n, "args": {"n": i}} for i, n in enumerate(names)],
        }
    )


def catalogue_for(provider: SlowProvider, raises: type[Exception], **options: Any) -> Catalogue:
    """``charge`` sends its request (it will land) and then raises ``raises``, as a client
    library whose own timeout fired would; ``refuse`` (the pivot) always declines."""
    catalogue = Catalogue("doubt")

    async def find(args: Item, ctx: StepContext) -> dict[str, Any] | None:
        return provider.find(ctx.key)

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        return provider.undo(ctx.action_key)

    @catalogue.compensable(undo=refund, lookup=find, **options)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        provider.apply(ctx.key)
        raise raises("read timed out")

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    return catalogue


def orch(store: Store, catalogue: Catalogue, clock: FakeClock, **kw: Any) -> Orchestrator:
    return Orchestrator(store, catalogue, clock=clock, rng=random.Random(0), **kw)


async def test_a_client_library_timeout_leaves_the_call_in_doubt_until_it_cannot_land(
    store: Store, clock: FakeClock
) -> None:
    """Before, the lookup's "not found" a moment after the library's timeout was believed:
    the step was recorded failed, never undone, and the charge landed and stayed."""
    provider = SlowProvider(clock)
    o = orch(store, catalogue_for(provider, TimeoutError, retry=ONCE), clock)

    state = await o.execute(plan("charge", "refuse"), saga_id="s")

    assert state.status is SagaStatus.COMPENSATED
    charge = state.steps[0]
    assert charge.status is not StepStatus.FAILED
    assert charge.undo_status is UndoStatus.DONE
    assert provider.in_place("s:0") == 0, "the charge that landed late was left in place"
    events = await o.store.events("s")
    [started] = [e for e in events if e.type is EventType.STEP_STARTED]
    [undo] = [e for e in events if e.type is EventType.UNDO_STARTED]
    assert undo.at >= started.data["deadline"]  # the undo waited until it could not land
    # the wait is the action's: nothing of the undo was ever in doubt before its first call
    waits = [e for e in events if e.type is EventType.UNDO_RETRY_SCHEDULED and e.at < undo.at]
    assert waits
    assert all(e.data.get("doubt_until") is None for e in waits)
    # what a person reads says when in words, never as a raw timestamp
    told = [str(e.data["error"]) for e in events if "take effect until" in str(e.data.get("error"))]
    assert told
    assert all(re.search(r"until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", t) for t in told), told


async def test_a_step_that_is_not_repeatable_is_not_called_again_after_a_transient_error(
    store: Store, clock: FakeClock
) -> None:
    """Before, a transient error was retried with the key at once: two charges from a
    provider that does not deduplicate."""
    provider = SlowProvider(clock)
    catalogue = catalogue_for(provider, Transient, retry=TWICE, repeatable=False)
    o = orch(store, catalogue, clock)

    state = await o.execute(plan("charge", "refuse"), saga_id="s")

    # its lookup, asked once the first call could no longer land, found the charge
    assert provider.calls == ["s:0"]
    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].undo_status is UndoStatus.DONE
    assert provider.in_place("s:0") == 0


class Stall:
    """A hook that stalls the pass between the charge's intent and its call, for longer
    than the call may take (a paused process, well inside its lease)."""

    def __init__(self, clock: FakeClock, seconds: float, at: Point = Point.AFTER_INTENT) -> None:
        self.clock, self.seconds, self.at, self.done = clock, seconds, at, False

    def __call__(self, point: Point, index: int) -> Awaitable[None] | None:
        if point is self.at and index == 0 and not self.done:
            self.done = True
            self.clock.advance(self.seconds)
        return None


async def test_a_call_is_not_started_after_the_deadline_its_intent_recorded(
    store: Store, clock: FakeClock
) -> None:
    """Before, a call started after a stall got a fresh full bound, and could land after
    the deadline the ledger had recorded for it."""
    calls: list[float] = []
    catalogue = Catalogue("doubt", default_timeout=10, doubt_grace=5)

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        return "nothing to undo"

    @catalogue.compensable(undo=refund, retry=ONCE)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        calls.append(clock.now())
        return {"ok": True}

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    o = orch(store, catalogue, clock, hook=Stall(clock, 11))
    state = await o.execute(plan("charge", "refuse"), saga_id="s")

    assert calls == []
    assert state.steps[0].status is StepStatus.FAILED
    events = await o.store.events("s")
    [failed] = [e for e in events if e.type is EventType.STEP_FAILED]
    assert failed.data["outcome"] == "not_started"
    assert state.status is SagaStatus.COMPENSATED


async def test_an_undo_is_not_started_after_the_deadline_its_intent_recorded(
    store: Store, clock: FakeClock
) -> None:
    """The same rule for an undo: stalled past its deadline, it is not called then; its next
    attempt is."""
    undo_at: list[float] = []
    catalogue = Catalogue("doubt", default_timeout=10, doubt_grace=5)

    async def refund(args: Item, result: Any, ctx: StepContext) -> str:
        undo_at.append(clock.now())
        return "refunded"

    @catalogue.compensable(undo=refund, retry=ONCE)
    async def charge(args: Item, ctx: StepContext) -> dict[str, Any]:
        return {"ok": True}

    @catalogue.pivot(retry=ONCE)
    async def refuse(args: Item, ctx: StepContext) -> None:
        raise Permanent("declined")

    o = orch(store, catalogue, clock, hook=Stall(clock, 11, Point.AFTER_UNDO_INTENT))
    state = await o.execute(plan("charge", "refuse"), saga_id="s")

    assert state.status is SagaStatus.COMPENSATED
    events = await o.store.events("s")
    starts = [e for e in events if e.type is EventType.UNDO_STARTED]
    assert [e.attempt for e in starts] == [1, 2]
    assert len(undo_at) == 1  # only the second attempt called it
    assert undo_at[0] < starts[1].data["deadline"]
