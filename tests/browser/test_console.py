"""The operator's console in a real browser (Chromium through Playwright) against ``pivotal
serve``'s app under uvicorn, one test per capability: search and filter the sagas (and page
through them), save a search by name and follow it back, read why a saga failed (its
traceback and its retries, folded), abort a saga before its pivot, run a compensated plan
again, fork a completed one with an argument changed, resume a parked one from a step,
download a saga's events, the pictures under the Content-Security-Policy, the workers page,
and a saga's page following long work as it reports its progress, until it comes to rest.

It also takes the documents' screenshots of these pages (docs/screenshots/; how they stay
the same on every run: tests/browser/browser_kit.py)."""

from __future__ import annotations

import asyncio
import json
import queue
import random
import re
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from browser_kit import NOW, fixed_ids, in_thread, login, serving, shot, sync_api
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    Orchestrator,
    Plan,
    SagaState,
    SagaStatus,
    SQLiteStore,
    StepContext,
    parse_plan,
)
from pivotal.clock import Clock, FakeClock
from pivotal.declarations.app import App
from pivotal.examples.commerce import Fault, create_app
from pivotal.hooks import Point
from pivotal.orchestration.rerun import rerun_id
from pivotal.people.principals import Role, hash_token
from pivotal.testing.crash import CrashAt, CrashSite, SimulatedCrash
from search_ledger import make

expect = sync_api.expect
T = TypeVar("T")
HOUR = 3600.0
BOUND = 30.0  # a safety net against a hang, never what a test measures
POLLED = 15_000  # ms: how long a page that polls every 2 s is given to show a change
# who logs in, by role: (name, token)
PEOPLE = {
    Role.VIEWER: ("vic", "pvt_browser_vic"),
    Role.OPERATOR: ("olu", "pvt_browser_olu"),
}
LANDS = {Role.VIEWER: "/ui/approvals", Role.OPERATOR: "/ui/needs-human"}


@dataclass
class Console:
    """A ledger, the commerce example's services and the server over them (``serve``)."""

    ledger: Path
    commerce: Path
    stack: ExitStack
    url: str = ""
    problems: list[str] = field(default_factory=list)  # the pages' console errors
    dialogs: list[str] = field(default_factory=list)  # the dialogs they opened

    def run(self, work: Callable[[Orchestrator], Awaitable[T]]) -> T:
        """``work`` with an orchestrator over the ledger and the commerce app, its clock
        standing at ``NOW``, on a loop of its own."""

        async def go() -> T:
            async with SQLiteStore(self.ledger) as store:
                shop = create_app(self.commerce)
                orch = Orchestrator(store, shop, clock=FakeClock(NOW), rng=random.Random(0))
                return await work(orch)

        return in_thread(go())

    def serve(
        self, make_app: Callable[[], App | Catalogue] | None = None, clock: Clock | None = None
    ) -> str:
        """Serve the pages over the ledger (the commerce app unless ``make_app``; a clock
        standing at ``NOW`` unless ``clock``)."""
        chosen = make_app or (lambda: create_app(self.commerce))
        self.url = self.stack.enter_context(serving(self.ledger, chosen, clock or FakeClock(NOW)))
        return self.url

    def open(self, page: sync_api.Page, role: Role, path: str) -> None:
        """Log in as the person of ``role`` and open ``path``; every console error and
        uncaught error of the page from then on is kept in ``problems``, every dialog it
        opens in ``dialogs``."""

        def seen(message: sync_api.ConsoleMessage) -> None:
            where = message.location.get("url", "")
            if message.type == "error":  # a missing icon too: the pages name theirs
                self.problems.append(f"{message.type}: {message.text} ({where})")

        page.on("console", seen)
        page.on("pageerror", lambda e: self.problems.append(f"pageerror: {e}"))
        self.dialogs = login(page, self.url, PEOPLE[role][1], start=path, lands=LANDS[role])
        page.goto(f"{self.url}{path}")

    def quiet(self) -> None:
        """The pages logged no error, raised none and opened no dialog."""
        assert self.problems == []
        assert self.dialogs == []


@pytest.fixture
def console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Console]:
    fixed_ids(monkeypatch)
    ledger, commerce = tmp_path / "ledger.db", tmp_path / "commerce.db"
    create_app(commerce).services.close()  # seeded

    async def people(orch: Orchestrator) -> None:
        for role, (name, token) in PEOPLE.items():
            await orch.store.create_token(name, role.value, hash_token(token), 0.0)

    with ExitStack() as stack:
        made = Console(ledger, commerce, stack)
        made.run(people)
        yield made


# -- the commerce example's sagas ----------------------------------------------------------


def open_order(console: Console, order_id: str, *faults: tuple[str, Fault]) -> None:
    """An open order of two sku-1 for 49.90 from warehouse A; the services' next calls of
    each named operation meet its fault."""
    shop = create_app(console.commerce)
    shop.services.order(
        order_id,
        customer=f"c-{order_id}",
        amount="49.90",
        sku="sku-1",
        quantity=2,
        warehouse="A",
        recipient=f"customer-{order_id}@example.com",
    )
    for op, fault in faults:
        shop.services.faults.next(op, fault)
    shop.services.close()


