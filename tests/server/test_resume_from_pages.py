"""A parked saga's page resumes it from a step chosen in its Resume form: the steps before
it that had not succeeded are recorded settled by the operator; what the saga machine
refuses is said, and nothing is recorded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest
from server_api import csrf_of

from pivotal import Orchestrator, Plan, SagaStatus
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.people.principals import Role
from pivotal.sagas.state import StepStatus

# the pages do not depend on the ledger: one backend is enough
pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

PlanBuilder = Callable[..., Plan]
Login = Callable[[Role], Awaitable[httpx.AsyncClient]]


async def parked(
    orchestrator: Orchestrator, services: CommerceServices, fulfilment_plan: PlanBuilder
) -> None:
    services.faults.always("ship", Fault.PERMANENT)
    state = await orchestrator.execute(fulfilment_plan(), saga_id="s")
    assert state.status is SagaStatus.NEEDS_HUMAN


async def resume(c: httpx.AsyncClient, start: str) -> httpx.Response:
    shown = await c.get("/ui/sagas/s")
    form = {"csrf": csrf_of(shown.text), "reason": "shipped by hand", "from": start}
    return await c.post("/ui/sagas/s/resume", data=form)


async def test_the_resume_form_goes_on_from_the_step_chosen(
    login: Login,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)
    c = await login(Role.OPERATOR)
    page = (await c.get("/ui/sagas/s")).text
    assert '<option value="" selected>where it stopped</option>' in page
    assert '<option value="3">3 create_shipment (failed)</option>' in page
    reply = await resume(c, "4")
    assert reply.status_code == 303, reply.text
    assert reply.headers["location"] == "/ui/sagas/s?notice=resumed"
    state = (await orchestrator.get("s")).state
    assert state.steps[3].status is StepStatus.SUCCEEDED
    assert state.steps[3].result == {"settled_by": "operator", "why": "shipped by hand"}
    shown = await c.get("/ui/sagas/s")
    assert "from step 4 (settled by hand: 3): shipped by hand" in shown.text
    assert (await orchestrator.run("s")).status is SagaStatus.COMPLETED


@pytest.mark.parametrize(
    ("start", "status", "said"),
    [
        ("2", 409, "capture_payment (step 2): it succeeded already"),
        ("9", 400, "has no step 9"),
    ],
)
async def test_what_the_machine_refuses_is_said_and_nothing_recorded(
    login: Login,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
    start: str,
    status: int,
    said: str,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)
    version = (await orchestrator.get("s")).state.version
    c = await login(Role.OPERATOR)
    reply = await resume(c, start)
    assert reply.status_code == status, reply.text
    assert said in reply.text
    after = (await orchestrator.get("s")).state
    assert (after.status, after.version) == (SagaStatus.NEEDS_HUMAN, version)


async def test_the_resume_form_without_a_step_goes_on_where_it_stopped(
    login: Login,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)
    services.faults.clear()
    c = await login(Role.OPERATOR)
    assert (await resume(c, "")).status_code == 303
    assert (await orchestrator.run("s")).status is SagaStatus.COMPLETED
    assert len(services.rows("shipments")) == 1
