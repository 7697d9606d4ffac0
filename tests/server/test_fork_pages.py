"""An operator forks a finished saga from its page: the Fork form (changes, one per line,
and a reason) submits the new saga and leads to it; the new saga's page says where it came
from and what changed; what is refused says why and records nothing."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import httpx
import pytest
from server_api import csrf_of

from pivotal import Orchestrator, Plan, SagaStatus
from pivotal.examples.commerce import CommerceServices
from pivotal.people.principals import Role
from pivotal.sagas.state import EventType

# the pages do not depend on the ledger: one backend is enough
pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

PlanBuilder = Callable[..., Plan]
Login = Callable[[Role], Awaitable[httpx.AsyncClient]]
FORK = 'action="/ui/sagas/{}/fork"'


async def post_fork(c: httpx.AsyncClient, saga_id: str, **fields: str) -> httpx.Response:
    shown = await c.get(f"/ui/sagas/{saga_id}")
    return await c.post(f"/ui/sagas/{saga_id}/fork", data={"csrf": csrf_of(shown.text), **fields})


async def fewer(orchestrator: Orchestrator, services: CommerceServices, plan: PlanBuilder) -> None:
    """Saga "done" completed two of sku-1 for k-1; the customer asked for one since."""
    assert (await orchestrator.execute(plan("k-1"), saga_id="done")).status is SagaStatus.COMPLETED
    details = {"amount": "24.95", "lines": [{"sku": "sku-1", "quantity": 1}]}
    services.db.execute(
        "UPDATE orders SET details = ? WHERE order_id = 'k-1'", (json.dumps(details),)
    )
    services.set_order_status("k-1", "open")


async def test_an_operator_forks_a_completed_saga_from_its_page(
    login: Login,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    await fewer(orchestrator, services, checkout_plan)
    await orchestrator.submit(checkout_plan("k-2"), saga_id="queued")
    viewer = await login(Role.VIEWER)
    assert FORK.format("done") not in (await viewer.get("/ui/sagas/done")).text
    c = await login(Role.OPERATOR)
    assert FORK.format("queued") not in (await c.get("/ui/sagas/queued")).text
    assert FORK.format("done") in (await c.get("/ui/sagas/done")).text

    changes = '0.quantity=1\r\n\r\ncharge_payment.amount="24.95"\r\n'
    reply = await post_fork(c, "done", changes=changes, reason="<i>fewer</i>, she asked")
    assert reply.status_code == 303, reply.text
    new = await orchestrator.store.list_sagas(None, 10)
    fork = next(s.saga_id for s in new if s.saga_id.startswith("fk_"))
    assert reply.headers["location"] == f"/ui/sagas/{fork}?notice=forked"
    shown = await c.get(reply.headers["location"])
    assert "Forked into this new saga" in shown.text
    assert 'Forked from <a href="/ui/sagas/done">done</a> by operator' in shown.text
    assert "&lt;i&gt;fewer&lt;/i&gt;, she asked" in shown.text
    assert "quantity was <code>2</code>, now <code>1</code>" in shown.text
    original = await c.get("/ui/sagas/done")
    assert f"into {fork} by operator" in original.text
    again = await post_fork(c, "done", changes=changes, reason="a second click")
    assert again.headers["location"] == f"/ui/sagas/{fork}?notice=forked"
    events = await orchestrator.store.events("done")
    assert [e.type for e in events].count(EventType.SAGA_FORKED) == 1


@pytest.mark.parametrize(
    ("saga", "fields", "status", "said"),
    [
        ("done", {"changes": "0.quantity=1", "reason": " "}, 400, "needs a reason"),
        ("done", {"changes": "0.quantity=1", "reason": "hide \x1b[2J"}, 400, "control"),
        ("done", {"changes": "", "reason": "fewer"}, 400, "at least one argument"),
        ("done", {"changes": "quantity=1", "reason": "fewer"}, 400, "STEP.ARGUMENT=VALUE"),
        ("done", {"changes": "0.colour=red", "reason": "fewer"}, 400, "no argument"),
        ("done", {"changes": "0.quantity=1", "reason": "fewer"}, 400, "does not validate"),
        ("queued", {"changes": "0.quantity=1", "reason": "fewer"}, 409, "only a finished saga"),
        ("nope", {"changes": "0.quantity=1", "reason": "fewer"}, 404, "no such saga"),
    ],
)
async def test_the_fork_form_refuses_what_does_not_hold_and_records_nothing(
    login: Login,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    saga: str,
    fields: dict[str, str],
    status: int,
    said: str,
) -> None:
    await fewer(orchestrator, services, checkout_plan)
    await orchestrator.submit(checkout_plan("k-2"), saga_id="queued")
    c = await login(Role.OPERATOR)
    shown = await c.get("/ui/sagas/done")
    reply = await c.post(f"/ui/sagas/{saga}/fork", data={"csrf": csrf_of(shown.text), **fields})
    assert reply.status_code == status, reply.text
    assert said in reply.text
    assert len(await orchestrator.store.list_sagas(None, 10)) == 2
    events = await orchestrator.store.events("done")
    assert EventType.SAGA_FORKED not in [e.type for e in events]
