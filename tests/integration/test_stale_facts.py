"""A plan is validated again against fresh facts before the point of no return and after a
wait: an order that changed while its approval waited is not captured at the old amount.

Document 002: "Stale approval. A human approves a capture, but the order changed while the
request waited. Re-check preconditions at execution time."
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pivotal import (
    App,
    ApprovalStatus,
    Catalogue,
    EventType,
    FakeClock,
    Orchestrator,
    SagaStatus,
    StaleApproval,
    StepContext,
    StepStatus,
    parse_plan,
)
from pivotal.declarations.exposure import Moves
from pivotal.declarations.identity import MONEY, OrderId
from pivotal.declarations.plan import Plan
from pivotal.declarations.policy import ThresholdPolicy
from pivotal.declarations.rules import FromFact
from pivotal.examples.commerce.services import CommerceServices
from pivotal.store import Store


def set_amount(services: CommerceServices, order_id: str, amount: str) -> None:
    """The order system changes the order's total (the customer added an item, say)."""
    row = services.db.execute(
        "SELECT details FROM orders WHERE order_id = ?", (order_id,)
    ).fetchone()
    details = json.loads(row[0] or "{}") | {"amount": amount}
    services.db.execute(
        "UPDATE orders SET details = ? WHERE order_id = ?", (json.dumps(details), order_id)
    )


