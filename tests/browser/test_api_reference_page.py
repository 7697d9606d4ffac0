"""The HTTP API's reference page (``/docs``: Swagger UI from packaged files) in a real
browser (Chromium through Playwright) against ``pivotal serve``'s app under uvicorn: it
renders every operation of the OpenAPI document under the page's Content-Security-Policy,
asking no other host for anything."""

from __future__ import annotations

from pathlib import Path

import httpx
from browser_kit import NOW, in_thread, serving, sync_api

from pivotal import SQLiteStore
from pivotal.clock import FakeClock
from pivotal.examples.commerce import create_app
from pivotal.people.principals import Role, hash_token

TOKEN = "pvt_browser_reader"
BOUND = 30_000  # ms: a safety net against a hang while the bundle loads, never measured


async def _reader(ledger: Path) -> None:
    async with SQLiteStore(ledger) as store:
        await store.create_token("rita", Role.VIEWER.value, hash_token(TOKEN), 0.0)


def test_the_reference_renders_every_operation_from_this_server_alone(
    page: sync_api.Page, tmp_path: Path
) -> None:
    expect = sync_api.expect
    ledger, commerce = tmp_path / "ledger.db", tmp_path / "commerce.db"
    create_app(commerce).services.close()
    in_thread(_reader(ledger))
    with serving(ledger, lambda: create_app(commerce), FakeClock(NOW)) as url:
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        document = httpx.get(f"{url}/openapi.json", headers=bearer, timeout=10).json()
        operations = sum(len(methods) for methods in document["paths"].values())
        problems: list[str] = []
        elsewhere: list[str] = []
        page.on(
            "console",
            lambda m: problems.append(f"{m.type}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
        page.on(
            "request",
            lambda r: None if r.url.startswith(f"{url}/") else elsewhere.append(r.url),
        )
        # a browser sends no bearer token by itself: here it is told to, as an
        # authenticating proxy in front of the server would let it in
        page.set_extra_http_headers(bearer)
        page.goto(f"{url}/docs")
        title = page.locator(".information-container .title")
        expect(title).to_contain_text("Pivotal", timeout=BOUND)
        expect(page.locator(".opblock-summary-path")).to_have_count(operations, timeout=BOUND)
        expect(page.locator('.opblock-summary-path[data-path="/v1/sagas"]').first).to_be_visible()
        expect(page.get_by_role("button", name="Authorize")).to_be_visible()  # bearer tokens
        assert problems == []  # no script, style or request refused by the policy
        assert elsewhere == []
        page.set_extra_http_headers({})
        page.goto(f"{url}/docs")  # without a credential: refused, as the document is
        assert "unauthorized" in page.content()
