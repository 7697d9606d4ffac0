"""``/docs``: Swagger UI over ``/openapi.json``, from the ``swagger-ui-bundle-v2`` package's
files and Pivotal's own (nothing from another host), under the document's one rule of who
may read it (``gate.SPEC_PATHS``): refused as the document is, for every credential."""

from __future__ import annotations

import re
from importlib import resources

import httpx
import pytest
import swagger_ui_bundle  # type: ignore[import-untyped]
from fastapi import FastAPI
from server_api import ROLES, MakeClient, add_token

from asgi_call import call
from pivotal import FakeClock
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role, hash_token
from pivotal.server import create_app
from pivotal.server.auth import trust_proxy_header
from pivotal.server.limits import Lockout
from pivotal.store import Store

# the rule does not depend on the ledger: one backend is enough
pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

PAGE = "/docs"
BUNDLE = swagger_ui_bundle.swagger_ui_path
OURS = resources.files("pivotal.server") / "static"
FROM_THE_BUNDLE = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")
LINKED = re.compile(r'\b(?:src|href)="([^"]*)"')


async def test_the_page_loads_its_assets_from_here_and_they_are_the_package_s_bytes(
    client: MakeClient, store: Store, clock: FakeClock
) -> None:
    viewer = client(await add_token(store, "vera", Role.VIEWER, clock))
    page = await viewer.get(PAGE)
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    linked = LINKED.findall(page.text)
    assert sorted(linked) == sorted(
        f"/docs/assets/{name}" for name in (*FROM_THE_BUNDLE, "api-reference.js")
    )
    for name in FROM_THE_BUNDLE:
        served = await viewer.get(f"/docs/assets/{name}")
        assert served.status_code == 200, name
        assert served.content == (BUNDLE / name).read_bytes(), name
        assert "private" in served.headers["cache-control"], name
    kinds = {
        name: (await viewer.get(f"/docs/assets/{name}")).headers["content-type"]
        for name in (*FROM_THE_BUNDLE, "api-reference.js")
    }
    assert kinds["swagger-ui-bundle.js"].startswith("text/javascript")
    assert kinds["api-reference.js"].startswith("text/javascript")
    assert kinds["swagger-ui.css"].startswith("text/css")
    assert kinds["favicon-32x32.png"] == "image/png"
    start = await viewer.get("/docs/assets/api-reference.js")
    assert start.content == (OURS / "api-reference.js").read_bytes()
    assert 'url: "/openapi.json"' in start.text  # the document of this server


def test_the_packaged_swagger_ui_reads_the_document_s_openapi_version(api: FastAPI) -> None:
    """Swagger UI 4 (swagger-ui-bundle 1.x) shows "Unable to render this definition" for
    OpenAPI 3.1, the version FastAPI writes: the package must bundle Swagger UI 5 or later."""
    assert api.openapi()["openapi"].startswith("3.1")
    found = re.fullmatch(r"swagger-ui-(\d+)\.\d+\.\d+", BUNDLE.name)
    assert found, BUNDLE
    assert int(found.group(1)) >= 5, (
        f"{BUNDLE}: install swagger-ui-bundle-v2, not swagger-ui-bundle"
    )


