"""The server's edges through the ASGI app: which peers a proxy header is believed from, the
Host allow-list, cross-site requests, the caller settled before the body is read, headers on
every answer, the session cookie's Secure, sessions per token, and the lockout on failed
credentials (with a clock of the test's own: no sleeping)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from server_api import add_token, as_json, open_plan_orders, plan_body

from pivotal import FakeClock
from pivotal.cli.serve import _checked
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role
from pivotal.server import create_app
from pivotal.server.auth import trust_proxy_header
from pivotal.server.limits import Lockout
from pivotal.server.pages import session
from pivotal.store import Store

USER = "X-Forwarded-User"
SECRET_HEADER = "X-Proxy-Secret"
SECRET = "a-shared-secret-of-the-proxy-0123"
JSON = {"Content-Type": "application/json"}


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
def build(store: Store, app: CommerceApp, clock: FakeClock, ticks: Ticks) -> Callable[..., FastAPI]:
    open_plan_orders(app.services)

    def make(**options: Any) -> FastAPI:
        options.setdefault("lockout", Lockout(limit=3, window=60, lock=30, clock=ticks))
        return create_app(store, app, clock=clock, **options)

    return make


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., httpx.AsyncClient]]:
    made: list[httpx.AsyncClient] = []

    def make(
        api: FastAPI,
        peer: str = "127.0.0.1",
        base: str = "http://pivotal",
        headers: dict[str, str] | None = None,
    ) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=api, client=(peer, 4321))
        c = httpx.AsyncClient(transport=transport, base_url=base, headers=headers)
        made.append(c)
        return c

    yield make
    for c in made:
        await c.aclose()


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


async def log_in(c: httpx.AsyncClient, token: str) -> httpx.Response:
    form = await c.get("/ui/login")
    return await c.post("/ui/login", data={"token": token, "csrf": csrf_of(form.text)})


# -- 1. the proxy header, the Host, cross-site requests --------------------------------------


def test_a_proxy_header_needs_the_proxies_it_is_trusted_from(
    build: Callable[..., FastAPI],
) -> None:
    with pytest.raises(ValueError, match="trusted from"):
        trust_proxy_header(build(), USER)
    with pytest.raises(ValueError, match="not an IP address or network"):
        trust_proxy_header(build(), USER, proxies=["10.0.0.300"])


async def test_the_proxy_header_is_believed_only_from_a_trusted_proxy(
    build: Callable[..., FastAPI], connect: Callable[..., httpx.AsyncClient]
) -> None:
    api = build()
    trust_proxy_header(api, USER, Role.VIEWER, proxies=["127.0.0.1", "10.0.0.0/8"])
    for peer, status in (
        ("127.0.0.1", 200),
        ("10.20.30.40", 200),
        ("203.0.113.9", 401),  # anyone else: the header means nothing, a token is needed
        ("11.0.0.1", 401),
        ("::1", 401),
    ):
        c = connect(api, peer, headers={USER: "alice"})
        assert (await c.get("/v1/sagas")).status_code == status, peer


async def test_the_proxy_secret_must_match(
    build: Callable[..., FastAPI], connect: Callable[..., httpx.AsyncClient]
) -> None:
    api = build()
    trust_proxy_header(api, USER, proxies=["127.0.0.1"], secret_header=SECRET_HEADER, secret=SECRET)
    for headers, status in (
        ({USER: "alice"}, 401),
        ({USER: "alice", SECRET_HEADER: "wrong"}, 401),
        ({USER: "alice", SECRET_HEADER: SECRET[:-1]}, 401),
        ({USER: "alice", SECRET_HEADER: SECRET}, 200),
    ):
        assert (await connect(api, headers=headers).get("/v1/sagas")).status_code == status
    with pytest.raises(ValueError, match="16 characters"):
        trust_proxy_header(api, USER, proxies=["127.0.0.1"], secret_header="X-S", secret="s")


async def test_another_host_is_refused_with_421(
    build: Callable[..., FastAPI], connect: Callable[..., httpx.AsyncClient]
) -> None:
    api = build(allowed_hosts=["pivotal.example.com", ".internal.example"])
    for base, status in (
        ("http://pivotal.example.com", 200),
        ("http://pivotal.example.com:8443", 200),
        ("http://a.internal.example", 200),
        ("http://internal.example", 200),
        ("http://evil.example", 421),
        ("http://pivotal.example.com.evil.example", 421),
        ("http://127.0.0.1:8000", 421),
    ):
        reply = await connect(api, base=base).get("/healthz")
        assert reply.status_code == status, base
        if status == 421:
            assert reply.json()["error"]["code"] == "host_not_allowed"


def test_serve_allows_the_loopback_hosts_unless_told_otherwise() -> None:
    hosts, proxies, secret = _checked("127.0.0.1", None, None, None, None)
    assert set(hosts) == {"localhost", "127.0.0.1", "::1"}
    assert (proxies, secret) == ([], None)
    assert "10.1.2.3" in _checked("10.1.2.3", None, None, None, None)[0]
    assert "0.0.0.0" not in _checked("0.0.0.0", None, None, None, None)[0]
    assert _checked("0.0.0.0", ["pivotal.example.com"], None, None, None)[0] == [
        "pivotal.example.com"
    ]


async def test_a_cross_site_simple_request_cannot_drive_a_cookie_proxy(
    build: Callable[..., FastAPI], connect: Callable[..., httpx.AsyncClient]
) -> None:
    """The proxy names the approver (as it would from its own cookie); a page on another
    site posts a form or a text/plain fetch: refused."""
    api = build()
    trust_proxy_header(api, USER, Role.APPROVER, proxies=["127.0.0.1"])
    c = connect(api, headers={USER: "alice"})
    body = as_json({"version": 1, "reason": "ok"})
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        reply = await c.post(
            "/v1/approvals/x/approve", content=body, headers={"Content-Type": kind}
        )
        assert reply.status_code == 415, kind
        assert reply.json()["error"]["code"] == "unsupported_media_type"
    evil = {"Content-Type": "application/json", "Origin": "https://evil.example"}
    reply = await c.post("/v1/approvals/x/approve", content=body, headers=evil)
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "origin_refused"
    for cross in (
        {"Origin": "http://pivotal.evil.example"},
        {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "http://pivotal", "Sec-Fetch-Site": "cross-site"},
    ):
        headers = {**JSON, **cross}
        reply = await c.post("/v1/approvals/x/approve", content=body, headers=headers)
        assert reply.status_code == 403, cross
    for same in ({"Origin": "null", "Sec-Fetch-Site": "same-origin"}, {"Origin": "null"}):
        headers = {**JSON, **same}  # a page of this server under Referrer-Policy: no-referrer
        reply = await c.post("/v1/approvals/x/approve", content=body, headers=headers)
        assert reply.status_code == 404, same
    blob = {"Origin": "https://evil.example"}  # a script's fetch of a bare Blob: no type
    reply = await c.post("/v1/approvals/x/approve", content=body, headers=blob)
    assert reply.status_code == 403
    reply = await c.post("/v1/approvals/x/approve", content=body)  # not a browser
    assert reply.status_code not in (403, 415)  # past the guard (FastAPI wants the type)
    own = {**JSON, "Origin": "http://pivotal"}
    reply = await c.post("/v1/approvals/x/approve", content=body, headers=own)
    assert reply.status_code == 404  # past the guard: there is no saga x
    reply = await c.post("/v1/approvals/x/approve", content=body, headers=JSON)
    assert reply.status_code == 404  # no Origin: not from a browser


async def test_the_pages_refuse_another_origin_too(
    build: Callable[..., FastAPI],
    connect: Callable[..., httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
) -> None:
    api = build(allowed_hosts=["pivotal", "approvals.example.com"])
    c = connect(api)
    token = await add_token(store, "ann", Role.APPROVER, clock)
    form = await c.get("/ui/login")
    data = {"token": token, "csrf": csrf_of(form.text)}
    refused = await c.post("/ui/login", data=data, headers={"Origin": "https://evil.example"})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "origin_refused"
    proxied = await c.post(
        "/ui/login", data=data, headers={"Origin": "https://approvals.example.com"}
    )
    assert proxied.status_code == 303  # an allowed host's page
    page = await c.get("/ui/sagas/nothing")
    csrf = csrf_of(page.text)
    decided = await c.post(
        "/ui/approvals/nothing/approve",
        data={"csrf": csrf, "reason": "r", "version": "1"},
        headers={"Origin": "https://evil.example"},
    )
    assert decided.status_code == 403
    assert decided.json()["error"]["code"] == "origin_refused"
    same = await c.post(
        "/ui/approvals/nothing/approve",
        data={"csrf": csrf, "reason": "r", "version": "1"},
        headers={"Origin": "http://pivotal"},
    )
    assert same.status_code == 404  # past the guard: there is no such saga


# -- 2. the caller before the body --------------------------------------------------------


async def test_the_caller_is_settled_before_the_body_is_read(
    build: Callable[..., FastAPI],
) -> None:
    api = build()
    read: list[Any] = []
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        read.append("body")
        return {"type": "http.request", "body": b"{}" * 1000, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    for path in ("/v1/sagas", "/ui/approvals/x/approve"):
        sent.clear()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"pivotal"),
                (b"content-type", b"application/json"),
                (b"content-length", b"500000"),
                (b"authorization", b"Bearer pvt_not_a_token"),
            ],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        await api(scope, receive, send)
        assert sent[0]["status"] in (401, 303), path
        assert (b"connection", b"close") in sent[0]["headers"]
    assert read == []


# -- 3c. headers on every answer ----------------------------------------------------------


async def test_every_answer_says_nosniff_and_no_store(
    build: Callable[..., FastAPI],
    connect: Callable[..., httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
) -> None:
    api = build()
    token = await add_token(store, "ann", Role.APPROVER, clock)
    c = connect(api, headers={"Authorization": f"Bearer {token}"})
    for path in ("/v1/sagas", "/v1/approvals", "/healthz", "/nowhere", "/ui/login"):
        reply = await c.get(path)
        assert reply.headers["x-content-type-options"] == "nosniff", path
        assert reply.headers["cache-control"] == "no-store", path
    refused = await connect(api).get("/v1/sagas")
    assert refused.status_code == 401
    assert refused.headers["cache-control"] == "no-store"
    assert refused.headers["x-content-type-options"] == "nosniff"
    static = await c.get("/ui/static/style.css")
    assert static.headers["cache-control"] == "max-age=300"  # may be cached
    assert static.headers["x-content-type-options"] == "nosniff"


# -- 3d. the session cookie's Secure ------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "peer", "base", "proto", "secure"),
    [
        ({}, "127.0.0.1", "http://pivotal", None, False),
        ({}, "127.0.0.1", "https://pivotal", None, True),
        ({"trusted_proxies": ["10.0.0.0/8"]}, "10.0.0.5", "http://pivotal", "https", True),
        ({"trusted_proxies": ["10.0.0.0/8"]}, "10.0.0.5", "http://pivotal", "http", False),
        ({"trusted_proxies": ["10.0.0.0/8"]}, "203.0.113.9", "http://pivotal", "https", False),
        ({}, "127.0.0.1", "http://pivotal", "https", False),  # no proxy is trusted
        ({"secure_cookies": True}, "203.0.113.9", "http://pivotal", None, True),
    ],
)
async def test_the_session_cookie_is_secure_when_the_request_came_over_https(
    build: Callable[..., FastAPI],
    connect: Callable[..., httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
    options: dict[str, Any],
    peer: str,
    base: str,
    proto: str | None,
    secure: bool,
) -> None:
    api = build(**options)
    headers = {"X-Forwarded-Proto": proto} if proto else {}
    form = await connect(api, peer, base, headers).get("/ui/login")
    cookie = form.headers["set-cookie"]
    assert ("; secure" in cookie.lower()) is secure, cookie
    token = await add_token(store, "ann", Role.APPROVER, clock)
    login = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api, client=(peer, 1)), base_url=base, headers=headers
    )
    async with login:
        reply = await login.post(
            "/ui/login",
            data={"token": token, "csrf": csrf_of(form.text)},
            headers={"Cookie": f"{session.LOGIN_COOKIE}={form.cookies[session.LOGIN_COOKIE]}"},
        )
    assert reply.status_code == 303, reply.text
    cookies = reply.headers.get_list("set-cookie")
    [opened] = [c for c in cookies if c.startswith(session.COOKIE + "=")]
    assert ("; secure" in opened.lower()) is secure, opened


# -- 3a. sessions per person --------------------------------------------------------------


async def test_logging_in_again_closes_only_ones_own_oldest_session(
    build: Callable[..., FastAPI],
    connect: Callable[..., httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session, "MAX_SESSIONS", 3)
    monkeypatch.setattr(session, "PER_PERSON", 2)
    api = build(lockout=Lockout(limit=1000))
    ann = connect(api)
    assert (
        await log_in(ann, await add_token(store, "ann", Role.APPROVER, clock))
    ).status_code == 303
    eve_token = await add_token(store, "eve", Role.VIEWER, clock)
    for _ in range(10):  # bad tokens open no session and close none
        assert (await log_in(connect(api), "pvt_guess")).status_code == 401
    eves = [connect(api) for _ in range(5)]
    for eve in eves:  # eve, past the caps
        assert (await log_in(eve, eve_token)).status_code == 303
    assert (await ann.get("/ui/approvals")).status_code == 200  # ann is still logged in
    assert (await eves[-1].get("/ui/approvals")).status_code == 200
    assert (await eves[-2].get("/ui/approvals")).status_code == 200
    first = await eves[0].get("/ui/approvals")
    assert (first.status_code, first.headers["location"]) == (303, "/ui/login")


async def test_the_session_cap_is_per_person_across_their_tokens(
    build: Callable[..., FastAPI],
    connect: Callable[..., httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session, "PER_PERSON", 2)
    api = build(lockout=Lockout(limit=1000))
    ann = connect(api)
    assert (
        await log_in(ann, await add_token(store, "ann", Role.APPROVER, clock))
    ).status_code == 303
    # eve's three tokens (--same-person: one person however spelt) share one cap of two
    tokens = [await add_token(store, name, Role.VIEWER, clock) for name in ("eve", "Eve", "EVE​ ")]
    eves = [connect(api) for _ in tokens]
    for eve, token in zip(eves, tokens, strict=True):
        assert (await log_in(eve, token)).status_code == 303
    oldest = await eves[0].get("/ui/approvals")
    assert (oldest.status_code, oldest.headers["location"]) == (303, "/ui/login")
    assert (await eves[1].get("/ui/approvals")).status_code == 200
    assert (await eves[2].get("/ui/approvals")).status_code == 200
    assert (await ann.get("/ui/approvals")).status_code == 200  # another person: untouched
    found = api.state.pivotal_sessions.found.values()
    assert sorted(s.person for s in found) == ["ann", "eve", "eve"]


# -- 3e. the lockout ----------------------------------------------------------------------


async def test_bad_tokens_and_failed_logins_lock_the_address_out_for_a_while(
    build: Callable[..., FastAPI],
    connect: Callable[..., httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
    ticks: Ticks,
) -> None:
    api = build()  # 3 failures in 60 s lock the address for 30 s
    good = await add_token(store, "ann", Role.APPROVER, clock)
    mallory = "203.0.113.9"
    guess = connect(api, mallory, headers={"Authorization": "Bearer pvt_guess"})
    page = connect(api, mallory)
    assert (await guess.get("/v1/sagas")).status_code == 401
    assert (await log_in(page, "pvt_guess")).status_code == 401  # the same count
    assert (
        await guess.post("/v1/sagas", content=as_json(plan_body()), headers=JSON)
    ).status_code == 401
    for attempt in (guess.get("/v1/approvals"), guess.post("/v1/sagas", content=b"{}")):
        locked = await attempt
        assert locked.status_code == 429
        assert locked.headers["retry-after"] == "30"
        assert locked.json()["error"]["code"] == "too_many_failures"
    refused = await log_in(page, "pvt_another_guess")  # a page login: the login page, 429
    assert (refused.status_code, refused.headers["retry-after"]) == (429, "30")
    assert "Too many failed logins" in refused.text
    # a valid token from the locked address is not refused: whoever shares it goes on
    shared = connect(api, mallory, headers={"Authorization": f"Bearer {good}"})
    assert (await shared.get("/v1/sagas")).status_code == 200
    assert (await log_in(connect(api, mallory), good)).status_code == 303
    other = connect(api, "198.51.100.7", headers={"Authorization": "Bearer pvt_x"})
    assert (await other.get("/v1/sagas")).status_code == 401  # another address is not locked
    ticks.now += 20
    assert (await guess.get("/v1/sagas")).headers["retry-after"] == "10"
    ticks.now += 10
    assert (await guess.get("/v1/sagas")).status_code == 401  # free again: counted anew


async def test_a_failed_login_counts_per_token_too(
    build: Callable[..., FastAPI],
    connect: Callable[..., httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
    ticks: Ticks,
) -> None:
    api = build()  # 3 failures in 60 s lock the key for 30 s
    revoked = await add_token(store, "rex", Role.APPROVER, clock)
    [made] = [t for t in await store.list_tokens() if t.name == "rex"]
    await store.revoke_token(made.id, clock.now())
    # one revoked token tried from three addresses: its own count locks it everywhere
    for n in range(3):
        assert (await log_in(connect(api, f"203.0.113.{n}"), revoked)).status_code == 401
    elsewhere = await log_in(connect(api, "198.51.100.50"), revoked)
    assert (elsewhere.status_code, elsewhere.headers["retry-after"]) == (429, "30")
    # the addresses were each counted once: a good login from any of them goes on, and so
    # does another bad token from them (not yet locked)
    good = await add_token(store, "ann", Role.APPROVER, clock)
    assert (await log_in(connect(api, "203.0.113.0"), good)).status_code == 303
    assert (await log_in(connect(api, "203.0.113.1"), "pvt_other")).status_code == 401
    ticks.now += 30
    assert (await log_in(connect(api, "198.51.100.51"), revoked)).status_code == 401


async def test_one_client_behind_a_shared_proxy_locks_out_no_one_else(
    build: Callable[..., FastAPI],
    connect: Callable[..., httpx.AsyncClient],
    store: Store,
    clock: FakeClock,
) -> None:
    api = build(trusted_proxies=["10.0.0.0/8"])
    good = await add_token(store, "ann", Role.APPROVER, clock)
    agent = await add_token(store, "bot", Role.AGENT, clock)
    nat = {"X-Forwarded-For": "192.0.2.80"}  # many people, one address seen
    for n in range(5):
        bad = connect(api, "10.0.0.5", headers=nat | {"Authorization": f"Bearer pvt_{n}"})
        assert (await bad.get("/v1/sagas")).status_code in (401, 429)
    assert (await connect(api, "10.0.0.5", headers=nat).get("/v1/sagas")).status_code == 401
    for token in (good, agent):
        mine = connect(api, "10.0.0.5", headers=nat | {"Authorization": f"Bearer {token}"})
        assert (await mine.get("/v1/catalogues/checkout")).status_code == 200
    assert (await log_in(connect(api, "10.0.0.5", headers=nat), good)).status_code == 303
    late = connect(api, "10.0.0.5", headers=nat | {"Authorization": "Bearer pvt_late"})
    assert (await late.get("/v1/sagas")).status_code == 429


async def test_a_missing_token_is_no_failed_guess(
    build: Callable[..., FastAPI], connect: Callable[..., httpx.AsyncClient]
) -> None:
    c = connect(build())
    for _ in range(10):
        assert (await c.get("/v1/sagas")).status_code == 401


def test_failures_behind_a_trusted_proxy_count_per_client(
    build: Callable[..., FastAPI],
) -> None:
    from pivotal.server.peers import client_address

    api = build(trusted_proxies=["10.0.0.0/8"])

    def scope(peer: str, forwarded: str | None) -> dict[str, Any]:
        headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
        return {"type": "http", "app": api, "client": (peer, 1), "headers": headers}

    assert client_address(scope("10.0.0.5", "203.0.113.9, 10.0.0.7")) == "203.0.113.9"
    assert client_address(scope("10.0.0.5", None)) == "10.0.0.5"
    assert client_address(scope("198.51.100.7", "203.0.113.9")) == "198.51.100.7"
