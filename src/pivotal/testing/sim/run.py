"""One simulated run: a seed makes the whole story.

Two or three workers (the real ``Worker``: its claims, leases, heartbeats and sweeps) and a
console (a person's acts, and sagas run in its own process) share one real ledger on
virtual time. Sagas come over the run's first minutes; meanwhile hosts go away (at any
await, or between two ledger writes, their reply lost) and come back, pause past a call's
bound or their lease, have their clocks skewed or stepped, and find the ledger out of reach
now and then; providers meet faults; a person acts. Then the world calms down, the person
decides what waits for an approval, every saga comes to rest, and the invariants are
checked against the providers' books.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pivotal.declarations.app import App
from pivotal.declarations.plan import Plan, parse_plan
from pivotal.engine import machine
from pivotal.operations.worker import WorkerConfig
from pivotal.sagas.state import SagaStatus
from pivotal.testing.sim import hosts, ledger, outbox
from pivotal.testing.sim.invariants import check
from pivotal.testing.sim.loop import T0, VirtualLoop
from pivotal.testing.sim.person import Person
from pivotal.testing.sim.providers import COMPENSABLE, RETRIABLE, TIMEOUT
from pivotal.testing.sim.world import QUIET, WORLD, Profile, World, catalogue

CATALOGUE = catalogue()
APP = App([CATALOGUE], name="sim")
LEASE = 30.0
CONFIG = WorkerConfig(
    concurrency=4,
    lease_ttl=LEASE,
    poll_interval=5.0,
    max_inline_wait=2.0,
    sweep_interval=20.0,
    drain_timeout=5.0,
)
# a saga in one of these is not at rest
MOVING = (
    SagaStatus.SUBMITTED,
    SagaStatus.RUNNING,
    SagaStatus.AWAITING_APPROVAL,
    SagaStatus.COMPENSATING,
)
REST_BY = 2 * 3600.0  # a run not at rest this long after it calmed down has a saga stuck


@dataclass(frozen=True)
class Settings:
    """How big a run is."""

    sagas: int = 12  # submitted; a person's re-runs and forks add more
    span: float = 150.0  # seconds over which sagas come and the world misbehaves
    faults: bool = True  # hosts and providers misbehave
    person: bool = True  # a person acts


@dataclass
class Report:
    """What one run came to."""

    seed: int
    settings: Settings
    statuses: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    rows: Counter[str] = field(default_factory=Counter)  # the machine's rows taken
    acts: Counter[str] = field(default_factory=Counter)  # the person's
    faults: Counter[str] = field(default_factory=Counter)  # what the hosts met
    calls: int = 0  # provider calls
    sagas: int = 0
    shown: dict[str, list[str]] = field(default_factory=dict)  # events of the sagas asked for

    def replay(self) -> str:
        """The one command that replays this run."""
        hashed = os.environ.get("PYTHONHASHSEED")
        s = self.settings
        return (
            (f"PYTHONHASHSEED={hashed} " if hashed else "")
            + f"python -m pivotal.testing.sim --seed {self.seed} --sagas {s.sagas} "
            + f"--span {s.span:g}"
            + ("" if s.faults else " --calm")
            + ("" if s.person else " --alone")
        )


def simulate(seed: int, settings: Settings | None = None, show: tuple[str, ...] = ()) -> Report:
    """Run the world of ``seed`` to rest and check it (``show``: sagas whose events the
    report keeps, one line each)."""
    settings = settings or Settings()
    loop = VirtualLoop()
    hosts.track(loop)
    errors: list[str] = []
    loop.set_exception_handler(lambda loop, context: _unhandled(context, errors))
    logged = _Logged()
    root = logging.getLogger("pivotal")
    root.addHandler(logged)
    propagate, root.propagate = root.propagate, False
    try:
        with machine.recording() as rows:
            report = loop.run_until_complete(_run(seed, settings, show))
        report.rows = Counter(rows)
        report.violations += errors + logged.errors
        return report
    finally:
        root.removeHandler(logged)
        root.propagate = propagate
        _close(loop)


class _Logged(logging.Handler):
    """What the program under test logged as a failure of its own (a traceback: a bug)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and not isinstance(record.exc_info[1], hosts.HostGone):
            why = record.exc_info[1]
            self.errors.append(f"logged by {record.name}: {record.getMessage()}: {why!r}")


def _unhandled(context: dict[str, Any], errors: list[str]) -> None:
    """An exception no task retrieved: a bug, unless it is a host going away."""
    exc = context.get("exception")
    if isinstance(exc, (hosts.HostGone, asyncio.CancelledError)):
        return
    errors.append(f"unhandled: {context.get('message')}: {exc!r}")


def _close(loop: asyncio.AbstractEventLoop) -> None:
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.close()


