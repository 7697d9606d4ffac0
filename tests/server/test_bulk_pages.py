"""The sagas page acts on every saga of a search: an operator picks the act, is asked
"Abort 3 sagas?" with the sagas named, and only the sagas confirmed are acted on (a search
that changed meanwhile asks again, even with as many sagas); the search folds away once
made and has a link to copy."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI
from server_api import add_token, csrf_of

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus
from pivotal.people.principals import Role
from pivotal.store import Store

Login = Callable[[Role], Awaitable[httpx.AsyncClient]]
PlanBuilder = Callable[..., Plan]
SEARCH = "status=submitted&order=asc"

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


@pytest.fixture
async def login(api: FastAPI, store: Store, clock: FakeClock) -> AsyncIterator[Login]:
    made: list[httpx.AsyncClient] = []

    async def log_in(role: Role) -> httpx.AsyncClient:
        c = httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://pivotal")
        made.append(c)
        token = await add_token(store, role.value, role, clock)
        form = await c.get("/ui/login")
        reply = await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
        assert reply.status_code == 303, reply.text
        return c

    yield log_in
    for c in made:
        await c.aclose()


async def three(orchestrator: Orchestrator, checkout_plan: PlanBuilder) -> None:
    for n in range(3):
        await orchestrator.submit(checkout_plan(f"k-{n}"), saga_id=f"b{n}")


async def statuses(orchestrator: Orchestrator) -> set[SagaStatus]:
    return {s.status for s in await orchestrator.store.list_sagas(None, 100)}


def hidden(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found, page
    return html.unescape(found.group(1))


async def test_the_search_folds_away_once_made_and_links_to_itself(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder, login: Login
) -> None:
    await three(orchestrator, checkout_plan)
    viewer = await login(Role.VIEWER)
    blank = (await viewer.get("/ui/sagas")).text
    assert '<details class="card search" open>' in blank
    assert "Link to this search" not in blank
    searched = (await viewer.get("/ui/sagas?status=submitted&created_since=7d&catalogue=")).text
    assert '<details class="card search">' in searched
    assert 'href="/ui/sagas?status=submitted&amp;created_since=7d" id="search-link"' in searched
    assert searched.index('<table class="grid">') < searched.index("<details")
    assert 'action="/ui/sagas/bulk"' not in searched  # a viewer reads only
    refused = await viewer.get("/ui/sagas?status=submitted&created_since=soon")
    assert refused.status_code == 400
    assert '<details class="card search" open>' in refused.text
    unknown = await viewer.get("/ui/sagas?colour=red")
    assert unknown.status_code == 400
    assert "unknown filter &#39;colour&#39;" in unknown.text


async def test_an_operator_confirms_the_count_and_then_the_sagas_are_aborted(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder, login: Login
) -> None:
    await three(orchestrator, checkout_plan)
    operator = await login(Role.OPERATOR)
    shown = (await operator.get(f"/ui/sagas?{SEARCH}")).text
    assert hidden(shown, "search") == SEARCH
    ask = {"csrf": csrf_of(shown), "search": SEARCH, "act": "abort", "reason": "a bad batch"}
    asked = await operator.post("/ui/sagas/bulk", data=ask)
    assert asked.status_code == 200, asked.text
    assert "<h1>Abort 3 sagas?</h1>" in asked.text
    assert all(f'href="/ui/sagas/b{n}"' in asked.text for n in range(3))
    seal = hidden(asked.text, "confirm")
    assert seal.startswith("3-")
    assert await statuses(orchestrator) == {SagaStatus.SUBMITTED}  # asking changed nothing

    done = await operator.post("/ui/sagas/bulk", data=ask | {"confirm": seal})
    assert done.status_code == 200, done.text
    assert "3 acted, 0 already, 0 refused, 0 not found." in done.text
    assert await statuses(orchestrator) == {SagaStatus.COMPENSATING}
    reason = (await orchestrator.get("b1")).state.reason
    assert reason == "aborted by operator: a bad batch"


async def test_a_search_that_changed_since_it_was_confirmed_asks_again(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder, login: Login
) -> None:
    await three(orchestrator, checkout_plan)
    operator = await login(Role.OPERATOR)
    csrf = csrf_of((await operator.get("/ui/sagas")).text)
    ask = {"csrf": csrf, "search": SEARCH, "act": "abort", "reason": "why"}
    asked = await operator.post("/ui/sagas/bulk", data=ask)
    seal = hidden(asked.text, "confirm")
    await orchestrator.abort("b1", "ana", "by hand", run=False)  # one left the search
    await orchestrator.submit(checkout_plan("k-7"), saga_id="b7")  # and one joined it
    again = await operator.post("/ui/sagas/bulk", data=ask | {"confirm": seal})
    assert "<h1>Abort 3 sagas?</h1>" in again.text
    assert "The search now selects other sagas than those you confirmed" in again.text
    assert (await orchestrator.get("b7")).state.status is SagaStatus.SUBMITTED


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"act": "abort", "reason": " "}, "aborting sagas needs a reason"),
        ({"act": "explode", "reason": "why"}, "unknown act"),
        ({"act": "abort", "reason": "why", "search": "colour=red"}, "unknown filter"),
    ],
)
async def test_bad_input_is_400_and_nothing_is_done(
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    login: Login,
    fields: dict[str, str],
    said: str,
) -> None:
    await three(orchestrator, checkout_plan)
    operator = await login(Role.OPERATOR)
    csrf = csrf_of((await operator.get("/ui/sagas")).text)
    form = {"csrf": csrf, "search": SEARCH, "confirm": "3-x"} | fields
    reply = await operator.post("/ui/sagas/bulk", data=form)
    assert reply.status_code == 400, reply.text
    assert said in html.unescape(reply.text)
    assert await statuses(orchestrator) == {SagaStatus.SUBMITTED}
    forged = await operator.post("/ui/sagas/bulk", data=form | {"csrf": "x", "reason": "ok"})
    assert forged.status_code == 403
    assert await statuses(orchestrator) == {SagaStatus.SUBMITTED}