async def test_the_page_names_no_other_host_and_runs_no_inline_script(
    client: MakeClient, store: Store, clock: FakeClock
) -> None:
    viewer = client(await add_token(store, "vera", Role.VIEWER, clock))
    page = await viewer.get(PAGE)
    start = await viewer.get("/docs/assets/api-reference.js")
    for text in (page.text, start.text):
        assert "//" not in re.sub(r"^\s*//.*$", "", text, flags=re.M)  # comments aside
        assert "http:" not in text
        assert "https:" not in text
    for link in LINKED.findall(page.text):
        assert link.startswith("/docs/assets/"), link
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page.text, re.S)
    assert len(scripts) == 2
    assert all('src="' in attributes and not body.strip() for attributes, body in scripts)
    assert "style=" not in page.text
    policy = dict(
        part.strip().split(" ", 1) for part in page.headers["content-security-policy"].split(";")
    )
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["connect-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"


async def answers(c: httpx.AsyncClient) -> list[tuple[int, str | None]]:
    """What ``c`` is answered for the document, the page and an asset: status and code."""
    found = []
    for path in ("/openapi.json", PAGE, "/docs/assets/swagger-ui-bundle.js"):
        reply = await c.get(path)
        code = reply.json()["error"]["code"] if reply.status_code >= 400 else None
        found.append((reply.status_code, code))
    return found


async def test_the_page_and_its_assets_are_refused_as_the_document_is(
    client: MakeClient, store: Store, clock: FakeClock
) -> None:
    revoked = await add_token(store, "gone", Role.ADMIN, clock)
    token = await store.token_by_hash(hash_token(revoked))
    assert token is not None
    assert await store.revoke_token(token.id, clock.now()) is not None
    for bearer in (None, "pvt_forged", revoked, "x" * 10_000):
        seen = await answers(client(bearer))
        assert seen == [(401, "unauthorized")] * 3, (bearer and bearer[:20], seen)
    basic = client(None)
    basic.headers["Authorization"] = "Basic YWRtaW46YWRtaW4="
    assert await answers(basic) == [(401, "unauthorized")] * 3
    for role in ROLES:  # any principal reads the document, so the page
        seen = await answers(client(await add_token(store, f"r-{role.value}", role, clock)))
        assert seen == [(200, None)] * 3, (role, seen)


class Ticks:
    def __call__(self) -> float:
        return 0.0


async def test_a_client_locked_out_on_the_document_is_locked_out_of_the_page(
    store: Store, app: CommerceApp, clock: FakeClock
) -> None:
    """One count of failed credentials: bad tokens on the document lock the page too."""
    api = create_app(store, app, clock=clock, lockout=Lockout(limit=3, clock=Ticks()))
    wrong = {"host": "pivotal", "authorization": "Bearer pvt_wrong"}
    statuses = [(await call(api, "GET", "/openapi.json", wrong)).status for _ in range(3)]
    assert statuses == [401] * 3
    for path in ("/openapi.json", PAGE, "/docs/assets/swagger-ui.css"):
        locked = await call(api, "GET", path, wrong)
        assert locked.status == 429, path
        assert locked.headers["retry-after"] == "60"
    good = {
        "host": "pivotal",
        "authorization": f"Bearer {await add_token(store, 'v', Role.VIEWER, clock)}",
    }
    assert (await call(api, "GET", PAGE, good)).status == 200  # a valid token is never locked


async def test_behind_an_authenticating_proxy_a_browser_reads_the_page(
    store: Store, app: CommerceApp, clock: FakeClock
) -> None:
    """A browser sends no bearer token: behind a proxy that names the user (the trusted
    proxy header) it reads the page and the document, as any principal may."""
    api = create_app(store, app, clock=clock)
    trust_proxy_header(api, "X-Forwarded-User", Role.VIEWER, proxies=["10.0.0.1"])
    named = {"host": "pivotal", "x-forwarded-user": "vera"}
    for path in ("/openapi.json", PAGE, "/docs/assets/api-reference.js"):
        assert (await call(api, "GET", path, named, client="10.0.0.1")).status == 200, path
        spoofed = await call(api, "GET", path, named, client="192.0.2.9")  # not the proxy
        assert spoofed.status == 401, path


UNKNOWN = (
    "/docs/assets/nope.js",
    "/docs/assets/index.html",  # in the package, but not one the page loads
    "/docs/assets/swagger-ui-bundle.js.map",
    "/docs/assets/api-reference.html",
    "/docs/assets/",
    "/docs/assets",
    "/docs/assets/../../etc/passwd",
    "/docs/assets/..%2F..%2Fetc%2Fpasswd",
    "/docs/assets/%2e%2e/%2e%2e/etc/passwd",
    "/docs/assets/....//....//etc/passwd",
    "/docs/../../../etc/passwd",
    "/docs/assets/\\..\\..\\etc\\passwd",
    "/docs/assets/swagger-ui.css/../../../../../etc/passwd",
    "/docs/redoc",
    "/docs/oauth2-redirect",
)


@pytest.mark.parametrize("path", UNKNOWN)
async def test_an_unknown_asset_is_404_and_names_no_file(
    api: FastAPI, store: Store, clock: FakeClock, path: str
) -> None:
    """Sent as written (no client tidies the path), with a valid token: 404 as JSON, with
    nothing of the filesystem in it; without one, 401 as for the document."""
    token = await add_token(store, "vera", Role.VIEWER, clock)
    reply = await call(api, "GET", path, {"host": "pivotal", "authorization": f"Bearer {token}"})
    assert reply.status == 404, (path, reply.body[:200])
    assert reply.headers["content-type"] == "application/json"
    assert b"root:" not in reply.body
    assert b"site-packages" not in reply.body
    assert str(BUNDLE).encode() not in reply.body
    anonymous = await call(api, "GET", path, {"host": "pivotal"})
    assert anonymous.status == 401, path
