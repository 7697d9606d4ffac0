"""The web pages through the ASGI app: login, sessions, CSRF, roles, escaping, decisions."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI
from server_api import add_token, approval_plan

from pivotal import FakeClock, Orchestrator, SagaStatus, parse_plan
from pivotal.principals import Role
from pivotal.store import Store

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
Login = Callable[[Role], Awaitable[httpx.AsyncClient]]


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


@pytest.fixture
async def browser(api: FastAPI) -> AsyncIterator[Callable[[], httpx.AsyncClient]]:
    made: list[httpx.AsyncClient] = []

    def make() -> httpx.AsyncClient:
        c = httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://pivotal")
        made.append(c)
        return c

    yield make
    for c in made:
        await c.aclose()


@pytest.fixture
async def login(browser: Callable[[], httpx.AsyncClient], store: Store, clock: FakeClock) -> Login:
    async def log_in(role: Role) -> httpx.AsyncClient:
        c = browser()
        token = await add_token(store, role.value, role, clock)
        form = await c.get("/ui/login")
        reply = await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
        assert reply.status_code == 303, reply.text
        assert "httponly" in reply.headers["set-cookie"].lower()
        assert "samesite=strict" in reply.headers["set-cookie"].lower()
        return c

    return log_in


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
    for path in ("/ui/approvals", "/ui/approvals/big", "/ui/sagas", "/ui/dead-letters"):
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
    assert "180.00" in queue.text
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
