"""Real `pivotal worker` processes sharing one ledger: sharing work, and fencing."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from collections import Counter
from typing import Any

import pytest
from cli_harness import open_order
from lock_probes import postgres_sagas_locked, sqlite_write_locked

from pivotal import Orchestrator, SQLiteStore, parse_plan
from pivotal.examples.commerce import CommerceServices, Fault, create_app

# Every wait below is for something to happen; BOUND only turns a hang into a failure.
BOUND = 60.0
pytestmark = pytest.mark.timeout(300)

# The commerce app, whose calls in each worker first wait until every worker has a saga in
# hand: each of them takes part, however late the machine lets one of them start.
READY_APP = """
import asyncio
import dataclasses
import os
from pathlib import Path

from pivotal.examples.commerce import create_app as _create_app

HERE = Path(__file__).parent
WORKERS = 2
_together = False


async def _all_working():
    global _together
    if _together:
        return
    (HERE / f"working-{os.getpid()}").touch()
    while len(list(HERE.glob("working-*"))) < WORKERS:
        await asyncio.sleep(0.02)
    _together = True


def _after_all_working(action):
    async def call(args, ctx):
        await _all_working()
        return await action(args, ctx)

    return call


def create_app():
    app = _create_app(HERE / "commerce.db")
    for catalogue in app:  # this process's own copy: its steps wait for the others
        for step in list(catalogue):
            gated = dataclasses.replace(step, action=_after_all_working(step.action))
            catalogue._steps[step.name] = gated
    (HERE / f"ready-{os.getpid()}").touch()
    return app
"""

SLOW_APP = """
import asyncio
import os
from pathlib import Path

from pydantic import BaseModel

from pivotal import Catalogue, StepContext

HERE = Path(__file__).parent
(HERE / f"ready-{os.getpid()}").touch()


class Args(BaseModel):
    n: int = 1


async def forget(args: Args, result: object, ctx: StepContext) -> None:
    return None


# A call may take 20 s, and may still land 1 s after that: a worker that takes over a saga
# whose call is in flight waits that long before it calls the step again. The blocked call
# must not time out in w1 while w2 starts and runs another saga: on a loaded machine that
# took more than the 2 s this once was (w1 then settled s1 itself, and the test's premise
# was gone); 20 s only makes the takeover wait longer.
app = Catalogue("slow", default_timeout=20, doubt_grace=1)


