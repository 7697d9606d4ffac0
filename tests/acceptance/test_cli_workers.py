"""``pivotal workers``: every worker the ledger knows, as a table or JSON: name, state (alive,
stale, stopped), heartbeat age, leases held, Pivotal version, catalogues served."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from cli_harness import InProcess, open_order

from pivotal import SQLiteStore
from pivotal.examples.commerce import CommerceServices


def ledger_with(inproc: InProcess, *workers: tuple[str, float, bool]) -> None:
    """Workers (name, seconds since their last beat, whether it stopped) on the ledger."""

    async def write() -> None:
        async with SQLiteStore(inproc.ledger) as store:
            now = time.time()
            for name, silent, stopped in workers:
                at = now - silent
                taken = await store.start_worker(
                    name, at, version="0.9", catalogues=["checkout"], beat_every=10.0
                )
                assert taken is None
                if stopped:
                    await store.beat_worker(name, at, stopped=True)

    asyncio.run(write())


def checkout(order: str) -> dict[str, Any]:
    calls = [
        ("reserve_stock", {"order_id": order, "sku": "sku-1", "quantity": 2}),
        ("charge_payment", {"order_id": order, "amount": "49.90"}),
        ("create_shipment", {"order_id": order}),
    ]
    return {"catalogue": "checkout", "steps": [{"name": n, "args": a} for n, a in calls]}


def test_no_ledger_is_an_error_and_an_empty_one_has_no_workers(inproc: InProcess) -> None:
    missing = inproc.raw("--db", f"sqlite:///{inproc.tmp / 'missing.db'}", "workers")
    assert missing.exit_code == 2
    assert "no ledger at" in missing.stderr
    assert "no workers have run against this ledger" in inproc.ok("workers")
    assert inproc.json("workers") == []


def test_a_live_a_stale_and_a_stopped_worker_with_the_leases_of_the_live_one(
    inproc: InProcess,
) -> None:
    inproc.ok("migrate")
    ledger_with(
        inproc, ("stale-w", 3600.0, False), ("stopped-w", 120.0, True), ("live-w", 1.0, False)
    )
    services = CommerceServices(inproc.tmp / "commerce.db")
    for n in range(7):
        open_order(services, f"w-{n}", amount="49.90", sku="sku-1", quantity=2)
    services.close()
    for n in range(7):
        inproc.ok("submit", inproc.plan(f"p{n}.json", checkout(f"w-{n}")), "--saga-id", f"s{n}")

    async def claim() -> None:
        async with SQLiteStore(inproc.ledger) as store:
            for n in range(7):
                assert await store.claim(f"s{n}", "live-w", 600, time.time()) is not None

    asyncio.run(claim())

    listed: list[dict[str, Any]] = inproc.json("workers")
    assert [(w["name"], w["state"]) for w in listed] == [
        ("live-w", "alive"),
        ("stopped-w", "stopped"),
        ("stale-w", "stale"),
    ]
    assert listed[0]["leases"] == [f"s{n}" for n in range(7)]
    assert (listed[0]["version"], listed[0]["catalogues"]) == ("0.9", ["checkout"])
    assert listed[2]["heartbeat_age"] >= 3600

    inproc.env["COLUMNS"] = "250"  # one line a worker
    table = inproc.ok("workers")
    rows = [line for line in table.splitlines() if "-w " in line and " leases " not in line]
    lines = {line.split()[0]: line for line in rows}
    assert "alive" in lines["live-w"]
    assert "live-w leases s0, s1, s2, s3, s4, … 2 more" in table.splitlines()
    assert "stale" in lines["stale-w"]
    assert "1h 0m ago" in lines["stale-w"]
    assert "stopped" in lines["stopped-w"]
    # its last beat 120 s before the ledger was made; the commands since take their time
    assert re.search(r"\b2m \d+s ago", lines["stopped-w"]), lines["stopped-w"]
    assert "0.9" in lines["stopped-w"]


def test_the_limit_cuts_the_list_and_says_so(inproc: InProcess) -> None:
    inproc.ok("migrate")
    ledger_with(inproc, *((f"w{n}", float(n), False) for n in range(3)))
    done = inproc("workers", "--limit", "2", "--json")
    assert done.exit_code == 0
    assert [w["name"] for w in json.loads(done.stdout)] == ["w0", "w1"]
    assert "the first 2 workers are shown; --limit N shows more" in done.stderr
    exact = inproc("workers", "--limit", "3")
    assert "shown" not in exact.stdout
