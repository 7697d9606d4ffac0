"""Acting on many sagas at once (``pivotal.operations.bulk``): each act's outcome for each kind of
saga as a table, the bound on how many one act selects, and an act interrupted in the middle
that a second call finishes without doing anything twice."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from rich.console import Console

from pivotal import Orchestrator, Plan, SagaStatus
from pivotal.clock import FakeClock
from pivotal.errors import InvalidInput, VersionConflict
from pivotal.examples.commerce import CommerceApp, CommerceServices, Fault
from pivotal.operations.bulk import (
    MAX_SAGAS,
    Act,
    Outcome,
    Result,
    TooManySagas,
    act,
    counts,
    select,
)
from pivotal.orchestration.rerun import rerun_id
from pivotal.sagas.state import Event, EventType
from pivotal.store import Store
from pivotal.store.search import SagaFilter
from pivotal.views import render

PlanBuilder = Callable[..., Plan]
Setup = Callable[[Orchestrator, CommerceServices, PlanBuilder], Awaitable[str]]


async def submitted(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    await orch.submit(plan("k-1"), saga_id="s")
    return "s"


async def aborted(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    await orch.submit(plan("k-1"), saga_id="s")
    await orch.abort("s", "ana", "before", run=True)
    return "s"


async def completed(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    assert (await orch.execute(plan("k-1"), saga_id="s")).status is SagaStatus.COMPLETED
    return "s"


async def compensated(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    services.faults.next("charge", Fault.PERMANENT)
    assert (await orch.execute(plan("k-1"), saga_id="s")).status is SagaStatus.COMPENSATED
    services.faults.clear()
    return "s"


async def rerun_before(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    await compensated(orch, services, plan)
    await orch.rerun("s", "ana")
    return "s"


async def dead_letter(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    """Compensation failed: the stock release is parked; the fault is cleared after."""
    services.faults.next("charge", Fault.PERMANENT).always("release", Fault.PERMANENT)
    state = await orch.execute(plan("k-1"), saga_id="s")
    assert state.status is SagaStatus.COMPENSATION_FAILED
    services.faults.clear()
    return "s"


async def due(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    await dead_letter(orch, services, plan)
    [letter] = await orch.store.dead_letters("open")
    assert await orch.store.schedule_dead_letter(letter.id, orch.clock.now())
    return "s"


async def settled(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    await dead_letter(orch, services, plan)
    [letter] = await orch.store.dead_letters("open")
    assert await orch.retry_dead_letter(letter.id)
    return "s"


async def nothing(orch: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> str:
    return "nope"


# (act, the saga, outcome, code)
TABLE: list[tuple[Act, Setup, Outcome, str | None]] = [
    (Act.ABORT, submitted, Outcome.ACTED, None),
    (Act.ABORT, aborted, Outcome.ALREADY, None),
    (Act.ABORT, completed, Outcome.REFUSED, "saga_not_abortable"),
    (Act.ABORT, compensated, Outcome.REFUSED, "saga_not_abortable"),
    (Act.ABORT, nothing, Outcome.NOT_FOUND, None),
    (Act.RERUN, compensated, Outcome.ACTED, None),
    (Act.RERUN, rerun_before, Outcome.ALREADY, None),
    (Act.RERUN, completed, Outcome.REFUSED, "saga_not_rerunnable"),
    (Act.RERUN, nothing, Outcome.NOT_FOUND, None),
    (Act.RETRY_DEAD_LETTERS, dead_letter, Outcome.ACTED, None),
    (Act.RETRY_DEAD_LETTERS, settled, Outcome.ALREADY, None),
    (Act.RETRY_DEAD_LETTERS, due, Outcome.ALREADY, None),
    (Act.RETRY_DEAD_LETTERS, completed, Outcome.REFUSED, "no_dead_letter"),
    (Act.RETRY_DEAD_LETTERS, nothing, Outcome.NOT_FOUND, None),
]


@pytest.mark.parametrize(
    ("chosen", "setup", "outcome", "code"),
    TABLE,
    ids=[f"{a.value}-{s.__name__}" for a, s, _, _ in TABLE],
)
async def test_each_act_on_each_kind_of_saga(
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    chosen: Act,
    setup: Setup,
    outcome: Outcome,
    code: str | None,
) -> None:
    saga_id = await setup(orchestrator, services, checkout_plan)
    before = await orchestrator.store.load(saga_id)
    [result] = await act(orchestrator, chosen, [saga_id], "bob", "duplicate orders")
    assert (result.saga_id, result.outcome, result.code) == (saga_id, outcome, code)
    after = await orchestrator.store.load(saga_id)
    if outcome is not Outcome.ACTED and before and after:
        assert after.state.version == before.state.version  # refused or done before: nothing
    if chosen is Act.RERUN and outcome in (Outcome.ACTED, Outcome.ALREADY):
        assert result.rerun == rerun_id(saga_id)
        rerun_of = (await orchestrator.get(result.rerun)).plan.provenance.rerun_of
        assert rerun_of is not None
        # who asked and why, with the new saga (one made before keeps its own)
        expected = "duplicate orders" if outcome is Outcome.ACTED else None
        assert (rerun_of.by, rerun_of.reason) == ("bob" if expected else "ana", expected)
    if chosen is Act.RETRY_DEAD_LETTERS and outcome is Outcome.ACTED:
        [letter] = await orchestrator.store.dead_letters("open")  # due now, for a sweep
        assert letter.next_retry_at is not None
        assert letter.next_retry_at <= orchestrator.clock.now()
        note = (await orchestrator.store.events(saga_id))[-1]  # who asked, on the saga
        assert note.type is EventType.DEAD_LETTERS_DUE
        assert (note.data["by"], note.data["letters"]) == ("bob", [letter.id])
        assert note.data["why"] == "duplicate orders"  # the reason, as every act keeps it
        said = f"dead letters {letter.id} due now, asked by bob: duplicate orders"
        assert said in render_text(render.timeline(after.state, [note]))  # type: ignore[union-attr]
        assert after is not None
        assert after.state.status is before.state.status  # type: ignore[union-attr]
    if chosen is Act.ABORT and outcome is Outcome.ACTED:
        assert after is not None
        assert after.state.status is SagaStatus.COMPENSATING
        assert after.state.reason == "aborted by bob: duplicate orders"


@pytest.mark.parametrize(
    ("chosen", "by", "reason", "said"),
    [
        (Act.ABORT, "bob", "  ", "needs a reason"),
        (Act.ABORT, "bob", "bell \x07", "control characters"),
        (Act.ABORT, " ", "why", "needs who asked"),
        (Act.RERUN, "", "", "needs who asked"),
        (Act.RERUN, "bob", "bell \x07", "control characters"),  # recorded: checked as any
    ],
)
async def test_bad_input_is_refused_before_any_saga_is_touched(
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    chosen: Act,
    by: str,
    reason: str,
    said: str,
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="s")
    with pytest.raises(InvalidInput, match=said):
        await act(orchestrator, chosen, ["s"], by, reason)
    assert (await orchestrator.get("s")).state.status is SagaStatus.SUBMITTED


async def many(orchestrator: Orchestrator, checkout_plan: PlanBuilder, n: int) -> list[str]:
    ids = [f"m{i:02}" for i in range(n)]
    for i, saga_id in enumerate(ids):
        await orchestrator.submit(checkout_plan(f"k-{i}"), saga_id=saga_id)
    return ids


async def test_select_walks_the_search_in_order_and_refuses_past_the_bound(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    ids = await many(orchestrator, checkout_plan, 5)
    oldest = SagaFilter(status=(SagaStatus.SUBMITTED,), order="asc")
    assert await select(orchestrator.store, oldest, bound=5) == ids
    with pytest.raises(TooManySagas, match="selects 5 sagas; one bulk act takes at most 4"):
        await select(orchestrator.store, oldest, bound=4)
    assert MAX_SAGAS == 500
    with pytest.raises(InvalidInput, match="needs at least one filter"):
        await select(orchestrator.store, SagaFilter(order="asc"))


async def test_an_interrupted_act_is_finished_by_a_second_call_and_nothing_is_doubled(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await many(orchestrator, checkout_plan, 5)
    wanted = SagaFilter.parse({"status": "submitted,compensating"}, 0.0)
    real = orchestrator.abort
    done: list[str] = []

    async def stops_after_two(saga_id: str, *args: Any, **kwargs: Any) -> Any:
        if len(done) == 2:
            raise RuntimeError("the process was stopped")
        done.append(saga_id)
        return await real(saga_id, *args, **kwargs)

    monkeypatch.setattr(orchestrator, "abort", stops_after_two)
    chosen = await select(orchestrator.store, wanted)
    with pytest.raises(RuntimeError):
        await act(orchestrator, Act.ABORT, chosen, "bob", "a bad batch")
    monkeypatch.setattr(orchestrator, "abort", real)

    again: list[Result] = await act(
        orchestrator, Act.ABORT, await select(orchestrator.store, wanted), "bob", "a bad batch"
    )
    assert counts(again) == {"acted": 3, "already": 2, "refused": 0, "not_found": 0}
    assert {r.saga_id for r in again if r.outcome is Outcome.ALREADY} == set(done)
    for saga_id in ids:
        events = await orchestrator.store.events(saga_id)
        started = [e for e in events if e.type is EventType.COMPENSATION_STARTED]
        assert len(started) == 1, saga_id


# -- retrying dead letters: the answer is what the ledger did ---------------------------


class SettledFirst:
    """Delegates to a store; a person settles each dead letter by hand just before it is
    made due (between the bulk act's read of the letters and its schedule)."""

    def __init__(self, store: Store, settle: Callable[[int], Awaitable[None]]) -> None:
        self._store, self.settle = store, settle

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def schedule_dead_letter(self, dead_letter_id: int, at: float) -> bool:
        await self.settle(dead_letter_id)
        return await self._store.schedule_dead_letter(dead_letter_id, at)


class ChangingMeanwhile:
    """Delegates to a store; every write without a lease (a note) loses its version race."""

    def __init__(self, store: Store) -> None:
        self._store, self.refused = store, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def commit(self, before: Any, after: Any, events: Any, epoch: int | None) -> None:
        if epoch is None:
            self.refused += 1
            raise VersionConflict("changed meanwhile")
        await self._store.commit(before, after, events, epoch)


def render_text(view: Any) -> str:
    console = Console(width=400, record=True)
    console.print(view)
    return console.export_text()


def notes(events: list[Event]) -> list[Event]:
    return [e for e in events if e.type is EventType.DEAD_LETTERS_DUE]


async def test_a_letter_settled_before_it_is_made_due_is_neither_counted_nor_noted(
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    app: CommerceApp,
    clock: FakeClock,
) -> None:
    saga_id = await dead_letter(orchestrator, services, checkout_plan)

    async def settle(dead_letter_id: int) -> None:
        await orchestrator.resolve_dead_letter(dead_letter_id, "ops", "released by hand")

    racing = Orchestrator(
        SettledFirst(orchestrator.store, settle),  # type: ignore[arg-type]
        app,
        clock=clock,
        rng=random.Random(0),
    )
    [result] = await act(racing, Act.RETRY_DEAD_LETTERS, [saga_id], "bob", "warehouse back")

    assert result.outcome is Outcome.ALREADY  # settled meanwhile: nothing made due
    assert await orchestrator.store.dead_letters("open") == []
    assert notes(await orchestrator.store.events(saga_id)) == []


async def test_only_the_letters_made_due_are_noted(
    orchestrator: Orchestrator, services: CommerceServices, checkout_plan: PlanBuilder
) -> None:
    saga_id = await dead_letter(orchestrator, services, checkout_plan)
    [letter] = await orchestrator.store.dead_letters("open")

    done = await orchestrator.dead_letters_due(saga_id, [letter.id, letter.id + 1000], "bob")

    assert (done.made, done.noted) == ((letter.id,), True)
    [note] = notes(await orchestrator.store.events(saga_id))
    assert (note.data["by"], note.data["letters"]) == ("bob", [letter.id])
    nothing = await orchestrator.dead_letters_due(saga_id, [letter.id + 1000], "bob")
    assert (nothing.made, nothing.noted) == ((), False)  # nothing made due: nothing noted
    assert len(notes(await orchestrator.store.events(saga_id))) == 1


async def test_a_note_that_keeps_losing_its_race_leaves_the_letters_due_and_says_so(
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    app: CommerceApp,
    clock: FakeClock,
) -> None:
    saga_id = await dead_letter(orchestrator, services, checkout_plan)
    [letter] = await orchestrator.store.dead_letters("open")
    changing = ChangingMeanwhile(orchestrator.store)
    busy = Orchestrator(changing, app, clock=clock, rng=random.Random(0))  # type: ignore[arg-type]

    done = await busy.dead_letters_due(saga_id, [letter.id], "bob")

    assert (done.made, done.noted) == ((letter.id,), False)  # not an error: they are due
    assert changing.refused == 3
    [due] = await orchestrator.store.dead_letters("open")
    assert due.next_retry_at is not None
    assert due.next_retry_at <= clock.now()
    assert notes(await orchestrator.store.events(saga_id)) == []
    # the bulk act says the same: acted (the letters are due), the note not written
    clock.advance(1)
    await orchestrator.store.schedule_dead_letter(letter.id, clock.now() + 3600)
    [result] = await act(busy, Act.RETRY_DEAD_LETTERS, [saga_id], "bob", "warehouse back")
    assert result.outcome is Outcome.ACTED
    assert result.code is None
    assert result.message is not None
    assert "not noted" in result.message
