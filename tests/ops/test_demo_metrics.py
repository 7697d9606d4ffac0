"""After `pivotal demo`, a scrape of ``/metrics`` over the demo's ledger shows every one of
its sagas by status, exactly as ``pivotal sagas list`` does, and its dead letter, its
pending approval and its undelivered messages."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from pivotal import FakeClock, SagaStatus, SQLiteStore
from pivotal.examples.commerce import create_app as commerce_app
from pivotal.people.principals import Role, hash_token
from pivotal.server import create_app

PIVOTAL = Path(sys.executable).parent / "pivotal"


def cli(*args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    done = subprocess.run(
        [str(PIVOTAL), *args],
        capture_output=True,
        text=True,
        env=env | {"COLUMNS": "250", "NO_COLOR": "1"},
        cwd=cwd,
        timeout=55,
        check=False,
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


async def test_the_saga_gauges_match_the_demo_ledger(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    cli("demo", "--out", str(out), cwd=tmp_path)
    ledger = out / "pivotal.db"
    listed = json.loads(cli("--db", f"sqlite:///{ledger}", "sagas", "list", "--json", cwd=tmp_path))
    by_status = Counter(s["status"] for s in listed)
    assert sum(by_status.values()) == 9
    with closing(sqlite3.connect(ledger)) as db:
        [(pending_messages,)] = db.execute("SELECT COUNT(*) FROM outbox WHERE status = 'pending'")

    services = commerce_app(tmp_path / "commerce.db")
    clock = FakeClock()
    try:
        async with SQLiteStore(ledger) as store:
            secret = "pvt_test_demo_viewer"
            await store.create_token("viewer", Role.VIEWER.value, hash_token(secret), clock.now())
            api = create_app(store, services, clock=clock)
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=api),
                base_url="http://pivotal",
                headers={"Authorization": f"Bearer {secret}"},
            ) as http:
                reply = await http.get("/metrics")
    finally:
        services.services.close()

    assert reply.status_code == 200, reply.text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }
    gauges = {
        status.value: samples[("pivotal_sagas", (("status", status.value),))]
        for status in SagaStatus
    }
    assert gauges == {status.value: by_status.get(status.value, 0) for status in SagaStatus}
    # what the demo leaves (see `pivotal demo`): 3 completed, 3 compensated, one each of
    # compensation_failed (its dead letter is open), needs_human and awaiting_approval
    assert {k: v for k, v in gauges.items() if v} == {
        "completed": 3,
        "compensated": 3,
        "compensation_failed": 1,
        "needs_human": 1,
        "awaiting_approval": 1,
    }
    assert samples[("pivotal_dead_letters_open", ())] == 1
    assert samples[("pivotal_approvals_pending", ())] == 1
    assert samples[("pivotal_outbox_pending", ())] == pending_messages
    assert samples[("pivotal_ledger_scrape_error", ())] == 0
