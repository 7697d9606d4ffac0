"""Two approvers at once on the decision page: the one whose decision comes too late
decides nothing, keeps the reason typed, and reads who decided and when; the decision
buttons come before everything else the page explains."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable

import httpx
import pytest
from server_api import Clients, add_token, as_json, csrf_of
from test_decisions import BIG, pending

from pivotal import FakeClock, Orchestrator, SagaStatus
from pivotal.people.principals import Role
from pivotal.store import Store

LogIn = Callable[[str], Awaitable[httpx.AsyncClient]]


@pytest.fixture
def log_in(browser: Callable[[], httpx.AsyncClient], store: Store, clock: FakeClock) -> LogIn:
    async def as_approver(name: str) -> httpx.AsyncClient:
        c = browser()
        token = await add_token(store, name, Role.APPROVER, clock)
        form = await c.get("/ui/login")
        reply = await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
        assert reply.status_code == 303, reply.text
        return c

    return as_approver


def textarea(page: str, ident: str) -> str:
    start = page.index(f'id="{ident}"')
    return html.unescape(page[page.index(">", start) + 1 : page.index("</textarea>", start)])


@pytest.mark.parametrize("first", ["approve", "reject"])
async def test_the_approver_who_comes_second_keeps_the_reason_and_reads_who_decided(
    as_role: Clients,
    orchestrator: Orchestrator,
    store: Store,
    clock: FakeClock,
    log_in: LogIn,
    first: str,
) -> None:
    await pending(as_role[Role.AGENT], orchestrator)
    ana, bo = await log_in("ana"), await log_in("bo")
    shown = {c: (await c.get(f"/ui/approvals/{BIG}")).text for c in (ana, bo)}
    version = (await store.load(BIG)).state.version  # type: ignore[union-attr]
    clock.advance(5)
    done = await ana.post(
        f"/ui/approvals/{BIG}/{first}",
        data={"csrf": csrf_of(shown[ana]), "version": str(version), "reason": "ana checked"},
    )
    assert done.status_code == 303
    clock.advance(125)
    typed = 'the customer called: <ship> "today"'
    late = await bo.post(
        f"/ui/approvals/{BIG}/approve",
        data={"csrf": csrf_of(shown[bo]), "version": str(version), "reason": typed},
    )
    assert late.status_code == 409
    page = late.text
    # the saga's page, with who decided and when, and the reason as typed
    assert "<h1>" + BIG in page.replace("\n", "")
    said = "approved" if first == "approve" else "rejected"
    assert f"The approval was {said} by ana at " in page
    assert "(2m 05s ago): ana checked" in page
    assert "nothing was decided by you" in page
    assert textarea(page, "lost-reason") == typed
    stored = await store.load(BIG)
    assert stored is not None
    assert stored.state.approval is not None
    assert stored.state.approval.approver == "ana"
    assert stored.state.approval.note == "ana checked"
    assert all(e.data.get("by") != "bo" for e in await store.events(BIG))


async def test_a_decision_overtaken_while_it_still_waits_keeps_its_reason_in_the_box(
    as_role: Clients, orchestrator: Orchestrator, store: Store, log_in: LogIn
) -> None:
    """A decision on a version the saga has left while it still waits for one: the page
    comes back with the reason in the box it was typed in."""
    await pending(as_role[Role.AGENT], orchestrator)
    bo = await log_in("bo")
    page = (await bo.get(f"/ui/approvals/{BIG}")).text
    version = (await store.load(BIG)).state.version  # type: ignore[union-attr]
    late = await bo.post(
        f"/ui/approvals/{BIG}/reject",
        data={"csrf": csrf_of(page), "version": str(version - 1), "reason": "not this one"},
    )
    assert late.status_code == 409
    assert "The saga changed since you opened it; nothing was decided" in late.text
    assert textarea(late.text, "reject-reason") == "not this one"
    assert textarea(late.text, "approve-reason") == ""
    stored = await store.load(BIG)
    assert stored is not None
    assert stored.state.status is SagaStatus.AWAITING_APPROVAL


async def test_the_decision_comes_before_what_the_page_explains(
    as_role: Clients, orchestrator: Orchestrator, log_in: LogIn
) -> None:
    await pending(as_role[Role.AGENT], orchestrator)
    page = (await (await log_in("ana")).get(f"/ui/approvals/{BIG}")).text
    decide = page.index('id="decide"')
    assert decide < page.index('id="request"') < page.index("Approving will run")
    assert page.index(">Approve</button>") < page.index('id="checks"')


async def test_the_api_refuses_the_late_decision_the_same_way(
    as_role: Clients, orchestrator: Orchestrator
) -> None:
    version = await pending(as_role[Role.AGENT], orchestrator)
    ok = await as_role[Role.APPROVER].post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": version, "reason": "ok"})
    )
    assert ok.status_code == 200
    late = await as_role[Role.ADMIN].post(
        f"/v1/approvals/{BIG}/reject", content=as_json({"version": version, "reason": "no"})
    )
    assert late.status_code == 409