def plan_of(rng: random.Random, n: int) -> Plan:
    """A plan for one of a few accounts: compensable steps (perhaps two side by side), a
    capture perhaps, then retriable steps perhaps."""
    call = {"account": f"a-{rng.randrange(3)}", "amount": str(Decimal(rng.choice((20, 400))))}
    steps: list[Any] = [{"name": name, "args": call} for name in rng.sample(COMPENSABLE, 3)]
    del steps[rng.randint(1, 3) :]
    if len(steps) >= 2 and rng.random() < 0.3:
        steps[-2:] = [{"parallel": steps[-2:]}]
    if rng.random() < 0.7:
        steps.append({"name": "capture", "args": call})
    steps += [{"name": n, "args": call} for n in rng.sample(RETRIABLE, rng.randint(0, 2))]
    return parse_plan(
        {
            "catalogue": "sim",
            "steps": steps,
            "rationale": f"simulated order {n}",
            "provenance": {"actor_type": "agent", "actor_id": "sim-agent"},
        }
    )


async def _run(seed: int, settings: Settings, show: tuple[str, ...]) -> Report:
    rng = random.Random(seed)
    world = World(rng, Profile.draw(rng) if settings.faults else QUIET)
    WORLD.set(world)
    conn = ledger.fresh()
    report = Report(seed, settings)
    console = hosts.Host("console", conn, APP, random.Random(rng.random()), lease_ttl=LEASE)
    # passes ended without progress before a saga is parked for a person: few, most often
    poison = rng.choice((1, 2, 2, 5))
    workers = [_host(rng, settings, conn, f"w{i}", poison) for i in range(rng.choice((2, 3)))]
    for w in workers:
        w.job = _work
    running = [_work(w) for w in workers]
    # the outbox: a relay of its own, which may go away too (a worker's slot among them)
    receiver = outbox.Receiver(random.Random(rng.random()), 0.2 if settings.faults else 0.0)
    relaying = asyncio.Event()
    relay = _host(rng, settings, conn, "relay", poison)
    relay.job = lambda host: host.relay(receiver, relaying)
    workers.append(relay)
    running.append(relay.job(relay))
    person = Person(console, world, random.Random(rng.random()), [])
    director = console.start(
        _direct(rng, settings, console, workers, running, person, report), "director"
    )
    try:
        await director
    finally:
        relaying.set()
        for w in workers:
            if w.worker is not None:
                w.worker.stop()
        await asyncio.gather(*running, return_exceptions=True)
    report.violations += person.violations
    report.violations += await check(console.store, world.bank, CATALOGUE, person.sagas)
    report.violations += await outbox.check(console.store, receiver)
    for saga_id in person.sagas:
        stored = await console.store.load(saga_id)
        if stored is not None:
            report.statuses[stored.state.status.value] += 1
    for saga_id in show:
        report.shown[saga_id] = [
            f"{e.at - T0:9.3f} {e.type.value} step={e.step} {e.data}"
            for e in await console.store.events(saga_id)
        ]
    report.acts = person.acts
    report.calls = world.bank.calls
    report.sagas = len(person.sagas)
    conn.close()
    return report


def _work(host: hosts.Host) -> asyncio.Task[Any]:
    return host.work(CONFIG)


def _host(rng: random.Random, settings: Settings, conn: Any, name: str, poison: int) -> hosts.Host:
    """A worker's host: its clock perhaps off by more than a lease, the ledger perhaps a
    little slow or now and then out of reach (when the world misbehaves)."""
    faulty = settings.faults
    return hosts.Host(
        name,
        conn,
        APP,
        random.Random(rng.random()),
        offset=rng.choice((0.0, 0.0, 5.0, -5.0, 3 * LEASE, -3 * LEASE)) if faulty else 0.0,
        lease_ttl=LEASE,
        latency=rng.choice((0.0, 0.0, 0.01)),
        flaky=rng.choice((0.0, 0.0, 0.02)) if faulty else 0.0,
        poison_after=poison,
    )


async def _direct(
    rng: random.Random,
    settings: Settings,
    console: hosts.Host,
    workers: list[hosts.Host],
    running: list[asyncio.Task[Any]],
    person: Person,
    report: Report,
) -> None:
    """Submit the sagas, misbehave, let a person act; then calm down and wait for rest."""
    loop = asyncio.get_running_loop()
    end = loop.time() + settings.span
    # one run in ten is stormy: hosts freeze between intents and calls, and the ledger
    # fails writes, all along (sagas parked mid-way, where the calm seldom leaves them)
    stormy = settings.faults and rng.random() < 0.1
    due = sorted(rng.uniform(0, settings.span * 0.6) for _ in range(settings.sagas))
    n = 0
    while loop.time() < end:
        await asyncio.sleep(rng.uniform(0.5, 8.0))
        while due and due[0] <= loop.time():
            due.pop(0)
            n += 1
            await _submit(rng, console, person.sagas, n, report)
        if settings.faults:
            _misbehave(rng, settings, workers, running, report)
            if stormy:
                _storm(rng, workers, report)
        if settings.person and person.sagas and rng.random() < 0.5:
            await person.act()
    for i, w in enumerate(workers):  # the world calms down: every host back, on time
        w.paused_until = 0.0
        w.flaky = 0.0
        w.gone_after_writes = None
        w.pause_after_intent = 0.0
        w.bad_writes_until = 0.0
        if not w.alive:
            _restart(rng, settings, workers, running, i, report)
    await _rest(console, person, loop.time() + REST_BY, report)