def checkout(order_id: str) -> Plan:
    return parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "name": "reserve_stock",
                    "args": {"order_id": order_id, "sku": "sku-1", "quantity": 2, "warehouse": "A"},
                },
                {"name": "charge_payment", "args": {"order_id": order_id, "amount": "49.90"}},
                {"name": "create_shipment", "args": {"order_id": order_id, "warehouse": "A"}},
            ],
            "rationale": f"Order {order_id} is paid: reserve its two sku-1, charge and ship.",
            "provenance": {
                "actor_type": "agent",
                "actor_id": "checkout-agent",
                "run_id": "run-9c1e",
                "model": "gpt-4.1-mini",
                "prompt_version": "checkout-v2",
                "source_document_id": f"ticket-{order_id}",
            },
        }
    )


def declined(console: Console, saga_id: str, order_id: str) -> SagaState:
    """A checkout whose reservation was refused twice, then held, and whose charge was
    declined: compensated."""
    open_order(
        console,
        order_id,
        ("reserve", Fault.TRANSIENT),
        ("reserve", Fault.TRANSIENT),
        ("charge", Fault.PERMANENT),
    )

    async def work(orch: Orchestrator) -> SagaState:
        return await orch.execute(checkout(order_id), saga_id=saga_id)

    state = console.run(work)
    assert state.status is SagaStatus.COMPENSATED, state.reason
    return state


def saga_ids(page: sync_api.Page) -> sync_api.Locator:
    """The saga ids listed on the Sagas page, in their order."""
    return page.locator("table.grid tbody tr td:first-child a")


def filters(page: sync_api.Page) -> None:
    """Unfold the Sagas page's filters (folded away once a search was made)."""
    folded = page.locator("details.search")
    if folded.get_attribute("open") is None:
        folded.locator("summary").click()


# -- 1. search, filter, sort and page ------------------------------------------------------

# (saga, catalogue, status, created hours before NOW, updated hours before NOW, reason, order)
SAGAS = (
    ("ship-4471", "fulfilment", SagaStatus.COMPLETED, 30, 29, None, "4471"),
    (
        "ship-4472",
        "fulfilment",
        SagaStatus.COMPENSATED,
        28,
        1,
        "capture_payment (step 2) failed: Permanent: card DECLINED by the issuer",
        "4472",
    ),
    ("chk-order-1", "checkout", SagaStatus.COMPLETED, 26, 26, None, "order-1"),
    (
        "chk-order-2",
        "checkout",
        SagaStatus.COMPENSATED,
        20,
        19,
        "reserve_stock (step 0) failed: Permanent: out of stock",
        "order-2",
    ),
    (
        "ship-4473",
        "fulfilment",
        SagaStatus.NEEDS_HUMAN,
        12,
        11,
        "create_shipment (step 3) outcome unknown: the carrier timed out",
        "4473",
    ),
    (
        "chk-order-3",
        "checkout",
        SagaStatus.COMPENSATED,
        8,
        7,
        "charge_payment (step 1) failed: Permanent: card declined (insufficient funds)",
        "order-3",
    ),
    (
        "ship-4474",
        "fulfilment",
        SagaStatus.COMPENSATED,
        5,
        4,
        "authorize_payment (step 1) failed: Permanent: card declined by the issuer",
        "4474",
    ),
    ("chk-order-4", "checkout", SagaStatus.RUNNING, 2, 2, None, "order-4"),
)


async def write_sagas(orch: Orchestrator) -> None:
    """The sagas of ``SAGAS``, straight through the ledger."""
    for saga_id, catalogue, status, created, updated, reason, order in SAGAS:
        await make(
            orch.store,
            saga_id,
            at=NOW - created * HOUR,
            updated=NOW - updated * HOUR,
            catalogue=catalogue,
            status=status,
            reason=reason,
            subjects={"order_id": [order]},
            actor_id=f"{catalogue}-agent",
        )


