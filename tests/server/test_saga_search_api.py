"""``GET /v1/sagas`` searches: every filter of ``store.search``, cursor pages, every reader
may read; whatever is sent, a bad filter or cursor is a 422 naming what is wrong."""

from __future__ import annotations

from typing import Any

import pytest
from server_api import Clients

from pivotal import SagaStatus
from pivotal.people.principals import Role
from pivotal.store import Store
from search_ledger import NOW, make, six


@pytest.fixture
async def ledger(store: Store) -> Store:
    return await six(store)


async def ids(client: Any, query: str) -> list[str]:
    reply = await client.get(f"/v1/sagas?{query}")
    assert reply.status_code == 200, reply.text
    return [s["saga_id"] for s in reply.json()["items"]]


async def test_every_filter_over_http(ledger: Store, as_role: Clients) -> None:
    viewer = as_role[Role.VIEWER]
    assert await ids(viewer, "") == ["f", "e", "d", "c", "b", "a"]
    assert await ids(viewer, "status=compensated&status=needs_human") == ["e", "c", "b"]
    assert await ids(viewer, "status=running,awaiting_approval") == ["f", "d"]
    assert await ids(viewer, "catalogue=fulfilment") == ["e", "c"]
    assert await ids(viewer, "created_since=3d") == ["f", "e", "d"]
    assert await ids(viewer, "created_since=5d&created_until=4d") == ["c", "b"]
    assert await ids(viewer, "updated_since=1d&sort=updated") == ["b", "f"]
    assert await ids(viewer, "actor_type=human") == ["d"]
    assert await ids(viewer, "actor_id=planner-8&run_id=run-1&prompt_version=v2") == ["b"]
    assert await ids(viewer, "model=m-2&source_document_id=doc-9") == ["c"]
    assert await ids(viewer, "on_behalf_of=ana%40example.com") == ["c"]
    assert await ids(viewer, "failed_step=charge_payment") == ["b"]
    assert await ids(viewer, "reason=declined") == ["b"]
    assert await ids(viewer, "about=order_id%3D4471") == ["b", "a"]
    assert await ids(viewer, "about=order_id=4471&about=order_id=4472") == ["b"]
    assert await ids(viewer, "order=asc&limit=2") == ["a", "b"]
    found = (await viewer.get("/v1/sagas?catalogue=fulfilment&limit=1")).json()["items"][0]
    assert found == {
        "saga_id": "e",
        "catalogue": "fulfilment",
        "status": "compensated",
        "reason": "reserve_stock failed: out of stock",
        "created_at": NOW - 2 * 86_400,
        "updated_at": NOW - 2 * 86_400,
    }


async def test_cursor_pages_cover_everything_once(ledger: Store, as_role: Clients) -> None:
    viewer = as_role[Role.VIEWER]
    seen: list[str] = []
    query = "status=completed,compensated,needs_human,running,awaiting_approval&limit=2"
    reply = (await viewer.get(f"/v1/sagas?{query}")).json()
    for n in range(3):
        seen += [s["saga_id"] for s in reply["items"]]
        await make(ledger, f"new-{n}", at=NOW + n)  # arrives between pages
        if reply["next_cursor"] is None:
            break
        assert reply["next_offset"] == 2
        reply = (await viewer.get(f"/v1/sagas?{query}&cursor={reply['next_cursor']}")).json()
    assert seen == ["f", "e", "d", "c", "b", "a"]
    assert reply["next_cursor"] is None


@pytest.mark.parametrize("role", [Role.VIEWER, Role.APPROVER, Role.OPERATOR, Role.ADMIN])
async def test_every_reader_may_search(ledger: Store, as_role: Clients, role: Role) -> None:
    assert await ids(as_role[role], "status=needs_human") == ["c"]


async def test_an_agent_may_not_search(ledger: Store, as_role: Clients) -> None:
    assert (await as_role[Role.AGENT].get("/v1/sagas?status=needs_human")).status_code == 403


@pytest.mark.parametrize(
    ("query", "code", "says"),
    [
        ("status=finished", "invalid_filter", "submitted, running"),
        ("actor_type=robot", "invalid_filter", "agent, human, system"),
        ("sort=name", "invalid_filter", "created, updated"),
        ("order=sideways", "invalid_filter", "desc, asc"),
        ("created_since=yesterday", "invalid_filter", "neither a duration"),
        ("reason=" + "x" * 10_000, "invalid_filter", "longer than 200"),
        ("catalogue=a%00b", "invalid_filter", "control character"),
        ("about=order_id", "invalid_filter", "NAME=VALUE"),
        ("cursor=garbage", "invalid_cursor", "next_cursor"),
        ("cursor=" + "A" * 5000, "invalid_cursor", "at most"),
        ("cursor=WyJjcmVhdGVkIiwiZGVzYyIsIk5hTiIsInMxIl0", "invalid_cursor", "not one"),
        ("catalogue=x&offset=2", "invalid_filter", "page a search by cursor"),
        ("limit=501", "invalid_input", "limit"),
        ("statuss=needs_human", "invalid_filter", "unknown filter 'statuss'"),
        ("status=running&Catalogue=x", "invalid_filter", "unknown filter 'Catalogue'"),
        ("catalogue=a&catalogue=b", "invalid_filter", "catalogue may be given once"),
        ("sort=created&sort=updated", "invalid_filter", "sort may be given once"),
    ],
)
async def test_a_bad_filter_is_a_clear_422(
    ledger: Store, as_role: Clients, query: str, code: str, says: str
) -> None:
    reply = await as_role[Role.VIEWER].get(f"/v1/sagas?{query}")
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["code"] == code
    assert says in error["message"] + str(error.get("problems"))


async def test_a_cursor_for_another_order_is_refused(ledger: Store, as_role: Clients) -> None:
    viewer = as_role[Role.VIEWER]
    cursor = (await viewer.get("/v1/sagas?limit=2")).json()["next_cursor"]
    reply = await viewer.get(f"/v1/sagas?limit=2&sort=updated&cursor={cursor}")
    assert reply.status_code == 422
    assert "keep the order" in reply.json()["error"]["message"]


async def test_hostile_values_are_only_values(store: Store, as_role: Clients) -> None:
    odd = "%_'\";--ünï"
    await make(
        store, "odd", at=NOW, catalogue=odd, reason=f"x{odd}y", status=SagaStatus.COMPENSATED
    )
    await make(store, "plain", at=NOW - 1)
    viewer = as_role[Role.VIEWER]
    reply = await viewer.get("/v1/sagas", params={"catalogue": odd, "reason": odd})
    assert [s["saga_id"] for s in reply.json()["items"]] == ["odd"]
    assert await ids(viewer, "reason=%25") == ["odd"]  # a literal %
    assert await ids(viewer, "") == ["odd", "plain"]
