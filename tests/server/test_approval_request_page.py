"""The approver sees the request: the approval page shows the text the plan was made from
(as text, bounded, its control characters shown escaped), the amount as a headline with its
currency, which checks passed, and labels in a person's words; ``GET /v1/approvals`` carries
the same facts (``pivotal.views.approval_view`` builds them once for both)."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI
from server_api import add_token, approval_plan

from pivotal import FakeClock, Orchestrator, SagaStatus, parse_plan
from pivotal.people.principals import Role
from pivotal.planning import PlanRequest, ScriptedPlanner, plan_and_submit
from pivotal.store import Store

REQUEST = (
    "Please ship order 4471 <script>alert('x')</script> & bill it\n"
    "second line \x1b[2J\x1b]0;pwned\x07 \u202eevil\u202c done"
)
Login = Callable[[Role], Awaitable[httpx.AsyncClient]]


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


@pytest.fixture
async def login(api: FastAPI, store: Store, clock: FakeClock) -> AsyncIterator[Login]:
    made: list[httpx.AsyncClient] = []

    async def log_in(role: Role) -> httpx.AsyncClient:
        c = httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://pivotal")
        made.append(c)
        token = await add_token(store, f"{role.value}-page", role, clock)
        form = await c.get("/ui/login")
        reply = await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
        assert reply.status_code == 303, reply.text
        return c

    yield log_in
    for c in made:
        await c.aclose()


async def planned(orchestrator: Orchestrator, saga_id: str, text: str) -> int:
    """Saga ``saga_id``, planned from a request of ``text`` (a capture of EUR 180 for
    order 4471), waits for a decision; its version."""
    request = PlanRequest(text=text, context={"order_id": "4471"}, catalogue="fulfilment")
    run = await plan_and_submit(
        request, ScriptedPlanner([approval_plan()]), orchestrator, saga_id=saga_id
    )
    assert run.saga_id == saga_id
    state = await orchestrator.run(saga_id)
    assert state.status is SagaStatus.AWAITING_APPROVAL, state.reason
    return state.version


def section(page: str, ident: str) -> str:
    start = page.index(f'id="{ident}"')
    return page[start : page.index("</", start)]


async def test_the_request_is_shown_as_text_escaped(
    login: Login, orchestrator: Orchestrator
) -> None:
    await planned(orchestrator, "asked", REQUEST)
    page = (await (await login(Role.APPROVER)).get("/ui/approvals/asked")).text
    assert "What was asked" in page
    shown = section(page, "request-text")
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; bill it\nsecond line" in shown
    assert "<script>" not in page
    for raw in ("\x1b", "\x07", "\u202e", "\u202c"):
        assert raw not in page
    assert "\\x1b[2J\\x1b]0;pwned\\x07 \\u202eevil\\u202c done" in shown


async def test_a_long_request_is_cut(login: Login, orchestrator: Orchestrator) -> None:
    await planned(orchestrator, "long", "ship it " + "x" * 7000)
    shown = section(
        (await (await login(Role.VIEWER)).get("/ui/approvals/long")).text, "request-text"
    )
    assert shown.count("x") < 2000
    assert shown.endswith("…")


async def test_a_plan_that_claims_another_run_shows_no_request(
    login: Login, orchestrator: Orchestrator, store: Store
) -> None:
    await planned(orchestrator, "asked", REQUEST)
    stored = await store.load("asked")
    assert stored is not None
    assert stored.plan.provenance.run_id
    claimed = approval_plan() | {
        "provenance": {
            "actor_type": "agent",
            "actor_id": "bot",
            "run_id": stored.plan.provenance.run_id,
        }
    }
    await orchestrator.submit(parse_plan(claimed), saga_id="claims")
    assert (await orchestrator.run("claims")).status is SagaStatus.AWAITING_APPROVAL
    page = (await (await login(Role.APPROVER)).get("/ui/approvals/claims")).text
    assert "No request was recorded for this plan" in page
    assert "Please ship order 4471" not in page


async def test_the_amount_is_the_headline_and_the_checks_are_listed(
    login: Login, orchestrator: Orchestrator
) -> None:
    version = await planned(orchestrator, "asked", REQUEST)
    page = (await (await login(Role.APPROVER)).get("/ui/approvals/asked")).text
    assert '<span id="amount">EUR 180.00</span>' in page
    assert "<title>EUR 180.00: decide on asked" in page
    checks = html.unescape(
        page[page.index('id="checks"') : page.index("Checked again before the point of no return")]
    )
    assert (
        "passed</strong>: The plan was validated against the trusted facts when it was submitted"
        in checks
    )
    assert "passed</strong>: capture_payment at most once" in checks  # among the rules
    assert '<details id="rules"><summary>The catalogue\'s 17 plan rules' in checks
    assert "passed</strong>: amount (an amount) bound" in checks
    assert "amount in every call must equal the trusted amount of the order" in checks
    assert "passed</strong>: order_id (an id) bound" in checks
    # the re-check now, as the page has always said it
    assert "the plan still holds against them" in section(page, "facts-now")
    # labels in a person's words; the version is the form's, not the button's
    assert ">Approve</button>" in page
    assert ">Reject</button>" in page
    assert "Approve version" not in page
    assert "Reject version" not in page
    assert page.count(f'<input type="hidden" name="version" value="{version}">') == 2
    assert page.count(f'name="csrf" value="{csrf_of(page)}"') >= 2
    assert "Checked again before the point of no return" in page
    assert "Re-checked before <code>" not in page


async def test_the_button_still_decides_the_version_shown(
    login: Login, orchestrator: Orchestrator, store: Store
) -> None:
    version = await planned(orchestrator, "asked", REQUEST)
    c = await login(Role.APPROVER)
    page = (await c.get("/ui/approvals/asked")).text
    stale = await c.post(
        "/ui/approvals/asked/approve",
        data={"csrf": csrf_of(page), "version": str(version - 1), "reason": "ok"},
    )
    assert stale.status_code == 409  # another version: nothing decided
    done = await c.post(
        "/ui/approvals/asked/approve",
        data={"csrf": csrf_of(page), "version": str(version), "reason": "ok"},
    )
    assert done.status_code == 303
    stored = await store.load("asked")
    assert stored is not None
    assert stored.state.approval is not None
    assert stored.state.approval.approver == "approver-page"


async def test_the_api_carries_the_same_facts(
    login: Login, orchestrator: Orchestrator, store: Store, clock: FakeClock, api: FastAPI
) -> None:
    await planned(orchestrator, "asked", REQUEST)
    token = await add_token(store, "viewer-api", Role.VIEWER, clock)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api),
        base_url="http://pivotal",
        headers={"Authorization": f"Bearer {token}"},
    ) as c:
        items = (await c.get("/v1/approvals")).json()["items"]
    (item,) = [i for i in items if i["saga_id"] == "asked"]
    assert (item["amount"], item["currency"], item["headline"]) == ("180.00", "EUR", "EUR 180.00")
    assert item["request_text"].startswith("Please ship order 4471 <script>")  # JSON: plain text
    assert "\x1b" not in item["request_text"]
    assert "\\x1b[2J" in item["request_text"]
    kinds = [c["kind"] for c in item["checks"]]
    assert kinds[0] == "submission"
    assert kinds[-1] == "now"
    assert {"rule", "binding"} <= set(kinds)
    assert all(c["status"] == "passed" for c in item["checks"])
    rule = next(c for c in item["checks"] if c["kind"] == "rule")
    assert rule["name"] == "Required"
    page = html.unescape((await (await login(Role.VIEWER)).get("/ui/approvals/asked")).text)
    for check in item["checks"]:  # every surface says the same
        assert check["check"] in page
