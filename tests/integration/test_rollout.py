"""Step 6 of the migration, low-value sagas first: a catalogue's rollout lets agent plans
execute below an exposure and keeps the others in shadow or refuses them, on both ledgers;
people's plans are not limited, and the exposure is the approval policy's own measure."""

from __future__ import annotations

from decimal import Decimal

import pytest
from rich.console import Console

from pivotal import SagaStatus
from pivotal.cli.report import render
from pivotal.declarations.plan import ActorType, Plan, Provenance
from pivotal.declarations.policy import Rollout
from pivotal.errors import PlanRejected, RolloutRefused, RolloutShadowed
from pivotal.store.planning_records import PlanningMode, PlanningOutcome
from pivotal.views.report import Period, build_report


def by(plan: Plan, actor: ActorType) -> Plan:
    who = Provenance(actor_type=actor, actor_id="bot-7" if actor is ActorType.AGENT else "ana")
    return plan.model_copy(update={"provenance": who})


@pytest.fixture
def limited(app):
    def limit(above: str = "shadow", catalogue: str = "checkout") -> None:
        app.catalogue(catalogue).rollout = Rollout(execute_below=Decimal("50"), above=above)

    return limit


async def rollout_runs(store):
    return await store.runs(PlanningMode.SHADOW, batch_id="rollout")


async def test_an_agent_plan_below_the_limit_executes(limited, orchestrator, store, checkout_plan):
    limited("shadow")
    plan = by(checkout_plan("o-low", amount="20.00"), ActorType.AGENT)
    state = await orchestrator.execute(plan, saga_id="low")
    assert state.status is SagaStatus.COMPLETED
    [submitted] = (await store.events("low"))[:1]
    assert submitted.data["rollout"]["exposure"] == "20.00"
    assert await rollout_runs(store) == []


async def test_an_agent_plan_above_the_limit_is_kept_in_shadow(
    limited, orchestrator, store, checkout_plan, services
) -> None:
    limited("shadow")
    plan = by(checkout_plan("o-high", amount="80.00"), ActorType.AGENT)
    with pytest.raises(RolloutShadowed) as shadowed:
        await orchestrator.submit(plan, saga_id="high")
    assert shadowed.value.code == "rollout_shadow"
    assert await store.load("high") is None  # no saga: nothing can run it
    with pytest.raises(RolloutShadowed):  # every path: execute too
        await orchestrator.execute(plan)
    assert await store.list_sagas() == []
    assert services.calls("charge") == []
    runs = await rollout_runs(store)
    assert len(runs) == 2
    [run] = [r for r in runs if r.run_id == shadowed.value.run_id]
    assert run.outcome is PlanningOutcome.ACCEPTED  # validated and scored
    assert run.plan == plan
    assert run.saga_id is None
    assert run.planner.actor_type is ActorType.AGENT
    assert run.request.context["exposure"] == "80.00"


async def test_an_agent_plan_above_the_limit_is_refused(
    limited, orchestrator, store, checkout_plan
) -> None:
    limited("refuse")
    plan = by(checkout_plan("o-high", amount="80.00"), ActorType.AGENT)
    with pytest.raises(RolloutRefused) as refused:
        await orchestrator.submit(plan, saga_id="high")
    assert refused.value.code == "rollout_refused"
    assert "not below the rollout limit 50" in refused.value.detail  # for people
    assert "50" not in refused.value.message  # the agent is told the outcome, not the limit
    assert await store.list_sagas() == []
    [run] = await rollout_runs(store)  # kept for the count, with no plan that could run
    assert run.outcome is PlanningOutcome.REJECTED
    assert run.plan is None
    assert [e.code for e in run.attempts[0].errors] == ["rollout_refused"]


async def test_a_plan_a_person_submitted_is_not_limited(
    limited, orchestrator, store, checkout_plan
) -> None:
    limited("refuse")
    for actor in (ActorType.HUMAN, ActorType.SYSTEM):
        plan = by(checkout_plan(f"o-{actor.value}", amount="80.00"), actor)
        state = await orchestrator.submit(plan, saga_id=f"s-{actor.value}")
        assert state.status is SagaStatus.SUBMITTED
    assert await rollout_runs(store) == []


async def test_an_invalid_plan_is_rejected_before_the_rollout(
    limited, orchestrator, store, checkout_plan
) -> None:
    limited("shadow")
    plan = by(checkout_plan("o-bad", amount="900.00"), ActorType.AGENT)  # over 500: invalid
    with pytest.raises(PlanRejected):
        await orchestrator.submit(plan)
    assert await rollout_runs(store) == []


async def test_the_exposure_is_the_approval_policys_measure(
    app, limited, orchestrator, store, checkout_plan, fulfilment_plan
) -> None:
    checkout = app.catalogue("checkout")
    plan = checkout_plan("o-m", amount="30.00")
    rollout = Rollout(execute_below=Decimal("50"))
    assert rollout.exposure(plan, checkout) == Decimal("30.00")
    # fulfilment's ThresholdPolicy looks at the capture only, the one step there that
    # declares the value it moves: authorize + capture of 40 is 40, not 80, and executes
    # below 50
    limited("shadow", "fulfilment")
    fulfil = by(fulfilment_plan("o-f", amount="40.00"), ActorType.AGENT)
    fulfilment = app.catalogue("fulfilment")
    assert fulfilment.rollout.exposure(fulfil, fulfilment) == Decimal("40.00")
    state = await orchestrator.submit(fulfil, saga_id="f")
    assert state.status is SagaStatus.SUBMITTED
    assert await rollout_runs(store) == []


def test_a_rollout_is_checked() -> None:
    with pytest.raises(ValueError, match="execute_below"):
        Rollout(execute_below=Decimal("-1"))
    with pytest.raises(ValueError, match="above"):
        Rollout(execute_below=Decimal("1"), above="run")  # type: ignore[arg-type]
    assert Rollout(execute_below="50").execute_below == Decimal("50")  # type: ignore[arg-type]


async def test_the_report_shows_the_setting_and_what_the_rollout_did(
    app, limited, orchestrator, store, checkout_plan, clock
) -> None:
    limited("shadow")
    await orchestrator.submit(by(checkout_plan("o-1", amount="20.00"), ActorType.AGENT))
    await orchestrator.submit(by(checkout_plan("o-2", amount="80.00"), ActorType.HUMAN))
    with pytest.raises(RolloutShadowed):
        await orchestrator.submit(by(checkout_plan("o-3", amount="80.00"), ActorType.AGENT))
    limited("refuse")
    with pytest.raises(RolloutRefused):
        await orchestrator.submit(by(checkout_plan("o-4", amount="90.00"), ActorType.AGENT))
    now = clock.now()
    found = await build_report(store, Period(now - 3600, now + 1), now=now)
    [entry] = found.rollout
    assert (entry.catalogue, entry.executed, entry.shadowed, entry.refused) == (
        "checkout",
        1,
        1,
        1,
    )
    assert "execute below 50" in entry.setting
    assert found.model_dump(mode="json")["rollout"][0]["shadowed"] == 1
    console = Console(width=200, record=True)
    console.print(render(found))
    text = console.export_text()
    assert "rollout (agent plans)" in text
    assert "agent plans execute below 50" in text
