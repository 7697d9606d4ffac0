"""The demo ends by relaying its outbox: which customers got an apology, and why."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from rich.console import Console

from pivotal import SQLiteStore
from pivotal.examples.commerce import CommerceServices
from pivotal.examples.commerce.apology import APOLOGY_TRIGGER, TEMPLATE, apology_key
from pivotal.examples.commerce.demo import APOLOGIES, run_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("demo") / "out"
    console = Console(file=io.StringIO(), width=200, record=True)
    asyncio.run(run_demo(folder, console))
    return folder, console.export_text()


def test_the_demo_says_who_got_an_apology_and_why(demo: tuple[Path, str]) -> None:
    _, text = demo
    section = text[text.index(APOLOGIES) :]
    assert "went to the apology handler" in section
    assert (
        "apology to order-4@example.com for order order-4 (demo-4), rolled back: "
        "create_shipment (step 2) failed: Permanent" in section
    )
    assert (
        "apology to customer-4471@example.com for order 4471 (demo-6), rolled back: "
        "authorize_payment (step 1) failed: Permanent" in section
    )
    # the seeded order-3 has an address on record (order-3@example.com), and its plan has
    # no confirmation: the apology goes to the order system's address
    assert (
        "apology to order-3@example.com for order order-3 (demo-3), rolled back: "
        "charge_payment (step 1) failed: Permanent" in section
    )
    assert "no apology" not in section
    assert "demo-8" not in section.split("outcomes")[0]  # compensation_failed: no apology yet
    assert text.index(APOLOGIES) > text.index("planned by a scripted agent")  # after the sagas


async def test_each_apology_was_sent_once_for_its_compensated_message(
    demo: tuple[Path, str],
) -> None:
    folder, _ = demo
    async with SQLiteStore(folder / "pivotal.db") as store:
        compensated = [m for m in await store.messages(limit=1000) if m.type == APOLOGY_TRIGGER]
        pending = await store.messages(status="pending", limit=1000)
    assert sorted(m.saga_id for m in compensated) == ["demo-3", "demo-4", "demo-6"]
    assert pending == []  # the relay ran to idle: every message was delivered
    services = CommerceServices(folder / "commerce.db")
    try:
        sent = services.rows("emails", template=TEMPLATE)
        ids = {m.saga_id: m.id for m in compensated}
        assert sorted(e["key"] for e in sent) == sorted(
            apology_key(ids[s]) for s in ("demo-3", "demo-4", "demo-6")
        )
        assert all(n == 1 for n in services.effects_per_key().values())
    finally:
        services.close()