def test_search_filters_and_sorts_the_sagas(console: Console, page: sync_api.Page) -> None:
    console.run(write_sagas)
    console.serve()
    console.open(page, Role.VIEWER, "/ui/sagas")
    everything = [s[0] for s in reversed(SAGAS)]  # newest first
    expect(saga_ids(page)).to_have_text(everything)

    # compensated, with "declined" in the reason (in any case): three of them
    page.get_by_label("compensated", exact=True).check()
    page.get_by_label("Reason contains").fill("declined")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"/ui/sagas\?status=compensated&.*reason=declined"))
    expect(saga_ids(page)).to_have_text(["ship-4474", "chk-order-3", "ship-4472"])
    expect(page.get_by_label("compensated", exact=True)).to_be_checked()
    expect(page.get_by_label("Reason contains")).to_have_value("declined")
    expect(page.locator("table.grid tbody")).to_contain_text("card DECLINED by the issuer")
    expect(page.locator("details.search")).not_to_have_attribute("open", "")  # folded away
    link = page.get_by_role("link", name="Link to this search")
    searched = "status=compensated&reason=declined&sort=created&order=desc"
    expect(link).to_have_attribute("href", f"/ui/sagas?{searched}")

    # sorted by the last update, oldest first: ship-4472 was updated last
    filters(page)
    page.get_by_label("Sort by").select_option("updated")
    page.get_by_label("Order", exact=True).select_option("asc")
    page.get_by_role("button", name="Search").click()
    expect(saga_ids(page)).to_have_text(["chk-order-3", "ship-4474", "ship-4472"])
    expect(page.get_by_label("Sort by")).to_have_value("updated")
    expect(page.get_by_label("Order", exact=True)).to_have_value("asc")

    # the fulfilment catalogue and an argument value: just the one order
    filters(page)
    page.get_by_label("Catalogue").fill("fulfilment")
    page.get_by_label("Argument value").fill("order_id=4472")
    page.get_by_role("button", name="Search").click()
    expect(saga_ids(page)).to_have_text(["ship-4472"])
    filters(page)
    page.get_by_label("Argument value").fill("order_id=4471")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("table.grid tbody")).to_contain_text(
        "No sagas with status compensated match."
    )
    expect(saga_ids(page)).to_have_count(0)

    # a filter the page cannot read says why, and keeps the form
    filters(page)
    page.get_by_label("Created since").fill("last week")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("alert")).to_contain_text("neither a duration")
    expect(page.locator("details.search")).to_have_attribute("open", "")  # unfolded
    expect(page.get_by_label("Catalogue")).to_have_value("fulfilment")

    page.get_by_role("link", name="clear").click()
    expect(saga_ids(page)).to_have_text(everything)
    [refused] = console.problems  # the page's 400, and nothing else
    assert "status of 400 (Bad Request)" in refused
    assert "created_since=last+week" in refused
    assert console.dialogs == []


def saved(page: sync_api.Page) -> sync_api.Locator:
    """The links of the person's saved searches on the Sagas page."""
    return page.get_by_role("navigation", name="Your saved searches").get_by_role("link")


def test_a_search_saved_by_name_is_followed_back_from_the_sagas_page(
    console: Console, page: sync_api.Page, tmp_path: Path
) -> None:
    console.run(write_sagas)
    console.serve()
    console.open(page, Role.VIEWER, "/ui/sagas")
    expect(page.get_by_label("Save this search as")).to_have_count(0)  # no search made yet
    page.get_by_label("needs_human", exact=True).check()
    page.get_by_role("button", name="Search").click()
    page.get_by_label("Save this search as").fill("stuck")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(saved(page)).to_have_text(["stuck"])

    # compensated, "declined" in the reason: saved, and shown as the search it is
    filters(page)
    page.get_by_label("needs_human", exact=True).uncheck()
    page.get_by_label("compensated", exact=True).check()
    page.get_by_label("Reason contains").fill("declined")
    page.get_by_role("button", name="Search").click()
    link = page.get_by_role("link", name="Link to this search").get_attribute("href")
    assert link == "/ui/sagas?status=compensated&reason=declined&sort=created&order=desc"
    page.get_by_label("Save this search as").fill("declined cards")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page).to_have_url(f"{console.url}{link}")
    expect(saved(page)).to_have_text(["declined cards", "stuck"])
    expect(page.get_by_role("link", name="declined cards")).to_have_attribute(
        "aria-current", "page"
    )

    # another search, then back to the saved one: exactly as "Link to this search" was
    filters(page)
    page.get_by_role("link", name="clear").click()
    expect(saga_ids(page)).to_have_count(len(SAGAS))
    expect(page.get_by_role("link", name="declined cards")).not_to_have_attribute(
        "aria-current", "page"
    )
    page.get_by_role("link", name="declined cards").click()
    expect(page).to_have_url(f"{console.url}{link}")
    expect(saga_ids(page)).to_have_text(["ship-4474", "chk-order-3", "ship-4472"])
    expect(page.get_by_label("compensated", exact=True)).to_be_checked()
    expect(page.get_by_label("Reason contains")).to_have_value("declined")
    filters(page)  # shown unfolded, under the results
    shot(page, tmp_path, "sagas-search.png")

    # deleted: gone from the list, and the page stays on the search it showed
    page.get_by_role("button", name="Delete stuck").click()
    expect(page).to_have_url(f"{console.url}{link}")
    expect(saved(page)).to_have_text(["declined cards"])
    console.quiet()


