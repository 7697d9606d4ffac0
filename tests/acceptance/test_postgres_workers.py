"""Many worker processes on one PostgreSQL ledger, with a kill, a freeze and lost links."""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from cli_harness import open_order
from lock_probes import provider_call_open, sqlite_write_locked

from pivotal import Orchestrator, Plan, SagaStatus
from pivotal.examples.commerce import STATE_ENV, CommerceServices, Fault, create_app
from pivotal.examples.commerce.chaos import CommerceProbe
from pivotal.store.postgres import PostgresStore
from pivotal.testing import check_invariants

PIVOTAL = str(Path(sys.executable).parent / "pivotal")
APP = "pivotal.examples.commerce:create_app"
SAGAS = 300
RESTING = {"completed", "compensated", "compensation_failed", "needs_human"}
BOUND = 60.0  # every wait is for something to happen; this only turns a hang into a failure
NOTICED = re.compile(r"lease on saga (\S+) (?:was taken over|lost)")


def plans(n: int) -> list[Plan]:
    out = []
    for i in range(n):
        order = f"m-{i}"
        steps: list[dict[str, object]] = [
            {"name": "reserve_stock", "args": {"order_id": order, "sku": "sku-1", "quantity": 1}},
        ]
        if i % 3:
            steps += [
                {"name": "charge_payment", "args": {"order_id": order, "amount": "20"}},
                {"name": "create_shipment", "args": {"order_id": order}},
            ]
            catalogue = "checkout"
        else:
            steps += [
                {"name": "authorize_payment", "args": {"order_id": order, "amount": "20"}},
                {"name": "capture_payment", "args": {"order_id": order, "amount": "20"}},
                {"name": "create_shipment", "args": {"order_id": order}},
            ]
            catalogue = "fulfilment"
        out.append(Plan.model_validate({"catalogue": catalogue, "steps": steps}))
    return out


