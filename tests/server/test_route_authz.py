"""The authorization table, as one test generated from the route table.

``TABLE`` has one row per route of the app, keyed by (method, path template): who may call
it, and how the caller is known. A route of ``app.routes`` without a row fails
``test_every_route_has_a_row`` (a new route cannot ship without saying who may call it), and
so does a row for a route that no longer exists. For every row, every role and a missing, a
bad and a revoked credential, ``test_each_route_answers_as_its_row_says`` checks the class
of the answer:

* ``token`` (the API, ``/metrics``, ``/openapi.json`` and its page ``/docs``: a bearer token):
  an allowed role gets neither 401 nor 403 (a dummy id's 404, a 409 or a 422 is fine), any
  other role 403 ``forbidden``; no token, a bad one or a revoked one 401 ``unauthorized``.
  Admin may do everything.
* ``session`` (the pages under ``/ui``: a session cookie from the login form): an allowed
  role gets neither 401 nor 403 nor the login redirect, any other role 403; no session, a
  forged session cookie or the session of a revoked token is redirected to the login page
  (303, ``Location: /ui/login``), which is what the pages do today. An agent cannot get a
  session (the login answers 403: agents use the API), so every page treats it as having
  none.
* ``login`` (``POST /ui/login``): a live token of a person's role signs in (303), an agent's
  is refused (403), none, a bad or a revoked one is 401.
* ``public``: anyone, with or without a credential, gets neither 401 nor 403.

The roles are those of the role table of the manual's serving page
(docs/site/how-to/serving.md): agents validate, submit and read their own sagas and the
catalogues; approvers, operators and viewers read; approvers decide pivots;
operators settle dead letters, escalations and parked sagas; only operators and viewers read
the weekly report (``GET /v1/report``); every person (not an agent) keeps saved searches of
their own; any role may scrape ``/metrics`` and read ``/openapi.json`` and its page ``/docs``.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import httpx
import pytest
from fastapi import FastAPI
from server_api import add_token, plan_body
from starlette.routing import BaseRoute, Mount

import pivotal.server.pages
import pivotal.server.pages.routes
from pivotal import FakeClock
from pivotal.people.principals import Role, hash_token
from pivotal.store import Store

# the rules do not depend on the ledger: one backend is enough
pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

AGENT, APPROVER, OPERATOR, VIEWER, ADMIN = (
    Role.AGENT,
    Role.APPROVER,
    Role.OPERATOR,
    Role.VIEWER,
    Role.ADMIN,
)
EVERYONE = frozenset(Role)
READERS = frozenset({APPROVER, OPERATOR, VIEWER})
LOGIN = "/ui/login"
WHY = {"reason": "checked by hand"}
DECISION_FORM = {"reason": "checked by hand", "version": "1"}

Kind = Literal["public", "token", "session", "login"]


@dataclass(frozen=True)
class Call:
    """One request to make of a route: a concrete path (``{role}`` is the caller's role)
    and a body (JSON for the API, form fields for a page; a page's CSRF token is added)."""

    path: str
    body: Any = None


@dataclass(frozen=True)
class Row:
    kind: Kind
    allowed: frozenset[Role]
    calls: tuple[Call, ...]
    signs_out: bool = False  # its success is the redirect to the login page (logout)


def public(*paths: str) -> Row:
    return Row("public", EVERYONE, tuple(Call(p) for p in paths))


def token(roles: frozenset[Role] | set[Role], path: str, body: Any = None) -> Row:
    return Row("token", frozenset({*roles, ADMIN}), (Call(path, body),))


def page(roles: frozenset[Role] | set[Role], *calls: Call, signs_out: bool = False) -> Row:
    return Row("session", frozenset({*roles, ADMIN}), calls, signs_out)


# (method, path template) -> who may call it. Keep one row per route of the app.
TABLE: dict[tuple[str, str], Row] = {
    # -- public -------------------------------------------------------------------------
    ("GET", "/"): public("/"),  # a redirect to the pages
    ("GET", "/healthz"): public("/healthz"),
    ("GET", "/readyz"): public("/readyz"),
    ("GET", "/ui"): public("/ui"),  # a redirect to the queue, which needs a session
    ("GET", "/ui/login"): public(LOGIN),
    ("GET", "/ui/static/{name}"): public("/ui/static/style.css", "/ui/static/poll.js"),
    ("POST", "/ui/login"): Row("login", EVERYONE - {AGENT}, (Call(LOGIN),)),
    # -- the API, by bearer token ---------------------------------------------------------
    ("GET", "/openapi.json"): token(EVERYONE, "/openapi.json"),
    # the document's page (Swagger UI) and its assets: the document's rule (gate.SPEC_PATHS)
    ("GET", "/docs"): token(EVERYONE, "/docs"),
    ("GET", "/docs/assets/{name}"): token(EVERYONE, "/docs/assets/swagger-ui-bundle.js"),
    ("GET", "/metrics"): token(EVERYONE, "/metrics"),
    ("POST", "/v1/plans/validate"): token({AGENT}, "/v1/plans/validate", plan_body()),
    ("POST", "/v1/sagas"): token({AGENT}, "/v1/sagas?saga_id=authz-{role}", plan_body()),
    ("GET", "/v1/sagas"): token(READERS, "/v1/sagas"),
    ("GET", "/v1/sagas/{saga_id}"): token(EVERYONE, "/v1/sagas/nope"),
    ("GET", "/v1/catalogues"): token(EVERYONE, "/v1/catalogues"),
    ("GET", "/v1/catalogues/{name}"): token(EVERYONE, "/v1/catalogues/checkout"),
    ("GET", "/v1/approvals"): token(READERS, "/v1/approvals"),
    ("POST", "/v1/approvals/{saga_id}/approve"): token(
        {APPROVER}, "/v1/approvals/nope/approve", {"version": 1}
    ),
    ("POST", "/v1/approvals/{saga_id}/reject"): token(
        {APPROVER}, "/v1/approvals/nope/reject", {"version": 1}
    ),
    ("GET", "/v1/dead-letters"): token(READERS, "/v1/dead-letters"),
    ("POST", "/v1/dead-letters/{dead_letter_id}/retry"): token(
        {OPERATOR}, "/v1/dead-letters/7/retry"
    ),
    ("POST", "/v1/dead-letters/{dead_letter_id}/resolve"): token(
        {OPERATOR}, "/v1/dead-letters/7/resolve", WHY
    ),
    ("GET", "/v1/escalations"): token(READERS, "/v1/escalations"),
    ("POST", "/v1/escalations/{escalation_id}/resolve"): token(
        {OPERATOR}, "/v1/escalations/7/resolve", WHY
    ),
    ("POST", "/v1/sagas/{saga_id}/resume"): token({OPERATOR}, "/v1/sagas/nope/resume", WHY),
    ("POST", "/v1/sagas/{saga_id}/resolve"): token({OPERATOR}, "/v1/sagas/nope/resolve", WHY),
    ("POST", "/v1/sagas/{saga_id}/abort"): token({OPERATOR}, "/v1/sagas/nope/abort", WHY),
    ("POST", "/v1/sagas/{saga_id}/rerun"): token({OPERATOR}, "/v1/sagas/nope/rerun"),
    ("POST", "/v1/sagas/bulk"): token(
        {OPERATOR}, "/v1/sagas/bulk", {"act": "abort", "dry_run": True}
    ),
    ("POST", "/v1/sagas/{saga_id}/fork"): token(
        {OPERATOR}, "/v1/sagas/nope/fork", {"set": {"0.quantity": 1}, "reason": "fewer"}
    ),
    ("GET", "/v1/sagas/{saga_id}/events"): token(READERS, "/v1/sagas/nope/events"),
    ("GET", "/v1/report"): token({OPERATOR, VIEWER}, "/v1/report"),
    ("GET", "/v1/workers"): token(READERS, "/v1/workers"),
    # a person's own saved searches (an agent has none)
    ("GET", "/v1/searches"): token(READERS, "/v1/searches"),
    ("GET", "/v1/searches/{name}"): token(READERS, "/v1/searches/mine"),
    ("PUT", "/v1/searches/{name}"): token(
        READERS, "/v1/searches/mine", {"query": "status=compensated&created_since=7d"}
    ),
    ("DELETE", "/v1/searches/{name}"): token(READERS, "/v1/searches/mine"),
    # -- the pages, by session ------------------------------------------------------------
    ("POST", "/ui/logout"): page(READERS, Call("/ui/logout", {}), signs_out=True),
    ("GET", "/ui/approvals"): page(READERS, Call("/ui/approvals")),
    ("GET", "/ui/approvals/{saga_id}"): page(READERS, Call("/ui/approvals/nope")),
    ("POST", "/ui/approvals/{saga_id}/approve"): page(
        {APPROVER}, Call("/ui/approvals/nope/approve", DECISION_FORM)
    ),
    ("POST", "/ui/approvals/{saga_id}/reject"): page(
        {APPROVER}, Call("/ui/approvals/nope/reject", DECISION_FORM)
    ),
    ("GET", "/ui/sagas"): page(READERS, Call("/ui/sagas")),
    ("GET", "/ui/sagas/{saga_id}"): page(READERS, Call("/ui/sagas/nope")),
    ("GET", "/ui/sagas/{saga_id}/events.json"): page(READERS, Call("/ui/sagas/nope/events.json")),
    ("GET", "/ui/sagas/{saga_id}/live"): page(READERS, Call("/ui/sagas/nope/live")),
    ("POST", "/ui/sagas/{saga_id}/abort"): page({OPERATOR}, Call("/ui/sagas/nope/abort", WHY)),
    ("POST", "/ui/sagas/{saga_id}/rerun"): page({OPERATOR}, Call("/ui/sagas/nope/rerun", {})),
    ("POST", "/ui/sagas/bulk"): page(
        {OPERATOR}, Call("/ui/sagas/bulk", {"act": "abort", "search": "status=running"} | WHY)
    ),
    ("POST", "/ui/sagas/{saga_id}/fork"): page(
        {OPERATOR}, Call("/ui/sagas/nope/fork", {"changes": "0.quantity=1", "reason": "fewer"})
    ),
    ("GET", "/ui/needs-human"): page(READERS, Call("/ui/needs-human")),
    ("POST", "/ui/searches"): page(
        READERS, Call("/ui/searches", {"name": "mine", "query": "status=compensated"})
    ),
    ("POST", "/ui/searches/{name}/delete"): page(
        READERS, Call("/ui/searches/mine/delete", {"back": "status=compensated"})
    ),
    ("POST", "/ui/sagas/{saga_id}/{action}"): page(
        {OPERATOR},
        Call("/ui/sagas/nope/resume", WHY),
        Call("/ui/sagas/nope/resolve", WHY),
        Call("/ui/sagas/nope/explode", WHY),  # no such action: still the operators' to ask
    ),
    ("GET", "/ui/dead-letters"): page(READERS, Call("/ui/dead-letters")),
    ("GET", "/ui/workers"): page(READERS, Call("/ui/workers")),
    ("POST", "/ui/dead-letters/{dead_letter_id}/{action}"): page(
        {OPERATOR},
        Call("/ui/dead-letters/7/retry", {}),
        Call("/ui/dead-letters/7/resolve", WHY),
        Call("/ui/dead-letters/7/explode", WHY),
    ),
    ("GET", "/ui/escalations"): page(READERS, Call("/ui/escalations")),
    ("POST", "/ui/escalations/{escalation_id}/resolve"): page(
        {OPERATOR}, Call("/ui/escalations/7/resolve", WHY)
    ),
}


# -- the route table -------------------------------------------------------------------------


def _walk(routes: list[BaseRoute], prefix: str = "") -> Iterator[tuple[str, str]]:
    for route in routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if callable(contexts):  # FastAPI's included routers (resolved lazily)
            for context in contexts():
                yield from _walk([context], prefix)
        elif isinstance(route, Mount):
            yield from _walk(list(route.routes), prefix + route.path)
        else:
            path = prefix + str(getattr(route, "path", "?"))
            methods = set(getattr(route, "methods", None) or {"WEBSOCKET"})
            if "GET" in methods:
                methods.discard("HEAD")  # answered by the GET route
            for method in methods:
                yield method, path


def routes_of(api: FastAPI) -> set[tuple[str, str]]:
    return set(_walk(list(api.routes)))


def test_every_route_has_a_row(api: FastAPI) -> None:
    found = routes_of(api)
    assert found, "no routes found: has the way FastAPI keeps them changed?"
    missing = sorted(found - TABLE.keys())
    stale = sorted(TABLE.keys() - found)
    assert not missing, f"routes without a row in TABLE (who may call them?): {missing}"
    assert not stale, f"rows in TABLE for routes that do not exist: {stale}"


# -- the callers ---------------------------------------------------------------------------


@dataclass
class Callers:
    api: FastAPI
    store: Store
    clock: FakeClock
    made: list[httpx.AsyncClient]
    count: int = 0

    def client(self, bearer: str | None = None, *, json: bool = True) -> httpx.AsyncClient:
        headers = {"Content-Type": "application/json"} if json else {}
        if bearer is not None:
            headers["Authorization"] = bearer
        c = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.api), base_url="http://pivotal", headers=headers
        )
        self.made.append(c)
        return c

    async def token(self, role: Role, *, revoked: bool = False) -> str:
        self.count += 1
        name = f"{role.value}-{self.count}"
        secret = await add_token(self.store, name, role, self.clock)
        if revoked:
            await self.revoke(secret)
        return secret

    async def revoke(self, secret: str) -> None:
        found = await self.store.token_by_hash(hash_token(secret))
        assert found is not None
        assert await self.store.revoke_token(found.id, self.clock.now()) is not None

    async def login(self, secret: str) -> tuple[httpx.AsyncClient, httpx.Response]:
        """A browser that posted ``secret`` to the login form; the login's answer."""
        c = self.client(json=False)
        form = await c.get(LOGIN)
        assert form.status_code == 200, form.text
        reply = await c.post(LOGIN, data={"token": secret, "csrf": csrf_of(form.text)})
        return c, reply


