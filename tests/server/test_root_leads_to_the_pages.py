"""``GET /`` on the server leads a person to the pages: the queue, or the login page
without a session; it needs no token and is not part of the API's document."""

from __future__ import annotations

import pytest
from server_api import Clients, MakeClient

from pivotal.people.principals import Role

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)


async def test_root_redirects_to_the_pages(client: MakeClient) -> None:
    anyone = client(None)
    answer = await anyone.get("/")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui"
    assert answer.headers["cache-control"] == "no-store"


async def test_following_it_without_a_session_ends_on_the_login_page(client: MakeClient) -> None:
    anyone = client(None)
    answer = await anyone.get("/", follow_redirects=True)
    assert answer.status_code == 200
    assert answer.url.path == "/ui/login"
    assert "text/html" in answer.headers["content-type"]


async def test_root_is_not_an_api_route(as_role: Clients) -> None:
    document = (await as_role[Role.VIEWER].get("/openapi.json")).json()
    assert "/" not in document["paths"]
