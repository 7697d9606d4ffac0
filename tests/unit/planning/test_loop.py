"""The re-plan loop without a ledger: attempts, errors handed back, the cap, repeats."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from pivotal import ActorType, Catalogue, FakeClock, InvalidInput, StepContext
from pivotal.planning import (
    PlannerError,
    PlannerInfo,
    PlanningOutcome,
    PlanRequest,
    ScriptedPlanner,
    propose_plan,
)
from pivotal.planning.loop import MAX_PLAN_CHARS, MAX_RAW_CHARS


class Amount(BaseModel):
    amount: int = Field(ge=1, le=100)


def make_catalogue(checks: list[int]) -> Catalogue:
    """hold (compensable), take (pivot, counts its precondition checks), tell (retriable)."""
    catalogue = Catalogue("tiny", "A tiny catalogue.")

    async def unhold(args: Amount, result: Any, ctx: StepContext) -> None:
        return None

    def counted(args: Amount) -> str | None:
        checks.append(args.amount)
        return None

    @catalogue.compensable(undo=unhold)
    async def hold(args: Amount, ctx: StepContext) -> None:
        """Hold an amount."""

    @catalogue.pivot(precondition=counted)
    async def take(args: Amount, ctx: StepContext) -> None:
        """Take the amount."""

    @catalogue.retriable()
    async def tell(args: Amount, ctx: StepContext) -> None:
        """Tell someone."""

    return catalogue


def steps(*names: str, amount: int = 5) -> dict[str, Any]:
    return {"steps": [{"name": n, "args": {"amount": amount}} for n in names]}


GOOD = steps("hold", "take", "tell")
REQUEST = PlanRequest(text="do the thing", context={"amount": 5}, source_document_id="doc-1")


@pytest.fixture
def checks() -> list[int]:
    return []


@pytest.fixture
def tiny(checks: list[int]) -> Catalogue:
    return make_catalogue(checks)


async def test_accepted_on_the_first_try(tiny) -> None:
    planner = ScriptedPlanner([GOOD | {"rationale": "because"}])
    run = await propose_plan(REQUEST, planner, tiny, run_id="run-1", clock=FakeClock())

    assert run.outcome is PlanningOutcome.ACCEPTED
    assert [a.accepted for a in run.attempts] == [True]
    assert len(planner.turns) == 1
    assert planner.turns[0].errors == ()
    assert run.plan is not None
    assert [c.call.name for c in run.plan.calls()] == ["hold", "take", "tell"]
    assert run.plan.rationale == "because"
    prov = run.plan.provenance
    assert prov.actor_type is ActorType.AGENT
    assert (prov.actor_id, prov.model, prov.prompt_version) == ("scripted",) * 3
    assert (prov.run_id, prov.source_document_id) == ("run-1", "doc-1")


async def test_accepted_after_one_replan_with_the_errors_handed_back(tiny) -> None:
    planner = ScriptedPlanner([steps("hold", "take", "refund", "tell"), GOOD])
    run = await propose_plan(REQUEST, planner, tiny)

    assert run.outcome is PlanningOutcome.ACCEPTED
    assert [a.accepted for a in run.attempts] == [False, True]
    first, second = planner.turns
    assert (first.attempt, second.attempt, second.max_attempts) == (1, 2, 3)
    [error] = second.errors
    assert (error.code, error.step, error.path) == ("unknown_step", "refund", "steps[2].name")
    assert second.previous is run.attempts[0]
    assert second.view is first.view  # rendered once per run


async def test_escalates_after_the_cap(tiny) -> None:
    bad = [steps("take", "hold"), steps("hold", amount=500), steps("nope")]
    planner = ScriptedPlanner([*bad, GOOD])
    run = await propose_plan(REQUEST, planner, tiny, max_replans=2)

    assert run.outcome is PlanningOutcome.REJECTED
    assert run.plan is None
    assert len(planner.turns) == 3  # 1 + max_replans, the fourth (good) proposal never asked
    assert [[e.code for e in a.errors] for a in run.attempts] == [
        ["kind_order"],
        ["invalid_args"],
        ["unknown_step"],
    ]
    assert "no valid plan after 3 attempt(s)" in run.summary()


@pytest.mark.parametrize("max_replans", [0, 1, 4])
async def test_the_cap_is_one_plus_max_replans(tiny, max_replans) -> None:
    planner = ScriptedPlanner([steps("nope")] * 10)
    run = await propose_plan(REQUEST, planner, tiny, max_replans=max_replans)
    assert len(run.attempts) == len(planner.turns) == 1 + max_replans


async def test_negative_replans_are_refused(tiny) -> None:
    with pytest.raises(InvalidInput):
        await propose_plan(REQUEST, ScriptedPlanner([GOOD]), tiny, max_replans=-1)


async def test_an_identical_proposal_fails_without_being_validated_again(tiny, checks) -> None:
    again = steps("hold", "take", amount=500)  # invalid: amount above 100
    planner = ScriptedPlanner([again, again | {"rationale": "same plan, new words"}, GOOD])
    run = await propose_plan(REQUEST, planner, tiny, max_replans=2)

    first, second, third = run.attempts
    assert [e.code for e in first.errors] == ["invalid_args", "invalid_args"]
    assert second.repeat_of == 1
    assert [e.code for e in second.errors] == ["repeated_proposal", *(["invalid_args"] * 2)]
    assert third.accepted
    # the pivot's precondition ran for the accepted plan only: the repeat was not re-checked
    assert checks == [5]


async def test_a_repeat_of_a_repeat_points_at_the_first_rejection(tiny) -> None:
    same = steps("tell", "hold")
    run = await propose_plan(REQUEST, ScriptedPlanner([same] * 3), tiny)
    assert [a.repeat_of for a in run.attempts] == [None, 1, 1]
    assert [e.code for e in run.attempts[2].errors] == ["repeated_proposal", "kind_order"]


async def test_a_planner_failure_is_a_failed_attempt(tiny) -> None:
    flaky = PlannerError("the model said something odd", raw="odd")
    planner = ScriptedPlanner([flaky, GOOD])
    run = await propose_plan(REQUEST, planner, tiny)

    assert run.outcome is PlanningOutcome.ACCEPTED
    failed = run.attempts[0]
    assert failed.plan is None
    assert failed.raw_reply == "odd"
    assert [(e.code, e.message) for e in failed.errors] == [
        ("planner_failed", "the model said something odd")
    ]
    assert planner.turns[1].errors == failed.errors


async def test_a_final_planner_failure_ends_the_loop(tiny) -> None:
    planner = ScriptedPlanner([PlannerError("cannot help", final=True), GOOD])
    run = await propose_plan(REQUEST, planner, tiny, max_replans=2)
    assert run.outcome is PlanningOutcome.REJECTED
    assert len(run.attempts) == len(planner.turns) == 1


async def test_provenance_is_written_by_the_loop_not_the_planner(tiny) -> None:
    forged = GOOD | {
        "provenance": {"actor_type": "human", "actor_id": "the-cfo", "run_id": "forged"}
    }
    run = await propose_plan(REQUEST, ScriptedPlanner([forged]), tiny, run_id="run-9")
    assert run.plan is not None
    prov = run.plan.provenance
    assert (prov.actor_type, prov.actor_id, prov.run_id) == (ActorType.AGENT, "scripted", "run-9")


async def test_a_system_planner_is_recorded_as_a_system_actor(tiny) -> None:
    info = PlannerInfo(actor_type=ActorType.SYSTEM, actor_id="cron", prompt_version="v7")
    run = await propose_plan(REQUEST, ScriptedPlanner([GOOD], info=info), tiny)
    assert run.plan is not None
    prov = run.plan.provenance
    assert (prov.actor_type, prov.actor_id, prov.model, prov.prompt_version) == (
        ActorType.SYSTEM,
        "cron",
        None,
        "v7",
    )
    assert prov.source_document_id == "doc-1"


async def test_the_request_id_stands_in_for_a_missing_source_document(tiny) -> None:
    request = PlanRequest(text="t", request_id="req-42")
    run = await propose_plan(request, ScriptedPlanner([GOOD]), tiny)
    assert run.plan is not None
    assert run.plan.provenance.source_document_id == "req-42"


async def test_malformed_plan_data_is_a_failed_attempt_with_paths(tiny) -> None:
    planner = ScriptedPlanner([{"steps": "all of them", "approved": True}, GOOD])
    run = await propose_plan(REQUEST, planner, tiny)
    errors = run.attempts[0].errors
    assert {e.code for e in errors} == {"plan_malformed"}
    assert {e.path for e in errors} >= {"approved"}
    assert run.outcome is PlanningOutcome.ACCEPTED


async def test_an_oversized_proposal_is_refused_unread(tiny) -> None:
    huge = steps("hold", "take") | {"padding": "x" * MAX_PLAN_CHARS}
    run = await propose_plan(REQUEST, ScriptedPlanner([huge]), tiny, max_replans=0)
    [attempt] = run.attempts
    assert [e.code for e in attempt.errors] == ["plan_too_large"]
    assert attempt.plan is None
    assert attempt.raw_reply is not None
    assert len(attempt.raw_reply) < MAX_RAW_CHARS + 100  # the record keeps only the start
    assert attempt.raw_reply.endswith("more characters not kept]")


async def test_a_plan_for_another_catalogue_is_rejected(tiny) -> None:
    planner = ScriptedPlanner([GOOD | {"catalogue": "fulfilment"}])
    run = await propose_plan(REQUEST, planner, tiny, max_replans=0)
    assert [e.code for e in run.attempts[0].errors] == ["unknown_catalogue"]
