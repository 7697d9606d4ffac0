"""An operator resumes a parked saga from a step through the API (``{"from": STEP}``): the
steps before it that had not succeeded are recorded settled by the operator, and the saga
goes on there, as the saga machine allows; what it refuses records nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from server_api import Clients, as_json

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus
from pivotal.engine.resuming import ResumeFromRefused
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.people.principals import Role
from pivotal.sagas.state import EventType, StepStatus

PlanBuilder = Callable[..., Plan]


async def parked(
    orchestrator: Orchestrator, services: CommerceServices, fulfilment_plan: PlanBuilder
) -> None:
    """Saga "s": a fulfilment past its pivot whose shipment keeps failing, parked."""
    services.faults.always("ship", Fault.PERMANENT)
    state = await orchestrator.execute(fulfilment_plan(), saga_id="s")
    assert state.status is SagaStatus.NEEDS_HUMAN


async def test_shipped_by_hand_the_saga_goes_on_at_the_confirmation(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)
    reply = await as_role[Role.OPERATOR].post(
        "/v1/sagas/s/resume",
        content=as_json({"reason": "shipped by hand from B", "from": "send_confirmation"}),
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "running"
    stored = await orchestrator.get("s")
    shipment = stored.state.steps[3]
    assert shipment.status is StepStatus.SUCCEEDED
    assert shipment.result == {"settled_by": "operator", "why": "shipped by hand from B"}
    resumed = [e for e in await orchestrator.store.events("s") if e.type is EventType.SAGA_RESUMED]
    assert (resumed[-1].data["from"], resumed[-1].data["settled"]) == (4, [3])
    assert (await orchestrator.replayed("s")) == stored.state
    # the carrier still refuses: had the shipment been called again, the saga would park
    assert (await orchestrator.run("s")).status is SagaStatus.COMPLETED
    assert services.rows("emails")  # the confirmation went out


async def test_going_on_at_the_failed_step_calls_it_again(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)
    services.faults.clear()  # the carrier's account was fixed
    reply = await as_role[Role.OPERATOR].post(
        "/v1/sagas/s/resume", content=as_json({"reason": "carrier fixed", "from": 3})
    )
    assert reply.status_code == 200, reply.text
    assert (await orchestrator.run("s")).status is SagaStatus.COMPLETED
    assert len(services.rows("shipments")) == 1


@pytest.mark.parametrize(
    ("start", "status", "code", "said"),
    [
        (2, 409, "resume_from_refused", "capture_payment (step 2): it succeeded already"),
        ("reserve_stock", 409, "resume_from_refused", "succeeded already"),
        (9, 422, "invalid_input", "has no step 9"),
        ("ship", 422, "invalid_input", "has no step 'ship'"),
    ],
)
async def test_what_the_machine_refuses_records_nothing(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
    start: int | str,
    status: int,
    code: str,
    said: str,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)
    version = (await orchestrator.get("s")).state.version
    reply = await as_role[Role.OPERATOR].post(
        "/v1/sagas/s/resume", content=as_json({"reason": "done by hand", "from": start})
    )
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["code"] == code
    assert said in error["message"]
    after = (await orchestrator.get("s")).state
    assert (after.status, after.version) == (SagaStatus.NEEDS_HUMAN, version)


async def test_a_capture_in_doubt_is_settled_by_hand_never_called_again(
    orchestrator: Orchestrator,
    services: CommerceServices,
    clock: FakeClock,
    fulfilment_plan: PlanBuilder,
) -> None:
    """The capture (the point of no return) made its effect, lost its reply, and its lookup
    cannot tell: parked. Going on at the capture is refused; once no attempt can land, a
    person who found the capture made goes on at the shipment."""
    services.faults.always("capture", Fault.TIMEOUT_AFTER_EFFECT)
    services.faults.always("find", Fault.PERMANENT)
    state = await orchestrator.execute(fulfilment_plan(), saga_id="s")
    assert state.status is SagaStatus.NEEDS_HUMAN
    assert state.steps[2].status is StepStatus.UNKNOWN
    services.faults.clear()
    with pytest.raises(ResumeFromRefused, match="called again from here"):
        await orchestrator.resume("s", "ann", "captured", from_step="2")
    doubt = state.steps[2].doubt_until
    assert doubt is not None
    assert clock.now() < doubt
    with pytest.raises(ResumeFromRefused, match="may still land"):
        await orchestrator.resume("s", "ann", "captured", from_step="3")
    clock.advance(doubt - clock.now() + 1)
    captures = len(services.rows("payments", kind="capture"))
    assert captures == 1
    resumed = await orchestrator.resume("s", "ann", "the bank shows it", from_step="3", run=True)
    assert resumed.status is SagaStatus.COMPLETED
    assert len(services.rows("payments", kind="capture")) == captures  # never called again
    assert len(services.rows("shipments")) == 1


async def test_from_step_the_clients_name_is_taken_as_from_and_both_are_refused(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)
    before = (await orchestrator.get("s")).state.version
    both = await as_role[Role.OPERATOR].post(
        "/v1/sagas/s/resume", content=as_json({"reason": "x", "from": 3, "from_step": 4})
    )
    assert both.status_code == 422, both.text
    assert "not both" in both.text
    assert (await orchestrator.get("s")).state.version == before
    services.faults.clear()
    reply = await as_role[Role.OPERATOR].post(
        "/v1/sagas/s/resume", content=as_json({"reason": "carrier fixed", "from_step": 3})
    )
    assert reply.status_code == 200, reply.text
    resumed = [e for e in await orchestrator.store.events("s") if e.type is EventType.SAGA_RESUMED]
    assert resumed[-1].data["from"] == 3
