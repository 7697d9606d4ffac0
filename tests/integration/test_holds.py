"""Holds that lapse on their own (prefer deferral): a step declares ``lapses_after``; an
undo after the lapse is recorded as lapsed without a call; the pivot is not begun on holds
that may lapse before its call ends; an approval is asked for no longer than the holds
cover the pivot, and one given later is refused."""

from __future__ import annotations

import math
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pivotal import (
    ApprovalStatus,
    Catalogue,
    CatalogueError,
    EventType,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    StepStatus,
    UndoStatus,
    parse_plan,
)
from pivotal.declarations.exposure import Moves
from pivotal.declarations.holds import cover, lapsed_since
from pivotal.declarations.identity import MONEY, OrderId
from pivotal.declarations.policy import ThresholdPolicy
from pivotal.hooks import Point
from pivotal.observability.metrics import PivotalMetrics
from pivotal.sagas.state import StepRecord, replay
from pivotal.testing import CrashAt, CrashSite, SimulatedCrash

LAPSE = 900.0  # the reservation lapses 15 minutes after it is made
TIMEOUT = 60.0  # the capture's call may take a minute
GRACE = 30.0  # the catalogue's doubt_grace


class Order(BaseModel):
    order: OrderId
    amount: Annotated[int, MONEY] = 100