@pytest.fixture
async def paused(orchestrator, fulfilment_plan):
    """Order 4471 for 180 (standard tier, threshold 150): waits for approval before the
    capture."""
    state = await orchestrator.execute(fulfilment_plan("4471", amount="180.00"), saga_id="big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state


async def test_an_approval_while_the_order_no_longer_matches_is_refused(
    paused, orchestrator, store, services
) -> None:
    set_amount(services, "4471", "200")
    before = await store.events("big")

    with pytest.raises(StaleApproval, match="amount") as refused:
        await orchestrator.approve("big", "maria")

    assert refused.value.code == "approval_stale"
    assert "200" in str(refused.value)
    assert "180" in str(refused.value)
    assert await store.events("big") == before  # nothing was recorded
    state = (await orchestrator.get("big")).state
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.PENDING
    assert services.calls("capture") == []

    # a person can still say no; and once the order is back to 180, yes
    set_amount(services, "4471", "180")
    state = await orchestrator.approve("big", "maria")
    assert state.status is SagaStatus.COMPLETED


async def test_an_order_that_changed_after_the_approval_is_not_captured(
    paused, orchestrator, store, services, check
) -> None:
    """Approved at 180; the total became 200 before the saga ran on: re-checked just before
    the pivot, the plan no longer holds, and the saga compensates with the reason."""
    await orchestrator.approve("big", "maria", run=False)
    set_amount(services, "4471", "200")

    state = await orchestrator.run("big")

    assert state.status is SagaStatus.COMPENSATED
    assert services.calls("capture") == []
    assert state.steps[2].status is StepStatus.PENDING  # the capture never began
    reason = state.reason or ""
    assert "the trusted facts changed since the plan was validated" in reason
    assert "capture_payment" in reason
    assert "amount" in reason
    assert "200" in reason
    assert "180" in reason
    assert "fact_mismatch" in reason
    assert [p["status"] for p in services.rows("payments")] == ["voided"]
    assert [r["status"] for r in services.rows("reservations")] == ["released"]
    await check("big")


async def test_facts_that_cannot_be_read_at_the_recheck_go_to_a_person(
    paused, orchestrator, store, services, app, monkeypatch
) -> None:
    await orchestrator.approve("big", "maria", run=False)

    def down(context: Mapping[str, object]) -> dict[str, object]:
        raise ConnectionError("order system down")

    monkeypatch.setattr(app, "facts", down)
    state = await orchestrator.run("big")

    assert state.status is SagaStatus.NEEDS_HUMAN
    assert "could not be re-checked" in (state.reason or "")
    assert "order system down" in (state.reason or "")
    assert services.calls("capture") == []

    monkeypatch.undo()  # the order system answers again: a person resumes it
    state = await orchestrator.resume("big", "ops", "order system is back", run=True)
    assert state.status is SagaStatus.COMPLETED
    assert len(services.calls("capture")) == 1


async def test_an_approval_when_the_facts_cannot_be_read_is_refused(
    paused, orchestrator, app, monkeypatch
) -> None:
    def down(context: Mapping[str, object]) -> dict[str, object]:
        raise ConnectionError("order system down")

    monkeypatch.setattr(app, "facts", down)
    with pytest.raises(StaleApproval, match="could not be re-checked"):
        await orchestrator.approve("big", "maria")
    assert (await orchestrator.get("big")).state.status is SagaStatus.AWAITING_APPROVAL


@pytest.fixture
def hanging_facts(app, monkeypatch):
    """The app's facts callback never answers (until the test ends); the catalogue bounds
    its calls at 0.2 s, so a re-check gives up that soon."""
    import threading

    stuck = threading.Event()

    def hangs(context: Mapping[str, object]) -> dict[str, object]:
        stuck.wait(30)
        return {}

    def hang() -> None:
        monkeypatch.setattr(app.catalogue("fulfilment"), "default_timeout", 0.2)
        monkeypatch.setattr(app, "facts", hangs)

    yield hang
    stuck.set()
    for thread in threading.enumerate():  # each gives its slot back before the next test
        if thread.name == "pivotal-facts":
            thread.join(30)


async def test_facts_that_hang_at_the_recheck_go_to_a_person(
    paused, orchestrator, services, hanging_facts
) -> None:
    await orchestrator.approve("big", "maria", run=False)
    hanging_facts()

    state = await orchestrator.run("big")

    assert state.status is SagaStatus.NEEDS_HUMAN
    assert "could not be re-checked" in (state.reason or "")
    assert "the trusted facts did not answer within 0.2s" in (state.reason or "")
    assert services.calls("capture") == []


async def test_an_approval_when_the_facts_hang_is_refused(
    paused, orchestrator, hanging_facts
) -> None:
    hanging_facts()
    with pytest.raises(StaleApproval, match=r"did not answer within 0\.2s"):
        await orchestrator.approve("big", "maria")
    assert (await orchestrator.get("big")).state.status is SagaStatus.AWAITING_APPROVAL


# -- a catalogue of its own ------------------------------------------------------------


class Pay(BaseModel):
    order_id: OrderId
    amount: Annotated[int, MONEY]


class Shop(App):
    def __init__(self, catalogue: Catalogue) -> None:
        super().__init__([catalogue], name="shop")
        self.totals = {"o-1": 180}
        self.asked = 0

    def facts(self, context: Mapping[str, object]) -> dict[str, object]:
        self.asked += 1
        order = str(context.get("order_id"))
        return {"amount": self.totals[order]} if order in self.totals else {}


def shop(calls: list[str]) -> Shop:
    catalogue = Catalogue("shop", rules=[FromFact("amount")], recheck_after=60.0)

    async def void(args: Pay, result: Any, ctx: StepContext) -> None:
        calls.append(f"void {args.amount}")

    @catalogue.compensable(undo=void)
    async def hold(args: Pay, ctx: StepContext) -> None:
        calls.append(f"hold {args.amount}")
        if args.order_id == "o-1" and app.totals.get("changing") == 1:
            app.totals["o-1"] = 200  # the order changes while the saga runs

    @catalogue.pivot(moves=Moves(currency="EUR", per="order_id"))
    async def capture(args: Pay, ctx: StepContext) -> None:
        calls.append(f"capture {args.amount}")

    @catalogue.compensable(undo=void)
    async def note(args: Pay, ctx: StepContext) -> None:
        calls.append(f"note {args.amount}")

    app = Shop(catalogue)
    return app


def pay_plan(*names: str) -> Plan:
    args = {"order_id": "o-1", "amount": 180}
    return parse_plan({"catalogue": "shop", "steps": [{"name": n, "args": args} for n in names]})


async def test_the_pivot_is_rechecked_even_without_a_wait(store: Store, clock: FakeClock) -> None:
    calls: list[str] = []
    app = shop(calls)
    app.totals["changing"] = 1
    orch = Orchestrator(store, app, clock=clock, rng=random.Random(0))

    state = await orch.execute(pay_plan("hold", "capture"), saga_id="s")

    assert state.status is SagaStatus.COMPENSATED
    assert calls == ["hold 180", "void 180"]
    assert "hold.amount is 180" in (state.reason or "")
    assert "trusted value (amount) is 200" in (state.reason or "")


async def test_a_step_after_a_wait_is_rechecked_but_not_each_step_of_one_pass(
    store: Store, clock: FakeClock
) -> None:
    calls: list[str] = []
    app = shop(calls)
    orch = Orchestrator(store, app, clock=clock, rng=random.Random(0))

    await orch.execute(pay_plan("hold", "note", "capture"), saga_id="ok")
    assert calls == ["hold 180", "note 180", "capture 180"]
    assert app.asked == 2  # at submission, and just before the pivot

    calls.clear()
    await orch.submit(pay_plan("note", "hold", "capture"), saga_id="late")
    app.totals["o-1"] = 200
    clock.advance(61)  # it waited longer than the catalogue's recheck_after
    state = await orch.run("late")
    assert state.status is SagaStatus.COMPENSATED
    assert calls == []  # re-checked before the first step: nothing ran
    events = await store.events("late")
    assert EventType.STEP_STARTED not in [e.type for e in events]
    assert "the trusted facts changed since the plan was validated" in (state.reason or "")


def test_recheck_after_must_not_be_negative() -> None:
    with pytest.raises(Exception, match="recheck_after"):
        Catalogue("x", recheck_after=-1)


async def test_facts_that_keep_hanging_take_only_a_few_threads(
    paused, orchestrator, hanging_facts
) -> None:
    hanging_facts()
    for _ in range(4):  # each leaves a thread waiting for the callback
        with pytest.raises(StaleApproval, match="did not answer within"):
            await orchestrator.approve("big", "maria")
    with pytest.raises(StaleApproval, match="earlier calls of the trusted facts"):
        await orchestrator.approve("big", "maria")  # no fifth thread: refused in its time


async def test_an_approval_that_expires_during_the_recheck_does_not_run_the_pivot(
    store: Store, clock: FakeClock
) -> None:
    """The re-check before the pivot may take as long as the facts take to answer: an
    approval that expired meanwhile is expired, not acted on."""
    calls: list[str] = []
    app = shop(calls)
    app.catalogue("shop").approval = ThresholdPolicy(threshold=150)
    orch = Orchestrator(store, app, clock=clock, rng=random.Random(0))
    state = await orch.execute(pay_plan("hold", "capture"), saga_id="s")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    expires_at = state.approval.expires_at if state.approval else 0.0
    slow = app.facts

    def facts_slowly(context: Mapping[str, object]) -> dict[str, object]:
        clock.advance(max(0.0, expires_at - clock.now()) + 1)  # it answers after the expiry
        return slow(context)

    await orch.approve("s", "maria", run=False)
    app.facts = facts_slowly  # type: ignore[method-assign]
    state = await orch.run("s")

    assert calls == ["hold 180", "void 180"]  # never captured
    assert state.status is SagaStatus.COMPENSATED
    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.EXPIRED