def schedule_faults(services: CommerceServices, rng: random.Random) -> None:
    choices = [None] * 16 + [Fault.TRANSIENT, Fault.TIMEOUT_AFTER_EFFECT, Fault.PERMANENT]
    for op in ("reserve", "charge", "authorize", "capture", "ship", "release", "refund", "void"):
        services.faults.next(op, *(rng.choice(choices) for _ in range(SAGAS // 2)))


async def submit_all(url: str, state: Path) -> list[str]:
    app = create_app(state)
    app.services.stock("sku-1", "A", 10 * SAGAS)
    for i in range(SAGAS):
        open_order(app.services, f"m-{i}", amount="20", sku="sku-1", quantity=1, customer=f"c-{i}")
    schedule_faults(app.services, random.Random(7))
    async with PostgresStore(url) as store:
        orch = Orchestrator(store, app)
        ids = [(await orch.submit(p, saga_id=f"m{i}")).saga_id for i, p in enumerate(plans(SAGAS))]
    app.services.close()
    return ids


def statuses(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT status, count(*) FROM sagas GROUP BY status").fetchall()
    return {str(s): int(n) for s, n in rows}


def not_at_rest(url: str) -> list[tuple[str, str, str | None, str | None]]:
    """(saga, status, reason, approval reason) of each saga not at rest, to say why."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT s.saga_id, s.status, s.reason, a.reason FROM sagas s "
            "LEFT JOIN approvals a ON a.saga_id = s.saga_id WHERE s.status <> ALL(%s)",
            (sorted(RESTING),),
        ).fetchall()
    return [(str(a), str(b), c, d) for a, b, c, d in rows]


def leases_held(url: str, owner: str) -> dict[str, int]:
    """saga id -> lease epoch of every saga ``owner`` holds."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT saga_id, lease_epoch FROM sagas WHERE lease_owner = %s", (owner,)
        ).fetchall()
    return {str(saga_id): int(epoch) for saga_id, epoch in rows}


def wait_for_leases(url: str, *owners: str) -> None:
    """Until one of ``owners`` holds at least one saga."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        if any(leases_held(url, owner) for owner in owners):
            return
        time.sleep(0.02)
    pytest.fail(f"none of the workers {owners} ever held a lease")


def freeze_holding_leases(
    proc: subprocess.Popen[bytes], url: str, owner: str, state: Path
) -> dict[str, int]:
    """SIGSTOP the worker at a moment it holds leases (read while it is frozen).

    The simulated providers share one SQLite file: a worker frozen inside one of their
    write transactions would stall every provider call, which no real provider does, so
    the freeze is retried until the file is free. It is retried too while the worker is in
    the middle of a provider call: what this test checks is that a thawed worker holding no
    lease makes no new call, not what a call paused halfway does.
    """
    for _ in range(100):
        wait_for_leases(url, owner)
        proc.send_signal(signal.SIGSTOP)
        held = settled_leases(url, owner)
        if held and not sqlite_write_locked(state) and not provider_call_open(state, proc.pid):
            return held
        proc.send_signal(signal.SIGCONT)  # try again a moment later
        time.sleep(0.01)
    pytest.fail(f"could not freeze {owner} while it held a lease")


def settled_leases(url: str, owner: str) -> dict[str, int]:
    """The leases ``owner`` holds once what it sent before it froze has landed: a commit or
    a claim on its way to the server when the signal came still changes them after it.
    Read until two readings a moment apart agree."""
    held = leases_held(url, owner)
    for _ in range(50):
        time.sleep(0.05)
        again = leases_held(url, owner)
        if again == held:
            return held
        held = again
    pytest.fail(f"the leases of frozen {owner} kept changing: {held}")


def wait_until_taken_over(url: str, held: dict[str, int]) -> None:
    """Until every lease in ``held`` has been expired or claimed by another worker."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT saga_id, lease_epoch FROM sagas WHERE saga_id = ANY(%s)", (list(held),)
            ).fetchall()
        if all(int(epoch) > held[str(saga_id)] for saga_id, epoch in rows):
            return
        time.sleep(0.1)
    pytest.fail(f"the frozen worker's leases were never taken over: {held}")


def wait_until_noticed(log: Path, held: dict[str, int]) -> None:
    """Until the worker's log says it lost one of the leases in ``held``."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        if set(NOTICED.findall(log.read_text())) & set(held):
            return
        time.sleep(0.05)
    pytest.fail(f"the thawed worker never noticed it lost its leases: {held}")


def terminate_backends(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


@pytest.mark.timeout(400)
def test_four_workers_survive_a_kill_a_freeze_and_lost_connections(
    postgres_url: str, tmp_path: Path
) -> None:
    state = tmp_path / "commerce.db"
    ids = asyncio.run(submit_all(postgres_url, state))
    env = {**os.environ, STATE_ENV: str(state)}
    logs = {name: (tmp_path / f"{name}.log").open("w") for name in ("w1", "w2", "w3", "w4")}
    workers = {
        name: subprocess.Popen(
            [
                PIVOTAL,
                "--db",
                postgres_url,
                "--app",
                APP,
                "worker",
                "--name",
                name,
                "--concurrency",
                "6",
                "--lease-ttl",
                "2",
                "--poll",
                "0.2",
                "--sweep-every",
                "1",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=logs[name],
        )
        for name in logs
    }
    try:
        wait_for_leases(postgres_url, "w1")
        workers["w1"].send_signal(signal.SIGKILL)  # dies mid-run, leases held
        held = freeze_holding_leases(workers["w2"], postgres_url, "w2", state)
        wait_for_leases(postgres_url, "w3", "w4")  # the others are at work...
        assert terminate_backends(postgres_url) > 0  # ...when every link is cut once
        wait_until_taken_over(postgres_url, held)  # frozen past its lease
        workers["w2"].send_signal(signal.SIGCONT)
        wait_until_noticed(tmp_path / "w2.log", held)  # thawed, it saw it had lost them
        terminate_backends(postgres_url)  # and every link is cut again
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            counts = statuses(postgres_url)
            if sum(n for s, n in counts.items() if s in RESTING) == SAGAS:
                break
            time.sleep(0.5)
        else:
            pytest.fail(
                f"sagas did not come to rest: {statuses(postgres_url)}; {not_at_rest(postgres_url)}"
            )
    finally:
        for proc in workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        exits = {name: proc.wait(timeout=BOUND) for name, proc in workers.items()}
        for handle in logs.values():
            handle.close()
        output = {name: (tmp_path / f"{name}.log").read_text() for name in workers}

    assert exits["w1"] == -signal.SIGKILL
    noticed = set(NOTICED.findall(output["w2"]))
    assert noticed & set(held), output["w2"]  # after thawing, w2 saw it had lost them
    assert {exits[n] for n in ("w2", "w3", "w4")} == {0}, output
    assert "Traceback" not in "".join(output.values())

    async def audit() -> list[str]:
        services = CommerceServices(state)
        try:
            async with PostgresStore(postgres_url) as store:
                found = await check_invariants(store, CommerceProbe(services), ids)
                done = await store.list_sagas(SagaStatus.COMPLETED, limit=SAGAS)
        finally:
            services.close()
        assert len(done) > SAGAS // 3  # most sagas got through the faults
        return [str(v) for v in found]

    assert asyncio.run(audit()) == []
    counts = statuses(postgres_url)
    assert set(counts) <= RESTING, counts
    print(f"final statuses: {counts}")
