"""The web pages through the ASGI app: login, sessions, CSRF, roles, escaping, decisions."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from decimal import Decimal

import httpx
import pytest
from server_api import add_token, approval_plan, csrf_of

from pivotal import FakeClock, Orchestrator, SagaStatus, parse_plan
from pivotal.declarations.policy import Rollout
from pivotal.examples.commerce import CommerceApp
from pivotal.examples.commerce.services import CommerceServices
from pivotal.people.principals import Role
from pivotal.planning import (
    EscalationStatus,
    PlanningMode,
    PlanningOutcome,
    PlanRequest,
    ScriptedPlanner,
    propose_plan,
)
from pivotal.store import Store

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
Login = Callable[[Role], Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def waiting(orchestrator: Orchestrator) -> int:
    """Saga "big" (a capture of 180) waits for a decision; its version."""
    plan = approval_plan() | {
        "rationale": HOSTILE,
        "provenance": {"actor_type": "agent", "actor_id": "agent", "model": "m-1"},
    }
    await orchestrator.submit(parse_plan(plan), saga_id="big")
    state = await orchestrator.run("big")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    return state.version


async def test_a_page_without_a_session_redirects_to_login(
    browser: Callable[[], httpx.AsyncClient],
) -> None:
    paths = ("/ui/approvals", "/ui/approvals/big", "/ui/sagas", "/ui/dead-letters")
    for path in (*paths, "/ui/escalations"):
        reply = await browser().get(path)
        assert reply.status_code == 303
        assert reply.headers["location"] == "/ui/login"
    reply = await browser().post("/ui/approvals/big/approve", data={"reason": "x"})
    assert reply.status_code == 303


async def test_login_needs_a_live_token_and_the_form_csrf(
    browser: Callable[[], httpx.AsyncClient], store: Store, clock: FakeClock
) -> None:
    c = browser()
    form = await c.get("/ui/login")
    assert 'type="password"' in form.text
    bad = await c.post("/ui/login", data={"token": "pvt_nope", "csrf": csrf_of(form.text)})
    assert bad.status_code == 401
    token = await add_token(store, "ann", Role.APPROVER, clock)
    refused = await c.post("/ui/login", data={"token": token, "csrf": "forged"})
    assert refused.status_code == 403
    agent = await add_token(store, "bot", Role.AGENT, clock)
    form = await c.get("/ui/login")
    assert (
        await c.post("/ui/login", data={"token": agent, "csrf": csrf_of(form.text)})
    ).status_code == 403
    form = await c.get("/ui/login")
    ok = await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
    assert ok.status_code == 303
    assert (await c.get("/ui/approvals")).status_code == 200


async def test_the_queue_and_detail_show_the_rationale_as_text(login: Login, waiting: int) -> None:
    c = await login(Role.VIEWER)
    queue = await c.get("/ui/approvals")
    assert queue.status_code == 200
    assert "/ui/approvals/big" in queue.text
    assert "EUR 180.00" in queue.text  # the amount at stake, in its currency
    assert "default-src 'none'" in queue.headers["content-security-policy"]
    detail = await c.get("/ui/approvals/big")
    assert detail.status_code == 200
    assert HOSTILE not in detail.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in detail.text
    assert "<script>alert" not in detail.text
    assert "capture_payment" in detail.text
    assert "m-1" in detail.text  # provenance: the model
    assert "Only an approver decides" in detail.text  # a viewer gets no forms


async def test_a_form_without_the_csrf_token_is_refused(
    login: Login, waiting: int, store: Store
) -> None:
    c = await login(Role.APPROVER)
    for csrf in (None, "forged"):
        data = {"reason": "ok", "version": str(waiting)} | ({"csrf": csrf} if csrf else {})
        reply = await c.post("/ui/approvals/big/approve", data=data)
        assert reply.status_code == 403
    stored = await store.load("big")
    assert stored is not None
    assert stored.state.version == waiting


async def test_a_viewer_or_an_operator_cannot_decide(login: Login, waiting: int) -> None:
    for role in (Role.VIEWER, Role.OPERATOR):
        c = await login(role)
        csrf = csrf_of((await c.get("/ui/approvals/big")).text)
        data = {"reason": "ok", "version": str(waiting), "csrf": csrf}
        reply = await c.post("/ui/approvals/big/approve", data=data)
        assert reply.status_code == 403
        assert "may not do this" in reply.text


async def test_an_approver_approves_through_the_form_and_a_worker_completes_it(
    login: Login, waiting: int, orchestrator: Orchestrator
) -> None:
    c = await login(Role.APPROVER)
    detail = await c.get("/ui/approvals/big")
    data = {"reason": "checked", "version": str(waiting), "csrf": csrf_of(detail.text)}
    missing = await c.post("/ui/approvals/big/approve", data=data | {"reason": " "})
    assert missing.status_code == 400
    reply = await c.post("/ui/approvals/big/approve", data=data)
    assert reply.status_code == 303
    assert reply.headers["location"] == "/ui/sagas/big?notice=approved"
    assert (await orchestrator.run("big")).status is SagaStatus.COMPLETED
    timeline = await c.get(reply.headers["location"])
    assert "saga_completed" in timeline.text
    assert "by approver: checked" in timeline.text


async def test_an_approver_rejects_and_the_undos_run(
    login: Login, waiting: int, orchestrator: Orchestrator
) -> None:
    c = await login(Role.APPROVER)
    detail = await c.get("/ui/approvals/big")
    assert "undo <code>authorize_payment</code>" in detail.text
    data = {"reason": "too big", "version": str(waiting), "csrf": csrf_of(detail.text)}
    reply = await c.post("/ui/approvals/big/reject", data=data)
    assert reply.status_code == 303
    assert (await orchestrator.run("big")).status is SagaStatus.COMPENSATED
    timeline = (await c.get("/ui/sagas/big")).text
    assert "approval_rejected" in timeline
    assert "undo_succeeded" in timeline
    listed = (await c.get("/ui/sagas?status=compensated")).text
    assert "/ui/sagas/big" in listed


async def test_a_stale_version_shows_the_new_state_instead_of_deciding(
    login: Login,
    waiting: int,
    store: Store,
    clock: FakeClock,
    browser: Callable[[], httpx.AsyncClient],
) -> None:
    ann = await login(Role.APPROVER)
    csrf = csrf_of((await ann.get("/ui/approvals/big")).text)
    bob = browser()
    token = await add_token(store, "bob", Role.APPROVER, clock)
    form = await bob.get("/ui/login")
    await bob.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
    bob_csrf = csrf_of((await bob.get("/ui/approvals/big")).text)
    first = await bob.post(
        "/ui/approvals/big/reject", data={"reason": "no", "version": str(waiting), "csrf": bob_csrf}
    )
    assert first.status_code == 303
    late = await ann.post(
        "/ui/approvals/big/approve", data={"reason": "yes", "version": str(waiting), "csrf": csrf}
    )
    assert late.status_code == 409
    assert "nothing was decided" in late.text
    assert "compensating" in late.text
    stored = await store.load("big")
    assert stored is not None
    assert stored.state.approval is not None
    assert stored.state.approval.approver == "bob"


async def test_the_submitter_cannot_approve_its_own_saga(
    browser: Callable[[], httpx.AsyncClient], store: Store, clock: FakeClock, waiting: int
) -> None:
    c = browser()  # an approver token named "agent": the principal that proposed the plan
    token = await add_token(store, "agent", Role.APPROVER, clock)
    form = await c.get("/ui/login")
    await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
    detail = await c.get("/ui/approvals/big")
    assert "another approver decides" in detail.text
    data = {"reason": "mine", "version": str(waiting), "csrf": csrf_of(detail.text)}
    assert (await c.post("/ui/approvals/big/approve", data=data)).status_code == 403


async def test_operator_pages_and_logout(login: Login) -> None:
    c = await login(Role.OPERATOR)
    assert (await c.get("/ui/dead-letters")).status_code == 200
    page = await c.get("/ui/needs-human")
    assert "No saga waits for a person" in page.text
    resolve = await c.post(
        "/ui/sagas/nope/resolve", data={"reason": "x", "csrf": csrf_of(page.text)}
    )
    assert resolve.status_code == 404
    out = await c.post("/ui/logout", data={"csrf": csrf_of(page.text)})
    assert out.status_code == 303
    assert (await c.get("/ui/approvals")).status_code == 303


async def test_the_queue_is_oldest_first_or_newest_first(
    login: Login, orchestrator: Orchestrator, clock: FakeClock
) -> None:
    for saga_id in ("first", "second"):
        await orchestrator.submit(parse_plan(approval_plan()), saga_id=saga_id)
        assert (await orchestrator.run(saga_id)).status is SagaStatus.AWAITING_APPROVAL
        clock.advance(60)
    c = await login(Role.VIEWER)

    oldest = (await c.get("/ui/approvals")).text
    newest = (await c.get("/ui/approvals?order=newest")).text
    rows = (await c.get("/ui/approvals?partial=1&order=newest")).text
    unknown = (await c.get("/ui/approvals?order=sideways")).text

    assert oldest.index("/ui/approvals/first") < oldest.index("/ui/approvals/second")
    assert 'href="/ui/approvals?order=newest"' in oldest
    assert 'data-poll="/ui/approvals?partial=1&amp;order=oldest"' in oldest
    assert newest.index("/ui/approvals/second") < newest.index("/ui/approvals/first")
    assert 'data-poll="/ui/approvals?partial=1&amp;order=newest"' in newest
    assert 'href="/ui/approvals"' in newest
    assert rows.index("/ui/approvals/second") < rows.index("/ui/approvals/first")
    assert "<html" not in rows
    assert unknown.index("/ui/approvals/first") < unknown.index("/ui/approvals/second")


async def _escalate(
    store: Store, app: CommerceApp, clock: FakeClock, run_id: str, text: str
) -> int:
    request = PlanRequest(text=text, context={"order_id": "4471"}, catalogue="fulfilment")
    credit = {"steps": [{"name": "apply_goodwill_credit", "args": {"order_id": "4471"}}]}
    run = await propose_plan(
        request,
        ScriptedPlanner([credit] * 2),
        app.catalogue("fulfilment"),
        run_id=run_id,
        clock=clock,
    )
    run = run.model_copy(update={"mode": PlanningMode.LIVE, "outcome": PlanningOutcome.ESCALATED})
    opened = await store.escalate(run, "nothing fits", clock.now())
    clock.advance(60)
    return opened.id


async def test_open_escalations_are_listed_oldest_first_as_text(
    login: Login, store: Store, app: CommerceApp, clock: FakeClock
) -> None:
    first = await _escalate(store, app, clock, "run-1", HOSTILE)
    second = await _escalate(store, app, clock, "run-2", "refund order 4472")
    c = await login(Role.VIEWER)

    page = await c.get("/ui/escalations")

    assert page.status_code == 200
    assert HOSTILE not in page.text
    assert "<script>alert" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in page.text
    assert page.text.index(f"<td>{first}<") < page.text.index(f"<td>{second}<")
    assert "refund order 4472" in page.text
    assert "fulfilment" in page.text
    errors = await store.escalation(first)
    assert errors is not None
    codes = {e.code for a in errors.run.attempts for e in a.errors}
    assert codes
    assert all(f"<code>{code}</code>" in page.text for code in codes)
    assert 'href="/ui/escalations" class="on"' in page.text
    assert "/resolve" not in page.text  # a viewer gets no forms


async def test_an_operator_resolves_an_escalation_through_the_form(
    login: Login, store: Store, app: CommerceApp, clock: FakeClock
) -> None:
    opened = await _escalate(store, app, clock, "run-1", "ship it")
    c = await login(Role.OPERATOR)
    page = await c.get("/ui/escalations")
    assert f'action="/ui/escalations/{opened}/resolve"' in page.text
    csrf = csrf_of(page.text)
    url = f"/ui/escalations/{opened}/resolve"

    missing = await c.post(url, data={"reason": " ", "csrf": csrf})
    reply = await c.post(url, data={"reason": "credited by hand", "csrf": csrf})

    assert missing.status_code == 400
    assert reply.status_code == 303
    assert reply.headers["location"] == "/ui/escalations?notice=escalation"
    closed = await store.escalation(opened)
    assert closed is not None
    assert closed.status is EscalationStatus.RESOLVED
    assert (closed.resolved_by, closed.resolution) == ("operator", "credited by hand")
    after = await c.get(reply.headers["location"])
    assert "No open escalations" in after.text
    assert "The escalation is closed" in after.text
    again = await c.post(url, data={"reason": "twice", "csrf": csrf})
    assert again.status_code == 409
    nothing = await c.post("/ui/escalations/999999/resolve", data={"reason": "x", "csrf": csrf})
    assert nothing.status_code == 404


async def test_resolving_an_escalation_needs_an_operator_and_the_csrf_token(
    login: Login, store: Store, app: CommerceApp, clock: FakeClock
) -> None:
    opened = await _escalate(store, app, clock, "run-1", "ship it")
    url = f"/ui/escalations/{opened}/resolve"
    for role in (Role.APPROVER, Role.VIEWER):
        c = await login(role)
        csrf = csrf_of((await c.get("/ui/escalations")).text)
        reply = await c.post(url, data={"reason": "mine", "csrf": csrf})
        assert reply.status_code == 403
        assert "may not do this" in reply.text
    operator = await login(Role.OPERATOR)
    for csrf in (None, "forged"):
        data = {"reason": "ok"} | ({"csrf": csrf} if csrf else {})
        assert (await operator.post(url, data=data)).status_code == 403
    still = await store.escalation(opened)
    assert still is not None
    assert still.status is EscalationStatus.OPEN


async def test_the_decision_page_says_when_the_order_changed_since_the_request(
    login: Login, waiting: int, services: CommerceServices
) -> None:
    c = await login(Role.APPROVER)
    before = await c.get("/ui/approvals/big")
    assert "against the trusted facts as they are now: the plan still holds" in before.text

    row = services.db.execute("SELECT details FROM orders WHERE order_id = '4471'").fetchone()
    details = json.loads(row[0] or "{}") | {"amount": "200"}  # the customer added an item
    services.db.execute(
        "UPDATE orders SET details = ? WHERE order_id = '4471'", (json.dumps(details),)
    )

    after = await c.get("/ui/approvals/big")
    assert "they changed since the request" in after.text
    assert "[fact_mismatch]" in after.text
    assert "An approval is refused" in after.text


async def test_the_saga_page_shows_a_partial_undo_with_its_note(
    login: Login, orchestrator: Orchestrator, services: CommerceServices, faults, checkout_plan
) -> None:
    from pivotal.examples.commerce import Fault

    faults.always("ship", Fault.PERMANENT)
    services.resell("o-partial", "sku-1", 1)
    state = await orchestrator.execute(checkout_plan("o-partial"), saga_id="resold")
    assert state.status is SagaStatus.COMPENSATED
    c = await login(Role.VIEWER)
    page = (await c.get("/ui/sagas/resold")).text
    assert "undo_partial" in page
    assert "partial" in page
    assert "1 of 2 units back in stock, 1 already re-sold" in page
    assert "undone only in part: reserve_stock (step 0)" in page


async def test_the_queue_shows_each_catalogues_rollout(login: Login, app: CommerceApp) -> None:
    c = await login(Role.VIEWER)
    assert "Rollout of" not in (await c.get("/ui/approvals")).text  # none: no line
    app.catalogue("checkout").rollout = Rollout(execute_below=Decimal("50"), above="refuse")
    queue = await c.get("/ui/approvals")
    assert "Rollout of <strong>checkout</strong>: agent plans execute below 50; above: refuse" in (
        queue.text
    )


@pytest.mark.parametrize(
    ("actor", "heading"),
    [("agent", "The agent's rationale"), ("human", "The proposer's rationale")],
)
async def test_the_rationale_is_named_for_who_proposed_the_plan(
    login: Login, orchestrator: Orchestrator, actor: str, heading: str
) -> None:
    plan = approval_plan() | {"provenance": {"actor_type": actor, "actor_id": "someone"}}
    await orchestrator.submit(parse_plan(plan), saga_id="who")
    page = (await (await login(Role.VIEWER)).get("/ui/sagas/who")).text
    assert heading.replace("'", "&#39;") in page
    assert ("The agent&#39;s rationale" in page) is (actor == "agent")