@pytest.fixture
async def callers(api: FastAPI, store: Store, clock: FakeClock) -> AsyncIterator[Callers]:
    made: list[httpx.AsyncClient] = []
    yield Callers(api, store, clock, made)
    for c in made:
        await c.aclose()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def _request(c: httpx.AsyncClient, method: str, call: Call, role: Role | None) -> Any:
    path = call.path.format(role=role.value if role else "anonymous")
    if call.body is None:
        return c.request(method, path)
    return c.request(method, path, json=call.body)


def _to_login(reply: httpx.Response) -> bool:
    return reply.status_code == 303 and reply.headers.get("location") == LOGIN


def _shown(role: object, credential: str, call: Call, reply: httpx.Response) -> str:
    return f"{credential} {role} -> {call.path}: {reply.status_code} {reply.text[:300]}"


# -- the checks, by kind -------------------------------------------------------------------


async def check_public(callers: Callers, method: str, row: Row) -> None:
    clients = {
        "no credential": callers.client(json=False),
        "a bad token": callers.client("Bearer pvt_forged"),
        **{
            f"a token of {role.value}": callers.client(f"Bearer {await callers.token(role)}")
            for role in Role
        },
    }
    for credential, c in clients.items():
        for call in row.calls:
            reply = await _request(c, method, call, None)
            shown = _shown("", credential, call, reply)
            assert reply.status_code not in (401, 403), shown
            assert reply.status_code < 500, shown


