"""An approver in a real browser (Chromium through Playwright) against ``pivotal serve``'s
app under uvicorn: log in, read the queue and a hostile rationale, decide, and see a worker
finish the saga on its timeline.

It also takes the screenshots of the approvals queue and an approval's detail that the
manual's serving page shows (docs/screenshots/; how they stay the same on every run:
tests/browser/browser_kit.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from browser_kit import NOW, fixed_ids, in_thread, login, serving, shot, sync_api

from commerce_plans import approval_plan
from pivotal import Orchestrator, SagaStatus, SQLiteStore, parse_plan
from pivotal.clock import FakeClock
from pivotal.examples.commerce import create_app
from pivotal.people.principals import Role, hash_token

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
TOKEN = "pvt_browser_ann"
# the screenshots' sagas: what an agent would write (the hostile rationale is another saga's)
RATIONALE = (
    "Order 4472 (customer c-4471) was paid by card: 180.00 authorised against invoice "
    "INV-4472. One lamp is in stock at warehouse B, which serves the customer's address. "
    "Reserve it, capture the payment, ship it and send the confirmation."
)

# Both orders are of customer c-4471: one lamp from warehouse B, to the same address.
RECIPIENT = "customer-4471@example.com"


def plan(order_id: str, amount: str, rationale: str) -> dict[str, object]:
    return approval_plan(order_id, amount, RECIPIENT) | {
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
    ledger, commerce = tmp_path / "ledger.db", tmp_path / "commerce.db"
    fixed_ids(monkeypatch)
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
    with serving(ledger, lambda: create_app(commerce), FakeClock(NOW)) as url:
        yield Served(url, ledger, commerce)


def test_an_approver_reads_the_hostile_rationale_as_text_and_approves(
    served: Served, page: sync_api.Page, tmp_path: Path
) -> None:
    expect = sync_api.expect
    dialogs = login(page, served.url, TOKEN)
    rows = page.locator("#queue tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("ship-4471")  # oldest first
    expect(rows.first).to_contain_text("180.00")
    shot(page, tmp_path, "approval-queue.png")

    page.get_by_role("link", name="ship-4472").click()  # the screenshot's: an agent's rationale
    expect(page.locator("#rationale")).to_contain_text(RATIONALE)
    expect(page.get_by_text("undo authorize_payment")).to_be_visible()
    shot(page, tmp_path, "approval-detail.png")
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
    dialogs = login(page, served.url, TOKEN)
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


def test_two_approvers_at_once_the_second_keeps_the_reason_and_reads_who_decided(
    served: Served, page: sync_api.Page, tmp_path: Path
) -> None:
    """Ann and Bea open the same decision; Ann rejects first. Bea's approval decides
    nothing: she lands on the saga's page, reads who decided and when, and still has the
    reason she typed. On a laptop's screen both decisions are in view without scrolling."""
    expect = sync_api.expect
    in_thread(_token("bea", "pvt_browser_bea", served.ledger))
    second = page.context.browser.new_context(viewport={"width": 1280, "height": 720})  # type: ignore[union-attr]
    bea = second.new_page()
    try:
        page.set_viewport_size({"width": 1280, "height": 720})
        for who, token in ((page, TOKEN), (bea, "pvt_browser_bea")):
            login(who, served.url, token)
            who.get_by_role("link", name="ship-4472").click()
            for button in ("Approve", "Reject"):
                box = who.get_by_role("button", name=button, exact=True).bounding_box()
                assert box is not None, button
                assert box["y"] + box["height"] <= 720, button
        page.get_by_label("Reason to reject").fill("duplicate of 4471")
        page.get_by_role("button", name="Reject", exact=True).click()
        expect(page.get_by_role("status")).to_contain_text("Rejected")

        typed = "customer confirmed both lamps by phone"
        bea.get_by_label("Reason to approve").fill(typed)
        bea.get_by_role("button", name="Approve", exact=True).click()
        lost = bea.locator("#lost")
        expect(lost).to_contain_text("nothing was decided by you")
        expect(lost).to_contain_text("The approval was rejected by ann at")
        expect(lost).to_contain_text(": duplicate of 4471")
        expect(bea.locator("#lost-reason")).to_have_value(typed)
        expect(bea.locator("h1")).to_have_text("ship-4472")
        bea.screenshot(path=str(tmp_path / "lost-decision.png"), full_page=False)
    finally:
        second.close()


async def _token(name: str, token: str, ledger: Path) -> None:
    async with SQLiteStore(ledger) as store:
        await store.create_token(name, Role.APPROVER.value, hash_token(token), 0.0)
