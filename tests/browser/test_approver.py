"""An approver in a real browser (Chromium through Playwright) against ``pivotal serve``'s
app under uvicorn: log in, read the queue and a hostile rationale, decide, and see a worker
finish the saga on its timeline.

It also takes the README's screenshots (docs/screenshots/). They are meant to be the same on
every run: a fixed viewport, a clock that stands still (so no "waited" or "expires in" moves),
the example services' ids made from a counter instead of random, animations and the caret
off. ``PIVOTAL_UPDATE_SCREENSHOTS=1`` copies them into docs/ and records, in
docs/screenshots.json, the templates and stylesheet each was taken from
(tests/docs/test_screenshots.py fails once those change)."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import itertools
import os
import shutil
import socket
import threading
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pivotal import Orchestrator, SagaStatus, SQLiteStore, parse_plan
from pivotal.clock import FakeClock
from pivotal.examples.commerce import create_app
from pivotal.examples.commerce import services as commerce_services
from pivotal.principals import Role, hash_token

CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
TOKEN = "pvt_browser_ann"
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "screenshots"
NOW = 1_796_040_000.0  # 2026-11-30 12:00:00 UTC: every page shows the same times
# the README's sagas: what an agent would write (the hostile rationale is another saga's)
RATIONALE = (
    "Order 4472 (customer c-4471) was paid by card: 180.00 authorised against invoice "
    "INV-4472. One lamp is in stock at warehouse B, which serves the customer's address. "
    "Reserve it, capture the payment, ship it and send the confirmation."
)

if not CHROMIUM.exists():
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is required in CI (apt-get install chromium)", pytrace=False)
    pytest.skip(f"{CHROMIUM} is absent: apt-get install chromium", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")
T = TypeVar("T")


def in_thread(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on its own loop in another thread (Playwright's runs in this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


# Both orders are of customer c-4471: one lamp from warehouse B, to the same address.
RECIPIENT = "customer-4471@example.com"


def plan(order_id: str, amount: str, rationale: str) -> dict[str, object]:
    payment = {"order_id": order_id, "amount": amount}
    return {
        "catalogue": "fulfilment",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {"order_id": order_id, "sku": "lamp", "quantity": 1, "warehouse": "B"},
            },
            {"name": "authorize_payment", "args": payment},
            {"name": "capture_payment", "args": payment},
            {"name": "create_shipment", "args": {"order_id": order_id, "warehouse": "B"}},
            {
                "name": "send_confirmation",
                "args": {"order_id": order_id, "recipient": RECIPIENT},
            },
        ],
        "rationale": rationale,
        "provenance": {
            "actor_type": "agent",
            "actor_id": "fulfilment-agent",
            "run_id": "run-7f3a",
            "model": "gpt-4.1-mini",
            "prompt_version": "fulfil-v3",
            "source_document_id": f"ticket-{order_id}",
        },
    }


@dataclass(frozen=True)
class Served:
    url: str
    ledger: Path
    commerce: Path

    def work(self, saga_id: str) -> SagaStatus:
        """A worker's pass over the saga, in this thread."""

        async def run() -> SagaStatus:
            async with SQLiteStore(self.ledger) as store:
                orch = Orchestrator(store, create_app(self.commerce), clock=FakeClock(NOW))
                state = await orch.run(saga_id)
                return state.status

        return in_thread(run())


async def _prepare(ledger: Path, commerce: Path) -> None:
    async with SQLiteStore(ledger) as store:
        orch = Orchestrator(store, create_app(commerce), clock=FakeClock(NOW))
        await store.create_token("ann", Role.APPROVER.value, hash_token(TOKEN), 0.0)
        for saga_id, order, why in (
            ("ship-4471", "4471", HOSTILE + "\nThe customer paid; stock is reserved."),
            ("ship-4472", "4472", RATIONALE),
        ):
            await orch.submit(parse_plan(plan(order, "180.00", why)), saga_id=saga_id)
            state = await orch.run(saga_id)
            assert state.status is SagaStatus.AWAITING_APPROVAL, state.reason


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    import uvicorn

    from pivotal.server import create_app as create_api

    ledger, commerce = tmp_path / "ledger.db", tmp_path / "commerce.db"
    counter = itertools.count(1)
    monkeypatch.setattr(commerce_services, "_id", lambda prefix: _fixed_id(prefix, next(counter)))
    shop = create_app(commerce)
    shop.services.order(  # a second order of 4471's customer, over the threshold too
        "4472",
        customer="c-4471",
        amount="180.00",
        sku="lamp",
        quantity=1,
        warehouse="B",
        recipient=RECIPIENT,
    )
    shop.services.close()
    in_thread(_prepare(ledger, commerce))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue until uvicorn accepts: no need to wait for it
    port = sock.getsockname()[1]
    holder: dict[str, uvicorn.Server] = {}
    ready = threading.Event()

    async def serve() -> None:
        async with SQLiteStore(ledger) as store:
            api = create_api(store, create_app(commerce), clock=FakeClock(NOW))
            server = uvicorn.Server(uvicorn.Config(api, log_level="warning", lifespan="off"))
            holder["server"] = server
            ready.set()
            await server.serve(sockets=[sock])

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield Served(f"http://127.0.0.1:{port}", ledger, commerce)
    finally:
        holder["server"].should_exit = True
        thread.join(10)
        sock.close()