async def check_token(callers: Callers, method: str, row: Row) -> None:
    (call,) = row.calls
    for role in Role:
        c = callers.client(f"Bearer {await callers.token(role)}")
        reply = await _request(c, method, call, role)
        shown = _shown(role.value, "token", call, reply)
        assert reply.status_code < 500, shown
        if role in row.allowed:
            assert reply.status_code not in (401, 403), shown
        else:
            assert reply.status_code == 403, shown
            assert reply.json()["error"]["code"] == "forbidden", shown
    refused = {
        "no token": None,
        "a bad token": "Bearer pvt_forged",
        "another scheme": "Basic YWRtaW46YWRtaW4=",
        **{
            f"a revoked token of {role.value}": f"Bearer {await callers.token(role, revoked=True)}"
            for role in Role
        },
    }
    for credential, bearer in refused.items():
        reply = await _request(callers.client(bearer), method, call, ADMIN)
        shown = _shown("", credential, call, reply)
        assert reply.status_code == 401, shown
        assert reply.json()["error"]["code"] == "unauthorized", shown


async def _page(
    c: httpx.AsyncClient, method: str, call: Call, role: Role | None, csrf: str
) -> httpx.Response:
    path = call.path.format(role=role.value if role else "anonymous")
    if method == "GET":
        return await c.get(path)
    return await c.request(method, path, data={**(call.body or {}), "csrf": csrf})