def test_a_search_pages_through_the_sagas_200_at_a_time(
    console: Console, page: sync_api.Page
) -> None:
    async def write(orch: Orchestrator) -> None:
        for n in range(205):
            await make(
                orch.store,
                f"batch-{n:03}",
                at=NOW - HOUR + n,
                status=SagaStatus.COMPENSATED,
                reason="reserve_stock (step 0) failed: out of stock",
            )
        await make(orch.store, "done-1", at=NOW - HOUR + 500)  # completed: filtered out

    console.run(write)
    console.serve()
    console.open(page, Role.VIEWER, "/ui/sagas")
    page.get_by_label("compensated", exact=True).check()
    page.get_by_role("button", name="Search").click()
    expect(saga_ids(page)).to_have_count(200)
    expect(saga_ids(page).first).to_have_text("batch-204")
    expect(saga_ids(page).last).to_have_text("batch-005")

    page.get_by_role("link", name="Next page").click()
    expect(page).to_have_url(re.compile(r"/ui/sagas\?status=compensated&.*cursor="))
    expect(saga_ids(page)).to_have_text([f"batch-{n:03}" for n in (4, 3, 2, 1, 0)])
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    expect(page.get_by_label("compensated", exact=True)).to_be_checked()
    console.quiet()


# -- 2. why it failed ----------------------------------------------------------------------


def test_a_failed_saga_shows_its_traceback_and_its_retries_folded(
    console: Console, page: sync_api.Page, tmp_path: Path
) -> None:
    declined(console, "chk-5002", "5002")
    console.serve()
    console.open(page, Role.VIEWER, "/ui/sagas/chk-5002")
    expect(page.locator("#live-head .status").first).to_have_text("compensated")

    # a traceback folded under the retries' row and under the declined charge's
    expect(page.locator("#timeline tr.trace-row details.trace")).to_have_count(2)
    trace = page.locator("#timeline tr.e-step_failed + tr.trace-row details.trace")
    expect(trace).to_have_count(1)
    expect(trace.locator("summary")).to_have_text(
        re.compile(r"^Traceback: services\.py:\d+ in _effect$")
    )
    shown = trace.locator("pre")
    expect(shown).to_be_hidden()
    trace.locator("summary").click()
    expect(shown).to_be_visible()
    expect(trace).to_have_attribute("open", "")
    # the user's frame (the example catalogue's action), its source line, the error
    expect(shown).to_contain_text(re.compile(r"catalogues\.py:\d+ in charge_payment"))
    expect(shown).to_contain_text("return svc.charge(args.order_id, args.amount, ctx.key)")
    expect(shown).to_contain_text("pivotal.errors.Permanent: charge: refused by the provider")
    expect(shown).not_to_contain_text("engine.py")  # Pivotal's own frames are left out

    # the two refused reservations: one row, folded, each attempt inside
    retries = page.locator("#timeline details.attempts")
    expect(retries).to_have_count(1)
    expect(retries.locator("summary").first).to_contain_text(
        "2 attempts, last: Transient: reserve: service unavailable, try again"
    )
    attempts = retries.locator("tr.e-step_started")
    expect(attempts).to_have_count(2)
    expect(attempts.first).to_be_hidden()
    retries.locator("summary").first.click()
    expect(attempts.first).to_be_visible()
    expect(retries.locator("tr.e-step_retry_scheduled")).to_have_count(2)
    inner = retries.locator("details.trace")  # each attempt's own traceback, folded again
    expect(inner).to_have_count(2)
    expect(inner.first.locator("pre")).to_be_hidden()
    expect(inner.first.locator("summary")).to_contain_text(
        re.compile(r"services\.py:\d+ in _effect")
    )
    # the reservation that held, outside the fold
    expect(page.locator("#timeline > tbody > tr.e-step_succeeded").first).to_contain_text(
        "reservation_id"
    )
    shot(page, tmp_path, "saga-failure.png")
    console.quiet()


# -- 3. act: abort, run again, download ----------------------------------------------------


def test_an_operator_aborts_a_saga_before_its_pivot_from_its_page(
    console: Console, page: sync_api.Page
) -> None:
    open_order(console, "5003")

    async def submit(orch: Orchestrator) -> None:
        await orch.submit(checkout("5003"), saga_id="chk-5003")

    console.run(submit)
    console.serve()
    console.open(page, Role.OPERATOR, "/ui/sagas/chk-5003")
    expect(page.locator("#live-head .status").first).to_have_text("submitted")
    expect(page.get_by_role("button", name="Run this plan again")).to_have_count(0)
    page.get_by_label("Reason to abort").fill("a duplicate of order 5001")
    page.get_by_role("button", name="Abort", exact=True).click()

    expect(page).to_have_url(f"{console.url}/ui/sagas/chk-5003?notice=aborted")
    expect(page.get_by_role("status")).to_have_text("Aborted.")  # no worker is alive yet
    expect(page.locator("#no-worker")).to_contain_text("start one over this ledger with")
    expect(page.locator("#live-head .status").first).to_have_text("compensating")
    expect(page.locator("#timeline tr.e-compensation_started")).to_contain_text(
        "a duplicate of order 5001"
    )
    expect(page.get_by_label("Reason to abort")).to_have_count(0)  # nothing more to abort
    console.quiet()


