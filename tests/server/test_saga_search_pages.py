"""The Sagas page searches: its form round-trips every filter, pages of at most 200 end
with a "next page" link, a bad filter says why (400, never a 500), and every value shown
is escaped."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from fastapi import FastAPI
from server_api import add_token

from pivotal import FakeClock, SagaStatus
from pivotal.people.principals import Role
from pivotal.store import Store
from search_ledger import NOW, make, six

HOSTILE = "<script>alert(1)</script>\"'&"
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
        token = await add_token(store, role.value, role, clock)
        form = await c.get("/ui/login")
        reply = await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
        assert reply.status_code == 303, reply.text
        return c

    yield log_in
    for c in made:
        await c.aclose()


def listed(page: str) -> list[str]:
    return re.findall(r'<a href="/ui/sagas/([^"?]+)">', page)


async def test_the_form_round_trips_every_filter(store: Store, login: Login) -> None:
    await six(store)
    viewer = await login(Role.VIEWER)
    query = {
        "status": ["compensated", "needs_human"],
        "catalogue": "fulfilment",
        "created_since": "7d",
        "reason": "t",
        "about": "order_id=4472",
        "sort": "updated",
        "order": "asc",
    }
    reply = await viewer.get("/ui/sagas", params=query)
    assert reply.status_code == 200
    page = reply.text
    assert listed(page) == ["e"]
    assert '<input type="checkbox" name="status" value="compensated" checked>' in page
    assert '<input type="checkbox" name="status" value="needs_human" checked>' in page
    assert '<input type="checkbox" name="status" value="running">' in page
    assert 'name="catalogue" value="fulfilment"' in page
    assert 'name="created_since" value="7d"' in page
    assert 'name="about" value="order_id=4472"' in page
    assert '<option value="updated" selected>' in page
    assert '<option value="asc" selected>' in page
    for field, value, expected in [
        ("actor_type", "human", ["d"]),
        ("actor_id", "planner-8", ["b"]),
        ("model", "m-2", ["c"]),
        ("run_id", "run-1", ["b"]),
        ("prompt_version", "v2", ["b"]),
        ("on_behalf_of", "ana@example.com", ["c"]),
        ("source_document_id", "doc-9", ["c"]),
        ("failed_step", "ship", ["c"]),
        ("updated_since", "1d", ["f", "b"]),
    ]:
        page = (await viewer.get("/ui/sagas", params={field: value})).text
        assert listed(page) == expected, field
        assert f'name="{field}" value="{html.escape(value)}"' in page
    # the form left blank lists everything, newest first
    blank = {name: "" for name in ("catalogue", "reason", "created_since", "about")}
    assert listed((await viewer.get("/ui/sagas", params=blank)).text) == list("fedcba")


async def test_pages_of_200_end_with_a_next_page_link(store: Store, login: Login) -> None:
    for n in range(205):
        await make(store, f"s{n:03}", at=NOW + n, status=SagaStatus.COMPENSATED, reason="r")
    await make(store, "other", at=NOW + 500)  # completed: filtered out
    viewer = await login(Role.VIEWER)
    first = (await viewer.get("/ui/sagas", params={"status": "compensated"})).text
    rows = listed(first)
    assert len(rows) == 200
    assert rows[0] == "s204"
    link = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', first)
    assert link is not None
    await make(store, "late", at=NOW + 1000, status=SagaStatus.COMPENSATED)  # meanwhile
    following = html.unescape(link.group(1))
    assert following.startswith("/ui/sagas?status=compensated&cursor=")
    second = (await viewer.get(following)).text
    assert listed(second) == ["s004", "s003", "s002", "s001", "s000"]
    assert 'rel="next"' not in second
    assert '<input type="checkbox" name="status" value="compensated" checked>' in second


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"status": "finished"}, "is not one of: submitted, running"),
        ({"actor_type": "robot"}, "agent, human, system"),
        ({"created_since": "last week"}, "neither a duration"),
        ({"reason": "x" * 10_000}, "longer than 200"),
        ({"cursor": "not-a-cursor"}, "not one a page of sagas ended with"),
        ({"about": "order_id"}, "NAME=VALUE"),
        ({"statuss": "needs_human"}, "unknown filter 'statuss'"),
    ],
)
async def test_a_bad_filter_says_why(
    store: Store, login: Login, query: dict[str, str], says: str
) -> None:
    await six(store)
    reply = await (await login(Role.VIEWER)).get("/ui/sagas", params=query)
    assert reply.status_code == 400
    assert says in html.unescape(reply.text)
    assert '<form method="get" action="/ui/sagas"' in reply.text  # the form, to fix it


async def test_every_value_shown_is_escaped(store: Store, login: Login) -> None:
    await make(
        store,
        "odd",
        at=NOW,
        catalogue=HOSTILE,
        reason=HOSTILE,
        status=SagaStatus.COMPENSATION_FAILED,
    )
    viewer = await login(Role.VIEWER)
    reply = await viewer.get("/ui/sagas", params={"catalogue": HOSTILE, "reason": HOSTILE})
    assert reply.status_code == 200
    assert listed(reply.text) == ["odd"]
    assert "<script>" not in reply.text
    assert html.escape(HOSTILE) in reply.text or "&lt;script&gt;" in reply.text
    refused = await viewer.get("/ui/sagas", params={"actor_type": HOSTILE})
    assert refused.status_code == 400
    assert "<script>" not in refused.text


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER, Role.OPERATOR])
async def test_every_reader_may_search(store: Store, login: Login, role: Role) -> None:
    await six(store)
    page = (await (await login(role)).get("/ui/sagas?status=needs_human")).text
    assert listed(page) == ["c"]