async def _submit(
    rng: random.Random, console: hosts.Host, sagas: list[str], n: int, report: Report
) -> None:
    plan = plan_of(rng, n)
    saga_id = f"s{n}"
    sagas.append(saga_id)
    if rng.random() < 0.2:  # run at once in the console's own process
        console.start(_contained(console.orchestrator.execute(plan, saga_id=saga_id)), saga_id)
        report.faults["run in the console"] += 1
        return
    await console.orchestrator.submit(plan, saga_id=saga_id)


async def _contained(work: Awaitable[Any]) -> None:
    try:
        await work
    except Exception:  # refused, or its lease taken: a worker goes on with it
        return


def _misbehave(
    rng: random.Random,
    settings: Settings,
    workers: list[hosts.Host],
    running: list[asyncio.Task[Any]],
    report: Report,
) -> None:
    """Now and then: a worker goes away (at once, or after a few more writes), comes back,
    pauses past a call's bound or its lease, or has its clock stepped."""
    roll = rng.random()
    i = rng.randrange(len(workers))
    w = workers[i]
    if not w.alive:
        if roll < 0.5:
            _restart(rng, settings, workers, running, i, report)
        return
    loop = asyncio.get_running_loop()
    if roll < 0.04:
        w.go_away()
        report.faults["a host went away"] += 1
    elif roll < 0.08:
        w.gone_after_writes = w.writes + rng.randint(1, 6)
        report.faults["a host goes away after a write"] += 1
    elif roll < 0.12:
        w.paused_until = loop.time() + rng.uniform(TIMEOUT, 3 * LEASE)
        report.faults["a host paused"] += 1
    elif roll < 0.15:
        w.host_clock.offset += rng.choice((-2 * LEASE, 2 * LEASE, 1.5))
        report.faults["a clock stepped"] += 1
    elif roll < 0.2:
        w.pause_after_intent = rng.uniform(TIMEOUT, LEASE)
        report.faults["a host paused between an intent and its call"] += 1
    elif roll < 0.23:
        for each in workers:  # the ledger's disk has a bad minute: passes end early
            each.bad_writes_until = loop.time() + rng.uniform(20.0, 90.0)
        report.faults["the ledger failed most writes for a while"] += 1


def _storm(rng: random.Random, workers: list[hosts.Host], report: Report) -> None:
    """A stormy run's weather at each turn: a host freezes after its next intent, and the
    ledger fails most writes for a while."""
    loop = asyncio.get_running_loop()
    rng.choice(workers).pause_after_intent = rng.uniform(TIMEOUT, LEASE)
    if rng.random() < 0.2:
        for each in workers:
            each.bad_writes_until = max(each.bad_writes_until, loop.time() + rng.uniform(5, 30))
    report.faults["a storm"] += 1


def _restart(
    rng: random.Random,
    settings: Settings,
    workers: list[hosts.Host],
    running: list[asyncio.Task[Any]],
    i: int,
    report: Report,
) -> None:
    """A new process in place of the one gone, under a new name (its old name is taken
    until its heartbeat is stale)."""
    old = workers[i]
    name = f"{old.name.split('.')[0]}.{rng.randrange(10**6)}"
    workers[i] = new = _host(rng, settings, old.store.conn, name, old.orchestrator.poison_after)
    new.job = old.job or _work
    running.append(new.job(new))
    report.faults["a host came back"] += 1


async def _rest(console: hosts.Host, person: Person, by: float, report: Report) -> None:
    """Wait until every saga is at rest, no dead letter waits for a retry and nothing of
    the world is on its way; the person decides what waits for an approval meanwhile."""
    loop = asyncio.get_running_loop()
    world = WORLD.get()
    store = console.store
    while loop.time() < by:
        await asyncio.sleep(30.0)
        await person.decide_what_waits()
        if world.late or any(world.bank.open.values()):
            continue
        if any([await store.list_sagas(status, limit=1) for status in MOVING]):
            continue
        if any(d.next_retry_at is not None for d in await store.dead_letters("open")):
            continue
        if await store.messages("pending", limit=1):
            continue
        return
    still = [f"{len(world.late)} landings to come"] if world.late else []
    for status in MOVING:
        still += [f"{s.saga_id} {status.value}" for s in await store.list_sagas(status)]
    report.violations.append(f"not at rest {REST_BY:g}s after it calmed down: {still}")