async def check_session(callers: Callers, method: str, row: Row) -> None:
    for role in Role:
        c, signed_in = await callers.login(await callers.token(role))
        if role is AGENT:  # agents use the API: no session, so every page is the login's
            assert signed_in.status_code == 403, signed_in.text
            for call in row.calls:
                reply = await _page(c, method, call, role, "no-session")
                assert _to_login(reply), _shown(role.value, "refused login", call, reply)
            continue
        assert signed_in.status_code == 303, signed_in.text
        csrf = csrf_of((await c.get("/ui/approvals")).text)
        for call in row.calls:
            reply = await _page(c, method, call, role, csrf)
            shown = _shown(role.value, "session", call, reply)
            assert reply.status_code < 500, shown
            if role in row.allowed:
                assert reply.status_code not in (401, 403), shown
                if _to_login(reply):
                    assert row.signs_out, shown
                    assert "pivotal_session" in reply.headers.get("set-cookie", ""), shown
            else:
                assert reply.status_code == 403, shown
                assert "may not do this" in reply.text, shown
    forged = callers.client(json=False)
    forged.cookies.set("pivotal_session", "forged-session-id")
    without: dict[str, Callable[[], Any]] = {
        "no session": lambda: callers.client(json=False),
        "a forged session": lambda: forged,
    }
    for credential, make in without.items():
        for call in row.calls:
            reply = await _page(make(), method, call, None, "forged")
            assert _to_login(reply), _shown("", credential, call, reply)
    for role in sorted(EVERYONE - {AGENT}):
        secret = await callers.token(role)
        c, signed_in = await callers.login(secret)
        assert signed_in.status_code == 303, signed_in.text
        csrf = csrf_of((await c.get("/ui/approvals")).text)
        await callers.revoke(secret)
        for call in row.calls:
            reply = await _page(c, method, call, role, csrf)
            assert _to_login(reply), _shown(role.value, "revoked token's session", call, reply)


