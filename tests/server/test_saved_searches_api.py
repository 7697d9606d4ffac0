"""Saved searches over HTTP: ``PUT``/``GET``/``DELETE /v1/searches/{name}`` and
``GET /v1/sagas?saved=NAME``, on both ledgers. Each is the calling person's own: another
person neither sees, runs, replaces nor deletes it (theirs reads as missing); a query
``GET /v1/sagas`` refuses is refused when saved, and nothing is written."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
import pytest
from server_api import Clients, MakeClient, add_token

from pivotal import FakeClock
from pivotal.people.principals import Role
from pivotal.store import Store
from search_ledger import six


@pytest.fixture
async def ledger(store: Store) -> Store:
    return await six(store)


async def ids(client: httpx.AsyncClient, query: str) -> list[str]:
    reply = await client.get(f"/v1/sagas?{query}")
    assert reply.status_code == 200, reply.text
    return [s["saga_id"] for s in reply.json()["items"]]


async def save(client: httpx.AsyncClient, name: str, query: str) -> httpx.Response:
    return await client.put(f"/v1/searches/{quote(name, safe='')}", json={"query": query})


def error(reply: httpx.Response, status: int) -> str:
    assert reply.status_code == status, reply.text
    code: str = reply.json()["error"]["code"]
    return code


async def test_a_search_saved_runs_as_the_same_query_does(ledger: Store, as_role: Clients) -> None:
    viewer = as_role[Role.VIEWER]
    query = "status=compensated,needs_human&created_since=4d"
    reply = await save(viewer, "failed lately", query)
    assert reply.status_code == 200, reply.text
    saved: dict[str, Any] = reply.json()
    assert saved["name"] == "failed lately"
    assert saved["query"] == "status=compensated%2Cneeds_human&created_since=4d"
    assert saved["created_at"] == saved["updated_at"]
    assert "person" not in saved
    assert await ids(viewer, "saved=failed+lately") == await ids(viewer, query) == ["e", "c"]
    listed = (await viewer.get("/v1/searches")).json()
    assert listed["items"] == [saved]
    assert listed["next_offset"] is None
    assert (await viewer.get("/v1/searches/failed%20lately")).json() == saved


async def test_saving_again_replaces_and_paging_runs_through_a_saved_search(
    ledger: Store, as_role: Clients
) -> None:
    operator = as_role[Role.OPERATOR]
    first = (await save(operator, "mine", "status=running")).json()
    again = (await save(operator, "mine", "catalogue=checkout&order=asc")).json()
    assert again["query"] == "catalogue=checkout&order=asc"
    assert again["created_at"] == first["created_at"]
    assert [s["name"] for s in (await operator.get("/v1/searches")).json()["items"]] == ["mine"]
    seen: list[str] = []
    page = (await operator.get("/v1/sagas?saved=mine&limit=2")).json()
    seen += [s["saga_id"] for s in page["items"]]
    while page["next_cursor"]:
        cursor = page["next_cursor"]
        page = (await operator.get(f"/v1/sagas?saved=mine&limit=2&cursor={cursor}")).json()
        seen += [s["saga_id"] for s in page["items"]]
    assert seen == ["a", "b", "d", "f"]


async def test_another_person_neither_sees_runs_nor_deletes_yours(
    ledger: Store, as_role: Clients, store: Store, clock: FakeClock, client: MakeClient
) -> None:
    viewer = as_role[Role.VIEWER]
    assert (await save(viewer, "stuck", "status=needs_human")).status_code == 200
    other = client(await add_token(store, "vera", Role.VIEWER, clock))
    assert (await other.get("/v1/searches")).json()["items"] == []
    assert error(await other.get("/v1/searches/stuck"), 404) == "saved_search_not_found"
    assert error(await other.get("/v1/sagas?saved=stuck"), 404) == "saved_search_not_found"
    assert error(await other.delete("/v1/searches/stuck"), 404) == "saved_search_not_found"
    admin = as_role[Role.ADMIN]  # everything, but still only its own searches
    assert error(await admin.get("/v1/sagas?saved=stuck"), 404) == "saved_search_not_found"
    assert (await save(other, "stuck", "status=running")).status_code == 200  # her own
    assert await ids(viewer, "saved=stuck") == ["c"]
    assert await ids(other, "saved=stuck") == ["d"]
    # the same person under another spelling of the name (a second token of theirs)
    same = client(await add_token(store, "VIEWER", Role.VIEWER, clock))
    assert await ids(same, "saved=stuck") == ["c"]
    assert (await same.delete("/v1/searches/stuck")).status_code == 204
    assert (await viewer.get("/v1/searches")).json()["items"] == []
    assert await ids(other, "saved=stuck") == ["d"]


@pytest.mark.parametrize(
    "query",
    [
        "status=compensated&colour=red",
        "created_since=last+week",
        "status=nope",
        "created_since=1d&created_until=3d",
    ],
)
async def test_a_query_the_search_refuses_is_refused_and_nothing_is_saved(
    ledger: Store, as_role: Clients, query: str
) -> None:
    viewer = as_role[Role.VIEWER]
    searched = (await viewer.get(f"/v1/sagas?{query}")).json()["error"]
    reply = await save(viewer, "bad", query)
    assert error(reply, 422) == searched["code"] == "invalid_filter"
    assert reply.json()["error"]["message"] == searched["message"]  # the search's own words
    assert (await viewer.get("/v1/searches")).json()["items"] == []


@pytest.mark.parametrize("query", ["saved=other", "status=running&cursor=abc", "limit=5"])
async def test_a_saved_search_holds_no_paging_and_runs_no_other(
    ledger: Store, as_role: Clients, query: str
) -> None:
    viewer = as_role[Role.VIEWER]
    assert error(await save(viewer, "bad", query), 422) == "invalid_filter"
    assert (await viewer.get("/v1/searches")).json()["items"] == []


async def test_bad_names_bodies_and_runs_are_refused(ledger: Store, as_role: Clients) -> None:
    viewer = as_role[Role.VIEWER]
    assert error(await save(viewer, "x" * 81, "status=running"), 422) == "invalid_saved_search"
    assert error(await save(viewer, "tab\there", "status=running"), 422) == "invalid_saved_search"
    dots = await viewer.put("/v1/searches/%2E%2E", json={"query": "status=running"})
    assert error(dots, 422) == "invalid_saved_search"
    extra = await viewer.put("/v1/searches/mine", json={"query": "status=running", "by": "x"})
    assert error(extra, 422) == "invalid_input"  # no other body field: never a person
    assert error(await viewer.put("/v1/searches/mine", json={}), 422) == "invalid_input"
    assert (await viewer.get("/v1/searches")).json()["items"] == []
    assert (await save(viewer, "mine", "status=running")).status_code == 200
    beside = await viewer.get("/v1/sagas?saved=mine&catalogue=checkout")
    assert error(beside, 422) == "invalid_filter"
    assert "no filter beside it" in beside.json()["error"]["message"]
    assert error(await viewer.get("/v1/sagas?saved=nope"), 404) == "saved_search_not_found"
    assert error(await viewer.delete("/v1/searches/nope"), 404) == "saved_search_not_found"


async def test_a_person_keeps_at_most_fifty(ledger: Store, as_role: Clients) -> None:
    viewer = as_role[Role.VIEWER]
    for n in range(50):
        assert (await save(viewer, f"s{n:02}", "status=running")).status_code == 200
    assert error(await save(viewer, "one more", "status=running"), 422) == "saved_searches_full"
    assert (await save(viewer, "s10", "status=completed")).status_code == 200  # a replacement
    page = (await viewer.get("/v1/searches?limit=20&offset=40")).json()
    assert [s["name"] for s in page["items"]] == [f"s{n}" for n in range(40, 50)]
    assert page["next_offset"] is None


async def test_an_agent_has_no_saved_searches(ledger: Store, as_role: Clients) -> None:
    agent = as_role[Role.AGENT]
    assert error(await save(agent, "mine", "status=running"), 403) == "forbidden"
    assert error(await agent.get("/v1/searches"), 403) == "forbidden"