def test_an_operator_runs_a_compensated_plan_again(console: Console, page: sync_api.Page) -> None:
    declined(console, "chk-5004", "5004")
    console.serve()
    console.open(page, Role.OPERATOR, "/ui/sagas/chk-5004")
    expect(page.get_by_label("Reason to abort")).to_have_count(0)  # compensated: too late
    page.get_by_role("button", name="Run this plan again").click()

    new = rerun_id("chk-5004")
    expect(page).to_have_url(f"{console.url}/ui/sagas/{new}?notice=rerun")
    expect(page.get_by_role("status")).to_contain_text("Submitted again as this new saga")
    expect(page.locator("h1")).to_have_text(new)
    expect(page.locator("#rerun-of")).to_have_text("Runs the plan of chk-5004 again, as olu asked.")
    expect(page.locator("#live-head .status").first).to_have_text("submitted")
    page.locator("#rerun-of").get_by_role("link", name="chk-5004").click()
    expect(page).to_have_url(f"{console.url}/ui/sagas/chk-5004")
    expect(page.locator("#live-head .status").first).to_have_text("compensated")
    console.quiet()


def test_an_operator_aborts_every_saga_of_a_search_after_confirming_the_count(
    console: Console, page: sync_api.Page, tmp_path: Path
) -> None:
    for order_id in ("5101", "5102", "5103"):
        open_order(console, order_id)

    async def submit(orch: Orchestrator) -> None:
        for order_id in ("5101", "5102", "5103"):
            await orch.submit(checkout(order_id), saga_id=f"chk-{order_id}")

    console.run(submit)
    declined(console, "chk-5104", "5104")  # compensated: not among those submitted
    console.serve()
    console.open(page, Role.OPERATOR, "/ui/sagas")
    page.get_by_label("submitted", exact=True).check()
    page.get_by_role("button", name="Search").click()
    expect(saga_ids(page)).to_have_text(["chk-5101", "chk-5102", "chk-5103"])  # ties: by id
    page.get_by_label("Every saga of this search").select_option("abort")
    page.get_by_label("Reason (an abort needs one)").fill("a batch planned from a bad feed")
    page.screenshot(path=str(tmp_path / "bulk-search.png"), full_page=True)
    page.get_by_role("button", name="Act on every saga of this search").click()

    expect(page.locator("h1")).to_have_text("Abort 3 sagas?")
    expect(page.locator("ul.ids a")).to_have_text(["chk-5101", "chk-5102", "chk-5103"])
    page.screenshot(path=str(tmp_path / "bulk-confirm.png"), full_page=True)
    page.get_by_role("button", name="Abort 3 sagas").click()

    expect(page.locator("h1")).to_have_text("Abort 3 sagas: done")
    expect(page.get_by_role("status")).to_have_text("3 acted, 0 already, 0 refused, 0 not found.")
    page.screenshot(path=str(tmp_path / "bulk-done.png"), full_page=True)
    page.get_by_role("link", name="Back to the search").click()
    expect(page.locator("table.grid tbody")).to_contain_text("No sagas with status submitted")

    async def statuses(orch: Orchestrator) -> dict[str, str]:
        return {s.saga_id: s.status.value for s in await orch.store.list_sagas(None, 10)}

    assert console.run(statuses) == {
        "chk-5101": "compensating",
        "chk-5102": "compensating",
        "chk-5103": "compensating",
        "chk-5104": "compensated",
    }


def test_an_operator_forks_a_completed_saga_with_fewer(
    console: Console, page: sync_api.Page, tmp_path: Path
) -> None:
    open_order(console, "5006")

    async def completed(orch: Orchestrator) -> SagaState:
        return await orch.execute(checkout("5006"), saga_id="chk-5006")

    assert console.run(completed).status is SagaStatus.COMPLETED
    shop = create_app(console.commerce)  # the customer asks for one: the order changed
    lines = [{"sku": "sku-1", "quantity": 1}]
    shop.services.order("5006", customer="c-5006", amount="24.95", lines=lines)
    shop.services.close()
    console.serve()
    console.open(page, Role.OPERATOR, "/ui/sagas/chk-5006")
    expect(page.get_by_role("button", name="Run this plan again")).to_have_count(0)
    page.get_by_label("Changes, one per line").fill("0.quantity=1\ncharge_payment.amount=24.95")
    page.get_by_label("Reason to fork").fill("the customer asked for one lamp, not two")
    page.screenshot(path=str(tmp_path / "fork-form.png"), full_page=True)
    page.get_by_role("button", name="Fork with these changes").click()

    expect(page).to_have_url(re.compile(r"/ui/sagas/fk_[0-9a-f]{32}\?notice=forked$"))
    expect(page.get_by_role("status")).to_contain_text("Forked into this new saga")
    expect(page.locator("#forked-from")).to_contain_text(
        "Forked from chk-5006 by olu: the customer asked for one lamp, not two"
    )
    expect(page.locator("#forked-from li")).to_have_count(2)
    expect(page.locator("#live-head .status").first).to_have_text("submitted")
    page.screenshot(path=str(tmp_path / "fork-new.png"), full_page=True)
    page.locator("#forked-from").get_by_role("link", name="chk-5006").click()
    expect(page.locator("#timeline tr.e-saga_forked")).to_contain_text("by olu")
    page.screenshot(path=str(tmp_path / "fork-original.png"), full_page=True)
    console.quiet()