async def check_login(callers: Callers, method: str, row: Row) -> None:
    assert method == "POST"
    for role in Role:
        _, reply = await callers.login(await callers.token(role))
        if role in row.allowed:
            assert reply.status_code == 303, (role, reply.text)
            assert reply.headers["location"].startswith("/ui/"), (role, reply.headers)
            assert not _to_login(reply), (role, reply.headers)
        else:
            assert reply.status_code == 403, (role, reply.text)
    for credential, secret in {
        "no token": "",
        "a bad token": "pvt_forged",
        "a revoked token": await callers.token(ADMIN, revoked=True),
    }.items():
        _, reply = await callers.login(secret)
        assert reply.status_code == 401, (credential, reply.text)


CHECKS = {
    "public": check_public,
    "token": check_token,
    "session": check_session,
    "login": check_login,
}


@pytest.mark.parametrize(
    ("method", "path"), sorted(TABLE), ids=[f"{m} {p}" for m, p in sorted(TABLE)]
)
async def test_each_route_answers_as_its_row_says(callers: Callers, method: str, path: str) -> None:
    row = TABLE[(method, path)]
    await CHECKS[row.kind](callers, method, row)


# -- the forms the pages post: one rule ------------------------------------------------------

POSTED = sorted(k for k, row in TABLE.items() if row.kind == "session" and k[0] == "POST")


def _page_modules() -> list[ModuleType]:
    """The modules of the pages' routes (each binds the rule's helper by name)."""
    found = []
    for info in pkgutil.iter_modules(pivotal.server.pages.__path__):
        found.append(importlib.import_module(f"pivotal.server.pages.{info.name}"))
    return found


@pytest.mark.parametrize(("method", "path"), POSTED, ids=[f"{m} {p}" for m, p in POSTED])
async def test_each_form_a_page_posts_passes_through_the_one_rule(
    callers: Callers, monkeypatch: pytest.MonkeyPatch, method: str, path: str
) -> None:
    """Every form a page posts (but the login's) is let in by one helper (``_posted``: a
    session, one of its row's roles, the form's CSRF token): asked with the row's roles,
    and a person of such a role whose form lacks the CSRF token, or forges it, is refused."""
    row = TABLE[(method, path)]
    asked: list[frozenset[Role]] = []
    real = pivotal.server.pages.routes._posted

    async def spy(request: Any, roles: tuple[Role, ...]) -> Any:
        asked.append(frozenset({*roles, ADMIN}))
        return await real(request, roles)

    patched = [m for m in _page_modules() if hasattr(m, "_posted")]
    for module in patched:
        monkeypatch.setattr(module, "_posted", spy)
    role = sorted(row.allowed - {ADMIN})[0]
    c, signed_in = await callers.login(await callers.token(role))
    assert signed_in.status_code == 303, signed_in.text
    csrf = csrf_of((await c.get("/ui/approvals")).text)
    for call in row.calls:
        for forged in ("", "forged"):
            reply = await _page(c, method, call, role, forged)
            shown = _shown(role.value, f"csrf {forged!r}", call, reply)
            assert reply.status_code == 403, shown
            assert "CSRF token is missing or wrong" in reply.text, shown
        asked.clear()
        reply = await _page(c, method, call, role, csrf)
        assert asked == [row.allowed], _shown(role.value, "session", call, reply)
