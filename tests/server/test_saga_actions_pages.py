"""An operator acts on a saga from its page: the Abort form before the pivot, "Run this plan
again" once it compensated, and the download of its events as JSON (CSRF-checked forms,
operators only; the download for every reader)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import httpx
import pytest
from server_api import csrf_of

from pivotal import Orchestrator, Plan, SagaStatus
from pivotal.engine import RunOptions
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.orchestration.rerun import rerun_id
from pivotal.people.principals import Role

# the pages do not depend on the ledger: one backend is enough
pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

PlanBuilder = Callable[..., Plan]
Login = Callable[[Role], Awaitable[httpx.AsyncClient]]
ABORT = 'action="/ui/sagas/{}/abort"'
RERUN = 'action="/ui/sagas/{}/rerun"'


async def post_form(
    c: httpx.AsyncClient, saga_id: str, action: str, **fields: str
) -> httpx.Response:
    """Post the form ``action`` of the saga's page, with the page's CSRF token."""
    shown = await c.get(f"/ui/sagas/{saga_id}")
    return await c.post(
        f"/ui/sagas/{saga_id}/{action}", data={"csrf": csrf_of(shown.text), **fields}
    )


async def test_an_operator_aborts_a_submitted_saga_from_its_page(
    login: Login, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="p1")
    viewer = await login(Role.VIEWER)
    assert ABORT.format("p1") not in (await viewer.get("/ui/sagas/p1")).text
    c = await login(Role.OPERATOR)
    page = await c.get("/ui/sagas/p1")
    assert ABORT.format("p1") in page.text
    assert RERUN.format("p1") not in page.text

    reply = await post_form(c, "p1", "abort", reason="<b>duplicate</b> order")
    assert reply.status_code == 303, reply.text
    assert reply.headers["location"] == "/ui/sagas/p1?notice=aborted"
    after = await c.get(reply.headers["location"])
    assert 'role="status">Aborted.</p>' in after.text  # no worker is alive to run the undos
    assert 'id="no-worker"' in after.text
    assert "&lt;b&gt;duplicate&lt;/b&gt;" in after.text
    assert "<b>duplicate" not in after.text
    assert ABORT.format("p1") not in after.text  # compensating: nothing more to abort
    assert (await orchestrator.get("p1")).state.status is SagaStatus.COMPENSATING


@pytest.mark.parametrize(
    ("fields", "status"),
    [
        ({}, 400),
        ({"reason": "   "}, 400),
        ({"reason": "hide \x1b]0;title\x07 this"}, 400),
        ({"reason": "x" * 4001}, 400),
    ],
)
async def test_the_abort_form_refuses_a_reason_that_says_nothing_or_hides_something(
    login: Login,
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    fields: dict[str, str],
    status: int,
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="p2")
    c = await login(Role.OPERATOR)
    reply = await post_form(c, "p2", "abort", **fields)
    assert reply.status_code == status, reply.text
    assert "nothing was aborted" in reply.text
    assert (await orchestrator.get("p2")).state.status is SagaStatus.SUBMITTED


async def test_the_abort_form_needs_csrf_an_operator_and_a_saga_before_its_pivot(
    login: Login,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
    checkout_plan: PlanBuilder,
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="p3")
    c = await login(Role.OPERATOR)
    forged = await c.post("/ui/sagas/p3/abort", data={"csrf": "forged", "reason": "why"})
    assert forged.status_code == 403
    approver = await login(Role.APPROVER)
    assert (await post_form(approver, "p3", "abort", reason="why")).status_code == 403
    assert (await orchestrator.get("p3")).state.status is SagaStatus.SUBMITTED
    assert (await post_form(c, "nope", "abort", reason="why")).status_code == 404

    services.faults.always("ship", Fault.TRANSIENT)  # captured (the pivot), not yet shipped
    await orchestrator.submit(fulfilment_plan(), saga_id="p4")
    state = await orchestrator.run("p4", options=RunOptions(max_inline_wait=0))
    assert state.status is SagaStatus.RUNNING
    page = await c.get("/ui/sagas/p4")
    assert ABORT.format("p4") not in page.text  # not offered past the pivot
    late = await c.post("/ui/sagas/p4/abort", data={"csrf": csrf_of(page.text), "reason": "x"})
    assert late.status_code == 409
    assert "its point of no return" in late.text
    assert (await orchestrator.get("p4")).state.version == state.version


async def test_an_operator_runs_a_compensated_plan_again_from_its_page(
    login: Login,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    services.faults.next("charge", Fault.PERMANENT)
    state = await orchestrator.execute(checkout_plan("k-1"), saga_id="p5")
    assert state.status is SagaStatus.COMPENSATED
    await orchestrator.execute(checkout_plan("k-2"), saga_id="p6")  # completed
    viewer = await login(Role.VIEWER)
    assert RERUN.format("p5") not in (await viewer.get("/ui/sagas/p5")).text
    c = await login(Role.OPERATOR)
    assert RERUN.format("p6") not in (await c.get("/ui/sagas/p6")).text
    refused = await post_form(c, "p6", "rerun")
    assert refused.status_code == 409
    assert "only a compensated saga" in refused.text
    page = await c.get("/ui/sagas/p5")
    assert RERUN.format("p5") in page.text
    assert ABORT.format("p5") not in page.text

    reply = await post_form(c, "p5", "rerun")
    assert reply.status_code == 303, reply.text
    new = rerun_id("p5")
    assert reply.headers["location"] == f"/ui/sagas/{new}?notice=rerun"
    shown = await c.get(reply.headers["location"])
    assert "Submitted again as this new saga" in shown.text
    assert 'Runs the plan of <a href="/ui/sagas/p5">p5</a> again, as operator asked.' in shown.text
    again = await post_form(c, "p5", "rerun")
    assert again.headers["location"] == f"/ui/sagas/{new}?notice=rerun"  # the same one
    assert len(await orchestrator.store.list_sagas(None, 10)) == 3

    # a rerun asked with a reason (a bulk rerun's) says it
    services.faults.next("charge", Fault.PERMANENT)
    await orchestrator.execute(checkout_plan("k-3"), saga_id="p7")
    await orchestrator.rerun("p7", "olu", "card <fixed>")
    shown = await c.get(f"/ui/sagas/{rerun_id('p7')}")
    assert "again, as olu asked: card &lt;fixed&gt;</p>" in shown.text


async def test_a_compensated_saga_whose_undo_was_partial_offers_no_rerun(
    login: Login,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    services.faults.always("ship", Fault.PERMANENT)
    services.resell("k-1", "sku-1", 1)  # the release restores one unit of two
    state = await orchestrator.execute(checkout_plan("k-1"), saga_id="p8")
    assert state.status is SagaStatus.COMPENSATED
    services.faults.clear()
    c = await login(Role.OPERATOR)
    assert RERUN.format("p8") not in (await c.get("/ui/sagas/p8")).text
    refused = await post_form(c, "p8", "rerun")
    assert refused.status_code == 409
    assert "reserve_stock (step 0)" in refused.text
    assert await orchestrator.store.load(rerun_id("p8")) is None


async def test_the_events_download_as_json_behind_the_session(
    login: Login,
    browser: Callable[[], httpx.AsyncClient],
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
) -> None:
    await orchestrator.submit(checkout_plan("k-1"), saga_id="p7")
    await orchestrator.abort("p7", "ops", "see https://user:pw@vendor.example/x?sig=abc")
    anonymous = await browser().get("/ui/sagas/p7/events.json")
    assert anonymous.status_code == 303
    assert anonymous.headers["location"] == "/ui/login"
    c = await login(Role.VIEWER)
    page = await c.get("/ui/sagas/p7")
    assert 'href="/ui/sagas/p7/events.json"' in page.text
    reply = await c.get("/ui/sagas/p7/events.json")
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.headers["content-disposition"] == 'attachment; filename="p7.events.json"'
    assert reply.headers["x-content-type-options"] == "nosniff"
    body = json.loads(reply.text)
    assert [e["type"] for e in body["events"]] == ["saga_submitted", "compensation_started"]
    assert "pw@" not in reply.text
    assert "abc" not in reply.text
    assert "https://user:***@vendor.example/x?sig=***" in reply.text
    assert (await c.get("/ui/sagas/nope/events.json")).status_code == 404
