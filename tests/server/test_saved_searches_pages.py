"""Saved searches on the Sagas page: once a search is made, "Save this search as" keeps its
filters (never its paging) as the signed-in person's, by name; the page lists that person's
saved searches as links to the search (as "Link to this search" is), each with a delete
button. Forms are CSRF-checked, what is refused says why and changes nothing, names are
escaped, and one person never sees or deletes another's."""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable
from urllib.parse import quote

import httpx
from server_api import add_token, csrf_of

from pivotal import FakeClock
from pivotal.people.principals import Role
from pivotal.store import Store
from search_ledger import six

Login = Callable[[Role], Awaitable[httpx.AsyncClient]]
SEARCH = "status=compensated&reason=declined&sort=created&order=desc"


def hidden(page: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)">', page)
    assert found, page
    return html.unescape(found.group(1))


def saved_links(page: str) -> list[tuple[str, str]]:
    """(link, name) of each saved search the page lists."""
    nav = page.partition('<nav class="saved"')[2].partition("</nav>")[0]
    found = re.findall(r'<a href="([^"]+)"(?: aria-current="page")?>([^<]*)</a>', nav)
    return [(html.unescape(link), html.unescape(name)) for link, name in found]


async def names(store: Store, person: str) -> list[str]:
    return [s.name for s in await store.saved_searches(person)]


async def test_a_search_made_is_saved_by_name_and_listed_as_its_link(
    store: Store, login: Login
) -> None:
    await six(store)
    viewer = await login(Role.VIEWER)
    first = await viewer.get("/ui/sagas")
    assert "Save this search as" not in first.text  # no search made: nothing to save
    assert '<nav class="saved"' not in first.text
    shown = await viewer.get(f"/ui/sagas?{SEARCH}&limit=5&cursor=")
    assert shown.status_code == 200
    assert hidden(shown.text, "query") == SEARCH  # the filters as typed, without paging
    saved = await viewer.post(
        "/ui/searches", data={"csrf": csrf_of(shown.text), "name": " declined ", "query": SEARCH}
    )
    assert saved.status_code == 303
    assert saved.headers["location"] == f"/ui/sagas?{SEARCH}"
    [kept] = await store.saved_searches("viewer")
    assert (kept.name, kept.query) == ("declined", SEARCH)
    page = (await viewer.get(saved.headers["location"])).text
    assert saved_links(page) == [(f"/ui/sagas?{SEARCH}", "declined")]
    assert 'aria-current="page">declined</a>' in page  # the search shown is that one
    link = re.search(r'<a href="([^"]+)" id="search-link">', page)
    assert link
    assert html.unescape(link.group(1)) == f"/ui/sagas?{SEARCH}"  # "Link to this search"
    other = (await viewer.get("/ui/sagas?status=running")).text
    assert saved_links(other) == [(f"/ui/sagas?{SEARCH}", "declined")]
    assert 'aria-current="page"' not in other


async def test_a_save_without_its_csrf_token_or_with_bad_input_saves_nothing(
    store: Store, login: Login
) -> None:
    viewer = await login(Role.VIEWER)
    csrf = csrf_of((await viewer.get(f"/ui/sagas?{SEARCH}")).text)
    forged = await viewer.post("/ui/searches", data={"csrf": "x", "name": "a", "query": SEARCH})
    assert forged.status_code == 403
    for name, query, says in [
        ("", SEARCH, "1 to 80 characters"),
        ("a/b", SEARCH, "no &#39;/&#39;"),
        ("mine", "status=compensated&colour=red", "unknown filter &#39;colour&#39;"),
        ("mine", "status=compensated&cursor=abc", "not paging (cursor)"),
    ]:
        reply = await viewer.post("/ui/searches", data={"csrf": csrf, "name": name, "query": query})
        assert reply.status_code == 400, reply.text
        assert says in reply.text
        assert "nothing was saved" in reply.text
    assert await store.saved_searches("viewer") == []


async def test_delete_goes_back_to_the_search_shown_and_only_ever_there(
    store: Store, login: Login
) -> None:
    viewer = await login(Role.VIEWER)
    await store.save_search("viewer", "declined", SEARCH)
    await store.save_search("viewer", "running", "status=running")
    page = (await viewer.get("/ui/sagas?status=running")).text
    assert hidden(page, "back") == "status=running"
    csrf = csrf_of(page)
    reply = await viewer.post(
        "/ui/searches/declined/delete", data={"csrf": csrf, "back": "status=running"}
    )
    assert reply.status_code == 303
    assert reply.headers["location"] == "/ui/sagas?status=running"
    assert await names(store, "viewer") == ["running"]
    again = await viewer.post("/ui/searches/declined/delete", data={"csrf": csrf, "back": ""})
    assert again.status_code == 404
    for back in ("//evil.example/", "https://evil.example/", "colour=red", "cursor=x"):
        await store.save_search("viewer", "gone", "status=running")
        reply = await viewer.post("/ui/searches/gone/delete", data={"csrf": csrf, "back": back})
        assert reply.headers["location"] == "/ui/sagas"  # never another address
    forged = await viewer.post("/ui/searches/running/delete", data={"csrf": "x"})
    assert forged.status_code == 403
    assert await names(store, "viewer") == ["running"]


async def test_one_person_never_sees_nor_deletes_anothers(
    store: Store, login: Login, browser: Callable[[], httpx.AsyncClient], clock: FakeClock
) -> None:
    viewer = await login(Role.VIEWER)
    await store.save_search("viewer", "declined", SEARCH)
    vera = browser()
    token = await add_token(store, "vera", Role.OPERATOR, clock)
    form = await vera.get("/ui/login")
    await vera.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})
    page = (await vera.get(f"/ui/sagas?{SEARCH}")).text
    assert saved_links(page) == []
    refused = await vera.post("/ui/searches/declined/delete", data={"csrf": csrf_of(page)})
    assert refused.status_code == 404
    assert await names(store, "viewer") == ["declined"]
    mine = (await viewer.get("/ui/sagas")).text
    assert saved_links(mine) == [(f"/ui/sagas?{SEARCH}", "declined")]


async def test_a_saved_searchs_name_is_shown_escaped_and_its_delete_addressed_by_it(
    store: Store, login: Login
) -> None:
    viewer = await login(Role.VIEWER)
    hostile = '<b onclick="x">\'&50% off? #1'
    await store.save_search("viewer", hostile, "reason=%3Cb%3E")
    page = (await viewer.get("/ui/sagas")).text
    assert "<b onclick" not in page
    assert saved_links(page) == [("/ui/sagas?reason=%3Cb%3E", hostile)]
    action = re.search(r'action="(/ui/searches/[^"]+/delete)"', page)
    assert action
    assert action.group(1) == f"/ui/searches/{quote(hostile)}/delete"
    reply = await viewer.post(action.group(1), data={"csrf": csrf_of(page)})
    assert reply.status_code == 303
    assert await store.saved_searches("viewer") == []