def _fixed_id(prefix: str, n: int) -> str:
    """The example services' ids (``res_…``, ``au_…``), the same on every run."""
    return f"{prefix}_{hashlib.sha256(f'{prefix}-{n}'.encode()).hexdigest()[:12]}"


@pytest.fixture
def page(tmp_path: Path) -> Iterator[sync_api.Page]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        yield context.new_page()
        context.close()
        browser.close()


def _login(page: sync_api.Page, served: Served) -> list[str]:
    dialogs: list[str] = []

    def record(dialog: sync_api.Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    page.goto(f"{served.url}/ui/approvals")
    sync_api.expect(page).to_have_url(f"{served.url}/ui/login")
    page.get_by_label("Token").fill(TOKEN)
    page.get_by_role("button", name="Log in").click()
    sync_api.expect(page).to_have_url(f"{served.url}/ui/approvals")
    return dialogs


def _manifest() -> Any:
    """tests/docs/screenshots_manifest.py: which page each image shows, and its sources."""
    spec = importlib.util.spec_from_file_location(
        "screenshots_manifest", ROOT / "tests" / "docs" / "screenshots_manifest.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shot(page: sync_api.Page, tmp_path: Path, name: str) -> None:
    """Keep a screenshot with the test's files; with PIVOTAL_UPDATE_SCREENSHOTS=1, also
    refresh the README's copy and record what it was taken from in docs/screenshots.json."""
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True, animations="disabled", caret="hide")
    if os.environ.get("PIVOTAL_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SCREENSHOTS / name)
        _manifest().write_manifest([name])


def test_an_approver_reads_the_hostile_rationale_as_text_and_approves(
    served: Served, page: sync_api.Page, tmp_path: Path
) -> None:
    expect = sync_api.expect
    dialogs = _login(page, served)
    rows = page.locator("#queue tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("ship-4471")  # oldest first
    expect(rows.first).to_contain_text("180.00")
    _shot(page, tmp_path, "approval-queue.png")

    page.get_by_role("link", name="ship-4472").click()  # the README's: an agent's rationale
    expect(page.locator("#rationale")).to_contain_text(RATIONALE)
    expect(page.get_by_text("undo authorize_payment")).to_be_visible()
    _shot(page, tmp_path, "approval-detail.png")
    page.go_back()

    page.get_by_role("link", name="ship-4471").click()
    expect(page.locator("#rationale")).to_contain_text(HOSTILE)
    expect(page.get_by_text("gpt-4.1-mini")).to_be_visible()
    expect(page.get_by_text("undo authorize_payment")).to_be_visible()
    assert page.locator("main script, main img").count() == 0

    page.get_by_label("Reason to approve").fill("amount matches the invoice")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Approved")
    assert served.work("ship-4471") is SagaStatus.COMPLETED
    page.reload()
    expect(page.locator("#timeline")).to_contain_text("saga_completed")
    expect(page.locator("#timeline")).to_contain_text("by ann: amount matches the invoice")
    assert dialogs == []


def test_an_approver_rejects_and_sees_the_undos(served: Served, page: sync_api.Page) -> None:
    expect = sync_api.expect
    dialogs = _login(page, served)
    page.get_by_role("link", name="ship-4472").click()
    page.get_by_label("Reason to reject").fill("duplicate order")
    page.get_by_role("button", name="Reject", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Rejected")
    assert served.work("ship-4472") is SagaStatus.COMPENSATED
    page.reload()
    timeline = page.locator("#timeline")
    expect(timeline).to_contain_text("approval_rejected")
    expect(timeline.locator("tr.e-undo_succeeded")).to_have_count(2)
    expect(page.locator(".status").first).to_have_text("compensated")
    assert dialogs == []
