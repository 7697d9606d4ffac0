"""``GET /v1/workers`` and the page ``/ui/workers``: each worker's name, state (alive, stale,
stopped), heartbeat age, leases held, version and catalogues; the roles that read lists."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest
from server_api import Clients, add_token

from pivotal import FakeClock, Orchestrator
from pivotal.people.principals import Role
from pivotal.store import Store

HOSTILE = "<script>alert(1)</script>"


async def workers_of(store: Store, clock: FakeClock, orchestrator: Orchestrator, plan) -> None:
    """alive (holds one lease), stale (went silent 10 minutes ago), stopped."""
    t0 = clock.now()
    start = {"version": "1.0", "beat_every": 10.0}
    await store.start_worker("stale-1", t0, catalogues=["checkout"], **start)
    clock.advance(600)
    now = clock.now()
    await store.start_worker("gone", now - 5, catalogues=[], **start)
    await store.beat_worker("gone", now - 4, stopped=True)
    await store.start_worker("alive-1", now - 2, catalogues=["fulfilment", "checkout"], **start)
    await orchestrator.submit(plan("o-workers"), saga_id="held")
    assert await store.claim("held", "alive-1", 30, now) is not None


async def test_no_workers_is_an_empty_page(as_role: Clients) -> None:
    reply = await as_role[Role.OPERATOR].get("/v1/workers")
    assert reply.status_code == 200
    assert reply.json() == {"items": [], "limit": 100, "offset": 0, "next_offset": None}


async def test_workers_are_listed_with_state_age_leases_version_and_catalogues(
    as_role: Clients, store: Store, clock: FakeClock, orchestrator: Orchestrator, checkout_plan
) -> None:
    await workers_of(store, clock, orchestrator, checkout_plan)

    reply = await as_role[Role.VIEWER].get("/v1/workers")

    assert reply.status_code == 200
    items = reply.json()["items"]
    assert [(w["name"], w["state"]) for w in items] == [
        ("alive-1", "alive"),
        ("gone", "stopped"),
        ("stale-1", "stale"),
    ]
    alive = items[0]
    assert alive["heartbeat_age"] == 2.0
    assert alive["leases"] == ["held"]
    assert (alive["version"], alive["catalogues"]) == ("1.0", ["checkout", "fulfilment"])
    assert items[1]["stopped_at"] == clock.now() - 4
    assert items[2]["heartbeat_age"] == 600.0
    assert items[2]["leases"] == []


async def test_workers_page_by_page(as_role: Clients, store: Store, clock: FakeClock) -> None:
    for n in range(3):
        await store.start_worker(f"w{n}", clock.now() + n, version="1", catalogues=[], beat_every=1)
    first = (await as_role[Role.OPERATOR].get("/v1/workers?limit=2")).json()
    assert [w["name"] for w in first["items"]] == ["w2", "w1"]
    assert first["next_offset"] == 2
    rest = (await as_role[Role.OPERATOR].get("/v1/workers?limit=2&offset=2")).json()
    assert ([w["name"] for w in rest["items"]], rest["next_offset"]) == (["w0"], None)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_an_agent_token_is_forbidden_and_none_is_unauthorized(
    as_role: Clients, client: Callable[[str | None], httpx.AsyncClient]
) -> None:
    reply = await as_role[Role.AGENT].get("/v1/workers")
    assert reply.status_code == 403
    assert (await client(None).get("/v1/workers")).status_code == 401
    for role in (Role.APPROVER, Role.OPERATOR, Role.VIEWER, Role.ADMIN):
        assert (await as_role[role].get("/v1/workers")).status_code == 200


# -- the page --------------------------------------------------------------------------------


async def logged_in(
    browser: Callable[[], httpx.AsyncClient], store: Store, clock: FakeClock, role: Role
) -> httpx.AsyncClient:
    c = browser()
    token = await add_token(store, role.value, role, clock)
    form = await c.get("/ui/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    reply = await c.post("/ui/login", data={"token": token, "csrf": csrf.group(1)})
    assert reply.status_code == 303, reply.text
    return c


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_the_page_without_a_session_goes_to_login(
    browser: Callable[[], httpx.AsyncClient],
) -> None:
    reply = await browser().get("/ui/workers")
    assert reply.status_code == 303
    assert reply.headers["location"] == "/ui/login"


async def test_the_page_shows_each_worker_and_the_nav_links_to_it(
    browser: Callable[[], httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
    orchestrator: Orchestrator,
    checkout_plan,
) -> None:
    await workers_of(store, clock, orchestrator, checkout_plan)
    c = await logged_in(browser, store, clock, Role.VIEWER)

    reply = await c.get("/ui/workers")

    assert reply.status_code == 200
    html = reply.text
    assert '<a href="/ui/workers" class="on">Workers</a>' in html
    rows = re.findall(r"<tr>\s*<td><code>(.*?)</code></td>.*?</tr>", html, re.S)
    assert rows == ["alive-1", "gone", "stale-1"]
    assert '<span class="status s-alive">alive</span>' in html
    assert '<span class="status s-stale">stale</span>' in html
    assert '<span class="status s-stopped">stopped</span>' in html
    assert "2s ago" in html
    assert "10m 0s ago" in html
    assert '<a href="/ui/sagas/held">held</a>' in html
    assert "fulfilment" in html
    assert "checkout, fulfilment" in html


async def test_the_page_with_no_workers_says_so_and_escapes_names(
    browser: Callable[[], httpx.AsyncClient], store: Store, clock: FakeClock
) -> None:
    c = await logged_in(browser, store, clock, Role.OPERATOR)
    assert "No worker has run against this ledger." in (await c.get("/ui/workers")).text
    await store.start_worker(HOSTILE, clock.now(), version=HOSTILE, catalogues=[], beat_every=1)
    html = (await c.get("/ui/workers")).text
    assert HOSTILE not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_the_other_pages_link_to_the_workers_page(
    browser: Callable[[], httpx.AsyncClient], store: Store, clock: FakeClock
) -> None:
    c = await logged_in(browser, store, clock, Role.APPROVER)
    html = (await c.get("/ui/sagas")).text
    assert '<a href="/ui/workers">Workers</a>' in html