@app.compensable(undo=forget)
async def block(args: Args, ctx: StepContext) -> dict:
    # The first call ever blocks until the test creates the file "go"; the others return.
    with (HERE / "calls.log").open("a") as log:
        log.write(f"{os.getpid()} {ctx.key} {ctx.attempt}\\n")
    try:
        os.close(os.open(HERE / "first", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return {"blocked": False}
    while not (HERE / "go").exists():
        await asyncio.sleep(0.02)
    return {"blocked": True}


@app.compensable(undo=forget)
async def note(args: Args, ctx: StepContext) -> dict:
    return {"noted": True}
"""

STATS = re.compile(r"worker \S+ stopped: (\d+) passes, .* (\d+) leases lost, (\d+) errors")


def start_worker(cli: Any, name: str, app: str, *options: str) -> subprocess.Popen[str]:
    proc = cli.start("worker", "--poll", "0.05", "--name", name, *options, name=name, app=app)
    ready = cli.tmp / f"ready-{proc.pid}"
    cli.wait_for(ready.exists, BOUND, what=f"{name} to start")
    return proc


def stop(cli: Any, proc: subprocess.Popen[str], name: str) -> tuple[int, int, int]:
    """SIGTERM: a graceful stop exits 0; returns (passes, leases lost, errors)."""
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=BOUND) == 0, cli.output(name)
    out, err = cli.output(name)
    assert "Traceback" not in err, err
    match = STATS.search(out.replace("\n", " "))
    assert match, out
    passes, lost, errors = map(int, match.groups())
    return passes, lost, errors


def by_of(events: list[dict[str, Any]]) -> list[str]:
    return [e["by"] for e in events if e["type"] in ("step_started", "undo_started")]


def checkout(n: int) -> Any:
    order = f"o-{n}"
    return parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "name": "reserve_stock",
                    "args": {"order_id": order, "sku": "sku-1", "quantity": 1},
                },
                {"name": "charge_payment", "args": {"order_id": order, "amount": "10.00"}},
                {"name": "create_shipment", "args": {"order_id": order}},
            ],
        }
    )


def submit_checkouts(cli: Any, count: int) -> None:
    async def submit() -> None:
        app = create_app(cli.tmp / "commerce.db")
        async with SQLiteStore(cli.ledger) as store:
            orchestrator = Orchestrator(store, app)
            for n in range(count):
                open_order(app.services, f"o-{n}", amount="10.00", sku="sku-1", quantity=1)
                await orchestrator.submit(checkout(n), saga_id=f"s{n:02d}")
        app.services.close()

    asyncio.run(submit())


def test_two_workers_share_the_sagas_without_doubling_effects(cli) -> None:
    (cli.tmp / "readyapp.py").write_text(READY_APP)
    services = CommerceServices(cli.tmp / "commerce.db")
    services.faults.next("reserve", Fault.TRANSIENT, Fault.TIMEOUT_AFTER_EFFECT, Fault.TRANSIENT)
    services.faults.next("charge", Fault.PERMANENT, Fault.PERMANENT, Fault.PERMANENT)
    services.faults.next("ship", Fault.PERMANENT, Fault.PERMANENT)
    app = "readyapp:create_app"
    workers = {n: start_worker(cli, n, app, "--concurrency", "2") for n in ("w1", "w2")}

    submit_checkouts(cli, 30)
    terminal = "SELECT COUNT(*) FROM sagas WHERE status IN ('completed', 'compensated')"
    cli.wait_for(lambda: cli.sql(terminal) == [(30,)], BOUND, what="every saga to end")

    assert sorted(p.name for p in cli.tmp.glob("working-*")) == sorted(
        f"working-{proc.pid}" for proc in workers.values()
    )  # both workers ran calls
    stats = {n: stop(cli, proc, n) for n, proc in workers.items()}
    assert sum(passes for passes, _, _ in stats.values()) == 30  # one pass per saga
    assert all(passes > 0 and (lost, errors) == (0, 0) for passes, lost, errors in stats.values())
    states = cli.audit()
    assert Counter(s.status.value for s in states.values()) == {"completed": 25, "compensated": 5}
    for saga_id in states:
        by = by_of(cli.events(saga_id))
        assert set(by) in ({"w1"}, {"w2"}), (saga_id, by)  # one worker ran it
    assert cli.sql("SELECT COUNT(*) FROM sagas WHERE lease_owner IS NOT NULL") == [(0,)]
    per_key = services.effects_per_key()
    assert len(per_key) == 25 * 3 + 3 * 1 + 2 * 2
    assert set(per_key.values()) == {1}
    assert services.available("sku-1", "A") == 50 - 25
    assert len(services.rows("effects", op="refund")) == 2
    services.close()


def freeze(cli: Any, proc: subprocess.Popen[str]) -> None:
    """SIGSTOP ``proc`` at a moment when it holds no write lock on the ledger."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        os.kill(proc.pid, signal.SIGSTOP)
        if not holds_write_lock(cli):
            return
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.05)  # let it finish its transaction, then try again
    raise AssertionError("never found the worker outside a write transaction")


def holds_write_lock(cli: Any) -> bool:
    """Whether a (frozen) process keeps a write transaction open on the ledger."""
    return postgres_sagas_locked(cli.url) if cli.postgres else sqlite_write_locked(cli.ledger)


def test_a_frozen_worker_is_fenced_after_another_claims_its_saga(any_cli) -> None:
    cli = any_cli
    (cli.tmp / "slowapp.py").write_text(SLOW_APP)
    app = "slowapp:app"

    def submit(saga_id: str, *steps: str) -> None:
        plan = {"catalogue": "slow", "steps": [{"name": s, "args": {}} for s in steps]}
        cli.ok("submit", cli.plan(f"{saga_id}.json", plan), "--saga-id", saga_id, app=app)

    def ended(saga_id: str) -> bool:
        query = "SELECT status, lease_owner FROM sagas WHERE saga_id = ?"
        return cli.sql(query, saga_id) == [("completed", None)]

    submit("s1", "block", "note")
    lease = "SELECT lease_owner, lease_epoch FROM sagas WHERE saga_id = 's1'"

    # w1 runs one saga at a time: while its call on s1 blocks, it takes nothing else. Its
    # lease must outlive every stall of its heartbeat while w2 starts and runs s2 (a 3 s
    # lease lapsed on a machine loaded hundreds of times over), and w2 waits for it to lapse
    # once w1 is frozen, so a longer one only makes the test slower by as much.
    w1_options = ("--concurrency", "1", "--lease-ttl", "10", "--sweep-every", "60")
    w1 = start_worker(cli, "w1", app, *w1_options)
    cli.wait_for(lambda: (cli.tmp / "first").exists(), BOUND, what="w1 to start the slow call")
    [(owner, epoch)] = cli.sql(lease)
    assert owner == "w1"
    submit("s2", "note")
    w2 = start_worker(cli, "w2", app, "--lease-ttl", "5", "--sweep-every", "60")
    # w2 has looked for work (it took s2, the other saga, and ran it) and a sweep has run,
    # while w1's lease held: neither took s1 from w1.
    cli.wait_for(lambda: ended("s2"), BOUND, what="w2 to run s2")
    assert by_of(cli.events("s2")) == ["w2"]
    assert cli.json("sweep", app=app)["leases_recovered"] == []
    assert cli.sql(lease) == [("w1", epoch)]

    freeze(cli, w1)
    cli.wait_for(lambda: ended("s1"), BOUND, what="w2 to finish s1")
    # w2 claimed it at a later epoch (more than once if it found the call still in doubt
    # and gave the saga back until the call could no longer land)
    [(holder, taken_at)] = cli.sql(lease)
    assert holder is None
    assert taken_at > epoch
    events = cli.events("s1")
    (cli.tmp / "go").touch()  # w1's call returns as soon as it is thawed
    os.kill(w1.pid, signal.SIGCONT)
    cli.wait_for(
        lambda: "lease on saga s1 lost" in cli.output("w1")[1], BOUND, what="w1 to lose s1"
    )

    assert cli.events("s1") == events  # w1's late write was refused
    assert stop(cli, w1, "w1") == (1, 1, 0)
    assert stop(cli, w2, "w2") == (1 + taken_at - epoch, 0, 0)  # s2, then each claim of s1
    assert [(e["step"], e["attempt"], e["by"]) for e in events if "by" in e] == [
        (0, 1, "w1"),
        (0, 2, "w2"),
        (1, 1, "w2"),
    ]
    assert events[-1]["type"] == "saga_completed"
    assert cli.audit()["s1"].status.value == "completed"
    assert cli.sql(lease) == [(None, taken_at)]  # w1's late write moved nothing
    calls = [line.split()[1:] for line in (cli.tmp / "calls.log").read_text().splitlines()]
    assert calls == [["s1:0", "1"], ["s1:0", "2"]]