class Provider:
    """Holds made and released, by key."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.held: set[str] = set()
        self.release_fails = False
        self.capture_fails = False

    def reserve(self, key: str) -> dict[str, str]:
        self.calls.append(f"reserve {key}")
        self.held.add(key)
        return {"reservation": key}

    def release(self, key: str) -> str:
        self.calls.append(f"release {key}")
        if self.release_fails:
            raise ConnectionError("inventory did not answer")
        self.held.discard(key)
        return "released"


def holds_catalogue(
    provider: Provider, *, threshold: int | None = None, lookup: bool = False
) -> Catalogue:
    cat = Catalogue(
        "holds",
        approval=None if threshold is None else ThresholdPolicy(threshold=threshold),
        default_timeout=TIMEOUT,
        doubt_grace=GRACE,
    )

    async def find(args: Order, ctx: StepContext) -> dict[str, str] | None:
        return {"reservation": ctx.key} if ctx.key in provider.held else None

    @cat.compensable(
        lapses_after=LAPSE,
        undo_retry=RetryPolicy(max_attempts=2, base_delay=0.0),
        lookup=find if lookup else None,
    )
    async def reserve(args: Order, ctx: StepContext) -> dict[str, str]:
        return provider.reserve(ctx.key)

    @reserve.undo
    async def release(args: Order, result: Any, ctx: StepContext) -> str:
        return provider.release(ctx.action_key)

    @cat.compensable(
        retry=RetryPolicy(max_attempts=3, base_delay=2000.0, max_delay=2000.0, jitter=False)
    )
    async def slow(args: Order, ctx: StepContext) -> None:
        provider.calls.append(f"slow {ctx.attempt}")
        if ctx.attempt == 1:
            raise ConnectionError("the warehouse system is busy")

    @slow.undo
    async def unslow(args: Order, result: Any, ctx: StepContext) -> None:
        provider.calls.append("unslow")

    @cat.pivot(moves=Moves(currency="EUR", per="order"))
    async def capture(args: Order, ctx: StepContext) -> dict[str, str]:
        provider.calls.append(f"capture {ctx.key}")
        if provider.capture_fails:
            raise Permanent("the card was declined")
        return {"captured": ctx.key}

    cat.check()
    return cat


def plan(*steps: str, amount: int = 100) -> Any:
    return parse_plan(
        {
            "catalogue": "holds",
            "steps": [{"name": s, "args": {"order": "o-1", "amount": amount}} for s in steps],
            "rationale": "hold first, capture last",
        }
    )


@pytest.fixture
def provider() -> Provider:
    return Provider()


async def test_a_release_after_the_hold_lapsed_is_recorded_lapsed_without_a_call(
    make_orchestrator, store, clock, provider
) -> None:
    orchestrator = make_orchestrator(holds_catalogue(provider, threshold=50))
    made = clock.now()
    state = await orchestrator.execute(plan("reserve", "capture"), saga_id="late")
    assert state.status is SagaStatus.AWAITING_APPROVAL

    clock.advance(LAPSE + GRACE)  # the reservation has certainly lapsed now
    state = await orchestrator.reject("late", "ops-lead", "too late to tell")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].undo_status is UndoStatus.LAPSED
    assert state.steps[0].undo_attempts == 0
    assert provider.calls == ["reserve late:0"]  # nothing was called to release it
    events = await store.events("late")
    [lapsed] = [e for e in events if e.type is EventType.UNDO_LAPSED]
    assert lapsed.step == 0
    assert "the hold lapsed on its own" in lapsed.data["note"]
    assert "nothing was called" in lapsed.data["note"]
    assert not [e for e in events if e.type is EventType.UNDO_STARTED]
    assert replay(events) == state
    assert (await orchestrator.get("late")).state == state  # its times are in the ledger
    assert state.steps[0].effect_from == made

    metrics = PivotalMetrics()
    metrics.committed(None, state, events)
    labels = {"catalogue": "holds", "step": "reserve", "outcome": "lapsed"}
    assert metrics.registry.get_sample_value("pivotal_undos_total", labels) == 1


async def test_before_the_lapse_is_certain_the_undo_is_called(
    make_orchestrator, clock, provider
) -> None:
    orchestrator = make_orchestrator(holds_catalogue(provider))
    provider.capture_fails = True

    clock.advance(0)
    state = await orchestrator.execute(plan("reserve", "capture"), saga_id="soon")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].undo_status is UndoStatus.DONE
    assert provider.calls == ["reserve soon:0", "capture soon:1", "release soon:0"]


async def test_the_pivot_is_not_begun_on_a_hold_that_may_lapse_during_its_call(
    make_orchestrator, clock, provider
) -> None:
    """The retry of a step between the hold and the pivot waits 2000 s: by then the
    reservation may lapse before the capture could end, so nothing is captured."""
    orchestrator = make_orchestrator(holds_catalogue(provider))

    state = await orchestrator.execute(plan("reserve", "slow", "capture"), saga_id="gap")

    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[2].status is StepStatus.PENDING  # never called
    assert not [c for c in provider.calls if c.startswith("capture")]
    assert "capture was not begun: the hold reserve (step 0) may lapse from" in (state.reason or "")
    assert "must begin by" in (state.reason or "")
    # the reservation is long lapsed by now (2000 s > 900 + 30): recorded, not called
    assert state.steps[0].undo_status is UndoStatus.LAPSED
    assert state.steps[1].undo_status is UndoStatus.DONE
    assert "release gap:0" not in provider.calls


async def test_the_approval_request_expires_when_the_hold_could_lapse(
    make_orchestrator, clock, provider
) -> None:
    orchestrator = make_orchestrator(holds_catalogue(provider, threshold=50))
    made = clock.now()

    state = await orchestrator.execute(plan("reserve", "capture"), saga_id="ask")

    approval = state.approval
    assert approval is not None
    assert approval.status is ApprovalStatus.PENDING
    begin_by = made + LAPSE - TIMEOUT - GRACE
    assert approval.expires_at == begin_by  # not the policy's day
    assert "decide by" in approval.reason
    assert "the hold reserve (step 0) may lapse from" in approval.reason

    clock.advance(begin_by - clock.now())  # the approval comes at the bound: too late
    state = await orchestrator.approve("ask", "ops-lead", "fine")

    assert state.approval is not None
    assert state.approval.status is ApprovalStatus.EXPIRED
    assert state.status is SagaStatus.COMPENSATED
    assert "approval for capture expired before a decision" in (state.reason or "")
    assert "it could not outlast the holds: the hold reserve (step 0)" in (state.reason or "")
    assert not [c for c in provider.calls if c.startswith("capture")]
    # the lapse is not yet certain: the release is called
    assert state.steps[0].undo_status is UndoStatus.DONE


async def test_an_approval_given_in_time_but_run_after_the_bound_is_refused(
    make_orchestrator, clock, provider
) -> None:
    orchestrator = make_orchestrator(holds_catalogue(provider, threshold=50))
    await orchestrator.execute(plan("reserve", "capture"), saga_id="slowrun")
    clock.advance(60)
    await orchestrator.approve("slowrun", "ops-lead", "fine", run=False)

    clock.advance(LAPSE)  # no worker took it up in time
    state = await orchestrator.run("slowrun")

    assert state.status is SagaStatus.COMPENSATED
    assert "expired before the step ran; it could not outlast the holds" in (state.reason or "")
    assert not [c for c in provider.calls if c.startswith("capture")]


async def test_holds_already_too_old_to_ask_compensate_without_asking(
    make_orchestrator, clock, provider
) -> None:
    orchestrator = make_orchestrator(holds_catalogue(provider, threshold=50))

    state = await orchestrator.execute(plan("reserve", "slow", "capture"), saga_id="noask")

    assert state.approval is None  # nobody was asked to approve what could not run
    assert state.status is SagaStatus.COMPENSATED
    assert "capture was not begun" in (state.reason or "")


async def test_a_parked_release_of_a_hold_that_has_since_lapsed_settles(
    make_orchestrator, store, clock, provider
) -> None:
    orchestrator = make_orchestrator(holds_catalogue(provider))
    provider.capture_fails = provider.release_fails = True

    state = await orchestrator.execute(plan("reserve", "capture"), saga_id="parked")
    assert state.status is SagaStatus.COMPENSATION_FAILED
    [letter] = await store.dead_letters()
    calls = len(provider.calls)

    clock.advance(LAPSE + GRACE + 1)
    assert await orchestrator.retry_dead_letter(letter.id) is True

    state = (await orchestrator.get("parked")).state
    assert state.status is SagaStatus.COMPENSATED
    assert state.steps[0].undo_status is UndoStatus.LAPSED
    assert len(provider.calls) == calls  # settled without calling the release again
    assert await store.dead_letters() == []


async def test_a_saga_without_holds_is_unchanged(make_orchestrator, clock, provider) -> None:
    orchestrator = make_orchestrator(holds_catalogue(provider))
    state = await orchestrator.execute(plan("slow", "capture"), saga_id="plain")
    assert state.status is SagaStatus.COMPLETED


def test_an_in_doubt_hold_lapses_only_after_its_last_attempt_could_land(provider) -> None:
    step = holds_catalogue(provider)["reserve"]
    rec = StepRecord(
        0,
        "reserve",
        "compensable",
        status=StepStatus.UNKNOWN,
        effect_from=100.0,
        effect_by=160.0,
        doubt_until=250.0,
    )
    assert lapsed_since(step, rec, GRACE) == 250.0 + LAPSE + GRACE
    done = StepRecord(0, "reserve", "compensable", status=StepStatus.SUCCEEDED, effect_by=160.0)
    assert lapsed_since(step, done, GRACE) == 160.0 + LAPSE + GRACE
    assert lapsed_since(step, StepRecord(0, "reserve", "compensable"), GRACE) is None


def test_the_cover_counts_from_the_first_attempt(provider) -> None:
    from pivotal.sagas.state import SagaState

    cat = holds_catalogue(provider)
    state = SagaState(
        saga_id="s",
        catalogue="holds",
        plan_digest="d",
        provenance_ref="p",
        status=SagaStatus.RUNNING,
        steps=(
            StepRecord(
                0,
                "reserve",
                "compensable",
                status=StepStatus.SUCCEEDED,
                effect_from=100.0,
                effect_by=400.0,
            ),
            StepRecord(1, "capture", "pivot"),
        ),
        created_at=100.0,
        updated_at=400.0,
        version=3,
    )
    bound = cover(state, cat, 1)
    assert bound is not None
    assert bound.begin_by == 100.0 + LAPSE - TIMEOUT - GRACE
    assert bound.hold.index == 0


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, True, "900"])
def test_a_lapse_must_be_a_positive_finite_time(bad: Any) -> None:
    cat = Catalogue("bad")
    with pytest.raises(CatalogueError, match="lapses_after must be a positive, finite"):

        @cat.compensable(lapses_after=bad)
        async def hold(args: Order, ctx: StepContext) -> None: ...


def test_only_a_compensable_step_can_lapse() -> None:
    cat = Catalogue("bad")
    with pytest.raises(CatalogueError, match="pivot step 'capture' cannot lapse"):
        cat.pivot(name="capture", lapses_after=60.0)(_capture)  # type: ignore[call-arg]


async def _capture(args: Order, ctx: StepContext) -> None: ...


async def test_the_fulfilment_example_defers_a_stale_order_to_its_lapsing_holds(
    orchestrator, store, services, fulfilment_plan, clock
) -> None:
    """The fulfilment catalogue reserves (a two-day hold) and authorises (seven days)
    before it captures: an order nobody decided on for eight days costs nothing to undo."""
    from pivotal.examples.commerce.catalogues import AUTHORISATION_HOLD, RESERVATION_HOLD

    plan = fulfilment_plan("4471", amount="180.00")
    state = await orchestrator.execute(plan, saga_id="stale")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    assert state.approval is not None
    assert "decide by" not in state.approval.reason  # the holds outlast the policy's day
    held = plan.calls()[0].call.args
    stock = services.available(held["sku"], held["warehouse"])  # the reserved units are out

    clock.advance(8 * 86_400.0)
    services.lapse_holds("4471")  # the warehouse and the card network let them go
    state = await orchestrator.reject("stale", "ops-lead", "nobody looked for a week")

    assert state.status is SagaStatus.COMPENSATED
    reserve, authorize = state.steps[0], state.steps[1]
    assert (reserve.undo_status, authorize.undo_status) == (UndoStatus.LAPSED, UndoStatus.LAPSED)
    assert services.calls("release") == services.calls("void") == []
    assert services.calls("capture") == []
    assert [p["status"] for p in services.rows("payments")] == ["lapsed"]
    assert services.available(held["sku"], held["warehouse"]) == stock + held["quantity"]
    assert RESERVATION_HOLD < AUTHORISATION_HOLD


async def test_sagas_show_says_the_hold_lapsed(make_orchestrator, store, clock, provider) -> None:
    from rich.console import Console

    from pivotal.views.render import saga_view

    orchestrator = make_orchestrator(holds_catalogue(provider))
    state = await orchestrator.execute(plan("reserve", "slow", "capture"), saga_id="shown")
    console = Console(width=200, record=True)
    console.print(saga_view(state, await store.events("shown"), None, "holds"))
    text = console.export_text()

    assert "lapsed (0): the hold lapsed on its own" in text
    assert "undo_lapsed" in text


async def test_a_hold_recovered_after_it_lapsed_is_not_released(
    make_orchestrator, store, clock, provider
) -> None:
    """A crash right after the reservation was made; the saga is recovered days later. The
    hold's age counts from the call that made it (bounded by its deadline), not from the
    recovery: its release is recorded lapsed, and nothing is called."""
    cat = holds_catalogue(provider, lookup=True)
    crashing = make_orchestrator(cat)
    crashing.hook = CrashAt(CrashSite(Point.AFTER_EFFECT, 0))
    with pytest.raises(SimulatedCrash):
        await crashing.execute(plan("reserve", "capture"), saga_id="old")

    clock.advance(3 * 86400)  # recovered three days later
    orchestrator = make_orchestrator(cat)
    state = await orchestrator.run("old")

    assert state.status is SagaStatus.COMPENSATED
    reserve_rec = state.steps[0]
    assert reserve_rec.undo_status is UndoStatus.LAPSED
    assert [c for c in provider.calls if c.startswith("release")] == []