def test_an_operator_resumes_a_parked_saga_from_a_step(
    console: Console, page: sync_api.Page, tmp_path: Path
) -> None:
    shop = create_app(console.commerce)
    recipient = "customer-5007@example.com"
    line = {"sku": "lamp", "quantity": 1}
    shop.services.order(
        "5007", customer="c-5007", amount="120.00", lines=[line], warehouse="B", recipient=recipient
    )
    shop.services.faults.always("ship", Fault.PERMANENT)  # the carrier refuses it
    shop.services.close()
    pay = {"order_id": "5007", "amount": "120.00"}
    plan = parse_plan(
        {
            "catalogue": "fulfilment",
            "steps": [
                {"name": "reserve_stock", "args": {"order_id": "5007", **line, "warehouse": "B"}},
                {"name": "authorize_payment", "args": pay},
                {"name": "capture_payment", "args": pay},
                {"name": "create_shipment", "args": {"order_id": "5007", "warehouse": "B"}},
                {"name": "send_confirmation", "args": {"order_id": "5007", "recipient": recipient}},
            ],
        }
    )

    async def ship(orch: Orchestrator) -> SagaState:
        return await orch.execute(plan, saga_id="ful-5007")

    assert console.run(ship).status is SagaStatus.NEEDS_HUMAN
    console.serve()
    console.open(page, Role.OPERATOR, "/ui/sagas/ful-5007")
    page.get_by_label("Reason to resume").fill("shipped by hand with another carrier")
    page.get_by_label("Go on from").select_option("4")
    page.screenshot(path=str(tmp_path / "resume-form.png"), full_page=True)
    page.get_by_role("button", name="Resume").click()

    expect(page).to_have_url(f"{console.url}/ui/sagas/ful-5007?notice=resumed")
    expect(page.locator("#timeline tr.e-saga_resumed")).to_contain_text(
        "from step 4 (settled by hand: 3)"
    )
    page.screenshot(path=str(tmp_path / "resume-done.png"), full_page=True)
    console.quiet()


def test_a_viewer_downloads_the_events_as_json(console: Console, page: sync_api.Page) -> None:
    declined(console, "chk-5005", "5005")

    async def events(orch: Orchestrator) -> list[str]:
        return [e.type.value for e in await orch.store.events("chk-5005")]

    logged = console.run(events)
    console.serve()
    console.open(page, Role.VIEWER, "/ui/sagas/chk-5005")
    with page.expect_download() as started:
        page.get_by_role("link", name="Download the events as JSON").click()
    download = started.value
    assert download.suggested_filename == "chk-5005.events.json"
    body = json.loads(Path(download.path()).read_text())
    assert body["saga_id"] == "chk-5005"
    assert [e["type"] for e in body["events"]] == logged
    assert logged[0] == "saga_submitted"
    assert logged[-1] == "saga_compensated"
    assert "step_retry_scheduled" in logged
    failed = next(e for e in body["events"] if e["type"] == "step_failed")
    assert failed["data"]["trace"][-1]["exception"] == "pivotal.errors.Permanent"
    expect(page).to_have_url(f"{console.url}/ui/sagas/chk-5005")  # the page stays
    console.quiet()


# -- 4. pictures ---------------------------------------------------------------------------

WATCH_CSP = """
window.__refused = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__refused.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""


def test_the_pictures_render_under_the_content_security_policy(
    console: Console, page: sync_api.Page
) -> None:
    declined(console, "chk-5006", "5006")
    console.serve()
    page.add_init_script(WATCH_CSP)  # runs before the page's own: sees every refusal
    console.open(page, Role.VIEWER, "/ui/sagas/chk-5006")

    pictures = page.locator("#pictures svg.pic")
    expect(pictures).to_have_count(2)
    for svg in pictures.all():
        expect(svg).to_be_visible()
        box = svg.bounding_box()
        assert box is not None
        assert box["width"] > 300
        assert box["height"] > 50
    plan, timeline = page.locator("#pictures svg.plan"), page.locator("#pictures svg.timeline")
    expect(plan.locator(":scope > title")).to_have_text("The plan of saga chk-5006")
    expect(timeline.locator(":scope > title")).to_have_text("Attempts over time of saga chk-5006")
    # a step's tooltip: what a failure at the shipment would undo, with the undos' names
    nodes = plan.locator("g.node")
    expect(nodes).to_have_count(3)
    shipping = plan.locator('g.node[data-step="2"]')
    expect(shipping.locator("title")).to_contain_text("refund_payment")
    expect(plan.locator('g.node[data-step="1"]')).to_have_class(re.compile(r"\bn-failed\b"))
    # each attempt's bar, with its error in its tooltip
    charge = timeline.locator('g.lane[data-step="1"] rect.bar.attempt')
    expect(charge).to_have_count(1)
    expect(charge.locator("title")).to_contain_text("Permanent")
    reserve = timeline.locator('g.lane[data-step="0"] rect.bar.attempt')
    expect(reserve).to_have_count(3)  # refused twice, then held

    # style.css reaches the pictures: hovering a step thickens its ring
    ring = shipping.locator("circle, rect, path").first
    before = ring.evaluate("el => getComputedStyle(el).strokeWidth")
    shipping.hover()
    expect(ring).to_have_css("stroke-width", "3px")
    assert before != "3px"

    assert page.evaluate("window.__refused") == []
    console.quiet()
    # the watch itself sees a refusal: an inline style is one
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<b style=\"color:red\">x</b>')")
    page.wait_for_function("window.__refused.length > 0")
    assert page.evaluate("window.__refused")[0].startswith("style-src")


# -- 5. workers ----------------------------------------------------------------------------


def test_the_workers_page_lists_the_workers_of_the_ledger(
    console: Console, page: sync_api.Page, tmp_path: Path
) -> None:
    open_order(console, "5007")

    async def record(orch: Orchestrator) -> None:
        store, start = orch.store, {"version": "0.9.0", "beat_every": 10.0}
        await store.start_worker("w-old", NOW - 3 * HOUR, catalogues=["checkout"], **start)
        await store.beat_worker("w-old", NOW - 2 * HOUR, stopped=True)
        await store.start_worker("w-eu-2", NOW - HOUR, catalogues=["checkout"], **start)
        await store.beat_worker("w-eu-2", NOW - 600)  # silent for ten minutes: stale
        await store.start_worker(
            "w-eu-1", NOW - 20 * 60, catalogues=["fulfilment", "checkout"], **start
        )
        await store.beat_worker("w-eu-1", NOW - 2)
        await orch.submit(checkout("5007"), saga_id="chk-5007")
        assert await store.claim("chk-5007", "w-eu-1", 60, NOW - 2) is not None

    console.run(record)
    console.serve()
    console.open(page, Role.VIEWER, "/ui/approvals")
    page.get_by_role("navigation").get_by_role("link", name="Workers").click()
    expect(page).to_have_url(f"{console.url}/ui/workers")
    rows = page.locator("table.grid tbody tr")
    expect(rows.locator("td:first-child")).to_have_text(["w-eu-1", "w-eu-2", "w-old"])
    alive = rows.nth(0)
    expect(alive.locator(".status")).to_have_text("alive")
    expect(alive).to_contain_text("2s ago")
    expect(alive.locator("td").nth(4)).to_have_text(re.compile(r"^\s*1\s*chk-5007\s*$"))
    expect(alive.get_by_role("link", name="chk-5007")).to_be_visible()
    expect(alive.locator("td").nth(5)).to_have_text("0.9.0")
    expect(alive.locator("td").nth(6)).to_have_text("checkout, fulfilment")
    expect(rows.nth(1).locator(".status")).to_have_text("stale")
    expect(rows.nth(1)).to_contain_text("10m 0s ago")
    expect(rows.nth(2).locator(".status")).to_have_text("stopped")
    shot(page, tmp_path, "workers.png")
    alive.get_by_role("link", name="chk-5007").click()
    expect(page.locator("h1")).to_have_text("chk-5007")
    console.quiet()


# -- 6. live long work ---------------------------------------------------------------------


class Batch(BaseModel):
    files: int = 100


class Copier:
    """A step that copies files and reports how far it got, waiting for the test between
    two reports (its thread sees the test's queues; its loop is not blocked)."""

    def __init__(self) -> None:
        self.reported: queue.Queue[int] = queue.Queue()
        self.go_on: queue.Queue[None] = queue.Queue()

    async def report(self, ctx: StepContext, message: str, done: int, total: int) -> None:
        await ctx.progress(message, done=done, total=total)
        self.reported.put(done)
        await asyncio.to_thread(self.go_on.get, True, BOUND)

    def next_report(self) -> int:
        return self.reported.get(timeout=BOUND)

    def catalogue(self) -> Catalogue:
        files = Catalogue("files", default_timeout=HOUR)

        async def remove(args: Batch, result: Any, ctx: StepContext) -> None:
            return None

        @files.compensable(undo=remove)
        async def copy_files(args: Batch, ctx: StepContext) -> dict[str, int]:
            await self.report(ctx, "copying", 40, args.files)
            await self.report(ctx, "copying file 75 of the archive", 75, args.files)
            return {"copied": args.files}

        return files


def test_a_saga_page_follows_long_work_until_it_comes_to_rest(
    console: Console, page: sync_api.Page, tmp_path: Path
) -> None:
    copier = Copier()
    files = copier.catalogue()
    clock = FakeClock(NOW)  # the server's and the worker's: both threads read it
    plan = parse_plan(
        {
            "catalogue": "files",
            "steps": [{"name": "copy_files", "args": {"files": 100}}],
            "rationale": "Copy the November archive (100 files) to cold storage.",
            "provenance": {
                "actor_type": "agent",
                "actor_id": "archive-agent",
                "run_id": "run-2611",
                "model": "gpt-4.1-mini",
                "prompt_version": "archive-v1",
                "source_document_id": "ticket-archive-2611",
            },
        }
    )

    async def work() -> SagaState:
        async with SQLiteStore(console.ledger) as store:
            orch = Orchestrator(store, files, clock=clock, owner="w-1")
            return await orch.execute(plan, saga_id="copy-2611")

    console.serve(lambda: files, clock=clock)
    with ThreadPoolExecutor(1) as worker:
        running = worker.submit(asyncio.run, work())
        try:
            assert copier.next_report() == 40
            clock.advance(3)
            console.open(page, Role.OPERATOR, "/ui/sagas/copy-2611")
            expect(page.locator("#following")).to_be_visible()
            line = page.locator("#live-body .progress-line")
            expect(line).to_have_text(
                re.compile(
                    r"^40% in flight · 40 of 100 \(40%\) · copying · attempt 1, running 3 ?s"
                    r" · reported 3 ?s ago · held by w-1$"
                )
            )
            expect(line.locator("progress")).to_have_attribute("value", "40")
            expect(page.locator("#live-head .status").first).to_have_text("running")
            shot(page, tmp_path, "saga-live.png")
            page.evaluate("window.__loaded = 'once'")  # gone if the page loads again
            reason = page.get_by_label("Reason to abort")
            reason.fill("half-typed: the customer cancel")

            clock.advance(4)
            copier.go_on.put(None)
            assert copier.next_report() == 75
            expect(line).to_contain_text(
                re.compile(
                    r"75 of 100 \(75%\) · copying file 75 of the archive · attempt 1,"
                    r" running 7 ?s · reported 0 ?s ago · held by w-1$"
                ),
                timeout=POLLED,
            )
            expect(line.locator("progress")).to_have_attribute("value", "75")
            assert page.evaluate("window.__loaded") == "once"  # refreshed in place
            expect(reason).to_have_value("half-typed: the customer cancel")

            copier.go_on.put(None)
            assert running.result(BOUND).status is SagaStatus.COMPLETED
            status = page.locator("#live-head .status").first
            expect(status).to_have_text("completed", timeout=POLLED)
        finally:  # a failed test leaves no step waiting
            copier.go_on.put(None)
            copier.go_on.put(None)
    # at rest: the page loaded itself once more, whole, and follows no more
    expect(page.locator("#following")).to_have_count(0)
    assert page.evaluate("window.__loaded") is None
    expect(page.locator("script[src='/ui/static/poll.js']")).to_have_count(0)
    expect(page.locator(".progress-line")).to_have_count(0)
    expect(page.get_by_label("Reason to abort")).to_have_count(0)
    expect(page.locator("#live-body")).to_contain_text('{"copied": 100}')
    console.quiet()


# -- 7. a call whose worker went away ------------------------------------------------------


def test_a_call_whose_worker_went_away_is_not_shown_running_and_no_worker_is_said(
    console: Console, page: sync_api.Page, tmp_path: Path
) -> None:
    files = Copier().catalogue()  # its calls may last an hour
    plan = parse_plan({"catalogue": "files", "steps": [{"name": "copy_files"}]})

    async def crashed() -> None:  # w-1 began the copy at NOW, then its process died
        async with SQLiteStore(console.ledger) as store:
            await store.start_worker("w-1", NOW, version="1", catalogues=["files"], beat_every=5)
            crash = CrashAt(CrashSite(Point.AFTER_INTENT, 0))
            orch = Orchestrator(
                store, files, clock=FakeClock(NOW), owner="w-1", hook=crash, lease_ttl=30
            )
            with pytest.raises(SimulatedCrash):
                await orch.execute(plan, saga_id="copy-gone")

    in_thread(crashed())
    clock = FakeClock(NOW + 600)  # ten minutes on: its lease and heartbeats are long stale
    console.serve(lambda: files, clock=clock)
    console.open(page, Role.OPERATOR, "/ui/sagas/copy-gone")

    line = page.locator("#live-body .progress-line")
    expect(line).to_have_text(
        "in doubt until 2026-11-30 13:00:30 UTC (50m 30s from now) · attempt 1 · no live "
        "holder (w-1's lease expired 9m 30s ago): it may still take effect"
    )
    expect(line).not_to_contain_text("running")
    expect(page.locator("#no-worker")).to_have_text(
        "No worker is alive to run this saga (the call of copy_files (step 0) has no live "
        "holder): start one over this ledger with pivotal --db URL worker, with the --app "
        "this server runs."
    )
    page.screenshot(path=str(tmp_path / "call-in-doubt.png"), full_page=True)

    clock.advance(HOUR)  # past the call's deadline (and its grace): it can no longer land
    expect(line).to_contain_text("ended, unrecorded · attempt 1 · no live holder", timeout=POLLED)
    page.screenshot(path=str(tmp_path / "call-unrecorded.png"), full_page=True)
    console.quiet()
