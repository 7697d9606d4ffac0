"""Workers claim runnable sagas under a lease and run them; the sweeper recovers the rest."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import TypeGuard, TypeVar

from pivotal.clock import synced
from pivotal.engine import RunOptions
from pivotal.engine.telemetry import Observers, Telemetry
from pivotal.errors import LeaseLost, PivotalError, SagaUnserved
from pivotal.hooks import Hook
from pivotal.observability.logs import saga_fields
from pivotal.orchestration.orchestrator import Orchestrator
from pivotal.redaction import redact
from pivotal.sagas.lease import Lease
from pivotal.sagas.state import ApprovalStatus, Event, EventType, SagaState, SagaStatus
from pivotal.store.base import WorkerInfo
from pivotal.tracebacks import last_frame

log = logging.getLogger("pivotal.worker")
T = TypeVar("T")

ACTIVE = (SagaStatus.SUBMITTED, SagaStatus.RUNNING, SagaStatus.COMPENSATING)
_ACTIVE_PAGE = 100  # sagas of each active status read to tell whether any is this worker's


def default_name(pid: int | None = None) -> str:
    """A worker's name unless it is given one: ``host-pid``, unique while it runs (``pid``:
    of another process of this host, else this one's)."""
    return f"{socket.gethostname()}-{os.getpid() if pid is None else pid}"


def pivotal_version() -> str:
    try:
        return version("pivotal")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class WorkerNameTaken(PivotalError):
    """A live worker already has this name."""

    code = "worker_name_taken"

    @classmethod
    def of(cls, holder: WorkerInfo, now: float) -> WorkerNameTaken:
        served = ", ".join(holder.catalogues) or "no catalogue named"
        return cls(
            f"a worker named {holder.name!r} is already running: its last heartbeat was "
            f"{max(now - holder.heartbeat_at, 0.0):.1f}s ago (started "
            f"{max(now - holder.started_at, 0.0):.1f}s ago, Pivotal "
            f"{holder.version or 'unknown'}, serving {served}); give this one another "
            f"--name, or stop that one first. A worker that stopped, or whose heartbeat is "
            f"more than {holder.gone_after():g}s old (it crashed), gives its name up"
        )


@dataclass(frozen=True)
class WorkerConfig:
    concurrency: int = 8  # sagas run at once
    lease_ttl: float = 30.0  # seconds a claim lasts without a heartbeat
    poll_interval: float = 0.5  # seconds between looks for new work when idle
    max_inline_wait: float = 2.0  # a retry due later than this releases the saga
    sweep_interval: float = 10.0  # seconds between sweeps
    # after stop(), how long the calls in flight may take to finish and be recorded; then
    # the passes still running are cancelled (their calls abandoned, in doubt until their
    # deadlines: the next worker settles them)
    drain_timeout: float = 30.0
    # a saga this worker cannot serve (its catalogue lacks a step the saga uses: an older
    # build in a rolling deploy) is given back and not claimed again by this worker for
    # this many seconds, doubling at each refusal up to ``unserved_backoff_max``
    unserved_backoff: float = 10.0
    unserved_backoff_max: float = 600.0

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.lease_ttl <= 0 or self.poll_interval <= 0:
            raise ValueError("concurrency, lease_ttl and poll_interval must be positive")
        if self.drain_timeout < 0:
            raise ValueError("drain_timeout must be 0 or more")
        if not 0 < self.unserved_backoff <= self.unserved_backoff_max:
            raise ValueError("unserved_backoff must be positive and at most its maximum")


@dataclass
class SweepReport:
    leases_recovered: list[str] = field(default_factory=list)
    approvals_expired: list[str] = field(default_factory=list)
    dead_letters_retried: int = 0
    dead_letters_settled: int = 0

    def counts(self) -> dict[str, int]:
        return {
            "leases_recovered": len(self.leases_recovered),
            "approvals_expired": len(self.approvals_expired),
            "dead_letters_retried": self.dead_letters_retried,
            "dead_letters_settled": self.dead_letters_settled,
        }


@dataclass
class WorkerStats:
    runs: int = 0  # passes over a saga
    finished: dict[str, int] = field(default_factory=dict)  # final status -> count
    leases_lost: int = 0
    errors: int = 0
    abandoned: int = 0  # passes cancelled when stopping took longer than drain_timeout
    unserved: int = 0  # sagas given back unrun: this worker cannot serve them
    swept: Counter[str] = field(default_factory=Counter)  # what the sweeps did, in totals


# what a failed attempt led to, as a worker's log line says it
_FAILED_ATTEMPTS = {
    EventType.STEP_RETRY_SCHEDULED: "failed; next attempt at {due}",
    EventType.STEP_FAILED: "failed",
    EventType.STEP_UNKNOWN: "failed; its outcome is unknown",
    EventType.UNDO_RETRY_SCHEDULED: "failed; next attempt at {due}",
    EventType.UNDO_DEAD_LETTERED: "failed; dead-lettered",
}


class FailedAttempts(Telemetry):
    """One INFO line per failed attempt of a step or an undo, once the ledger has it: the
    step, the attempt, the error (redacted) and where the user's code raised it."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    def committed(
        self, before: SagaState | None, after: SagaState, events: Sequence[Event]
    ) -> None:
        for e in events:
            said = _FAILED_ATTEMPTS.get(e.type)
            if said is None or e.step is None or e.step >= len(after.steps):
                continue
            name = after.steps[e.step].name
            undo = e.type in (EventType.UNDO_RETRY_SCHEDULED, EventType.UNDO_DEAD_LETTERED)
            what = f"undo of {name}" if undo else name
            due = e.data.get("next_attempt_at")
            when = f"{_clock(due)} (in {max(due - e.at, 0.0):.1f}s)" if _number(due) else "?"
            said = said.format(due=when)
            error = redact(str(e.data.get("error") or ""))[:300]
            frame = last_frame(e.data.get("trace"))
            at = f" (at {frame})" if frame else ""
            attempt = "" if e.attempt is None else f" attempt {e.attempt}"
            log.info(
                "%s: saga %s: %s%s %s: %s%s",
                self.owner,
                after.saga_id,
                what,
                attempt,
                said,
                error,
                at,
                extra={
                    "step": name,
                    "attempt": e.attempt,
                    "fields": {
                        "event": e.type.value,
                        "undo": undo,
                        "error": error,
                        "frame": frame,
                        "next_attempt_at": due,
                    },
                },
            )


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(ts))


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class Sweeper:
    """Frees expired leases, expires approvals past their deadline, retries dead letters."""

    def __init__(self, orchestrator: Orchestrator) -> None:
        self.orchestrator = orchestrator

    async def sweep(self) -> SweepReport:
        """One pass. One saga or dead letter that fails is logged and skipped: the rest of
        the pass goes on."""
        orch, report = self.orchestrator, SweepReport()
        await synced(orch.clock)
        now = orch.clock.now()
        report.leases_recovered = await orch.store.expire_leases(now)
        for pending in await orch.store.pending_approvals():
            a = pending.approval
            if a.status is not ApprovalStatus.PENDING or a.expires_at > now:
                continue
            if pending.catalogue not in orch.app.catalogues:
                continue  # a worker that serves it expires it
            expired = await self._contained(orch.run(pending.saga_id), pending.saga_id)
            if expired is not None:
                report.approvals_expired.append(pending.saga_id)
        for letter in await orch.store.dead_letters("open", due_by=now):
            report.dead_letters_retried += 1
            settled = await self._contained(orch.retry_dead_letter(letter.id), letter.saga_id)
            if settled:
                report.dead_letters_settled += 1
        return report

    @staticmethod
    async def _contained(work: Awaitable[T], saga_id: str) -> T | None:
        with saga_fields(saga_id):  # every line about this saga names it
            return await Sweeper._logged(work, saga_id)

    @staticmethod
    async def _logged(work: Awaitable[T], saga_id: str) -> T | None:
        try:
            return await work
        except LeaseLost:  # another process holds it and will see to it
            return None
        except SagaUnserved as exc:  # a worker of the newer build will see to it
            log.info("sweep: saga %s skipped: %s", saga_id, exc)
        except PivotalError as exc:
            log.warning("sweep: saga %s skipped: %s", saga_id, exc)
        except Exception:
            log.exception("sweep: saga %s skipped", saga_id)
        return None


class Worker:
    """A long-lived loop: claim, run concurrently, heartbeat, sweep, stop gracefully."""

    def __init__(
        self,
        orchestrator: Orchestrator,
        config: WorkerConfig | None = None,
        *,
        hook: Hook | None = None,
    ) -> None:
        self.orchestrator = orchestrator
        self.config = config or WorkerConfig()
        self.hook = hook
        self.stats = WorkerStats()
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: dict[str, asyncio.Task[None]] = {}  # the latest pass of each saga
        # sagas this worker found it cannot serve: saga id -> (not claimed again before
        # this time, refusals in a row)
        self._unserved: dict[str, tuple[float, int]] = {}
        self._stopping = asyncio.Event()
        self._abandoning = asyncio.Event()
        self._started = False  # its start is recorded in the ledger (its name is its own)
        self.abandoned: list[str] = []  # sagas whose passes were cancelled when it stopped
        self.sweeper = Sweeper(orchestrator)
        observers = orchestrator.telemetry.observers
        if not any(isinstance(o, FailedAttempts) for o in observers):  # log each failed attempt
            orchestrator.telemetry = Observers([*observers, FailedAttempts(self.owner)])

    @property
    def owner(self) -> str:
        return self.orchestrator.owner

    @property
    def in_flight(self) -> list[str]:
        """The sagas this worker is running a pass of now, by id."""
        return sorted(s for s, task in self._running.items() if not task.done())

    def stop(self) -> None:
        """Stop claiming; running sagas stop at their next step boundary and are released."""
        self._stopping.set()

    def abandon(self) -> None:
        """Stop, and stop waiting for the passes in flight: they are cancelled at once
        (their calls in doubt, as their intents say; their leases lapse), as when
        ``drain_timeout`` runs out. Their sagas are kept in ``abandoned``."""
        self._stopping.set()
        self._abandoning.set()

    async def run(self, *, until_idle: bool = False) -> WorkerStats:
        """Work until ``stop()``; with ``until_idle``, also stop once no saga is active.

        Heartbeats and sweeps run beside the claiming loop, so a slow sweep (an undo being
        retried) never delays a heartbeat or a claim. While a live worker has its name it
        claims nothing, and says so (see ``take_name``).
        """
        cfg = self.config
        await self.take_name()
        sweeping = asyncio.create_task(self._sweeps())
        beating = asyncio.create_task(self._beats())
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            while not self._stopping.is_set():
                claimed = await self._claim()
                if until_idle and not claimed and not self._tasks and not await self._active():
                    break
                if not claimed:
                    # Wake on a notification (new work), a finished saga, or the poll interval.
                    wake = asyncio.ensure_future(self._wait_for_work(cfg.poll_interval))
                    await asyncio.wait(
                        {stopping, wake, *self._tasks},
                        timeout=cfg.poll_interval,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    wake.cancel()
        finally:
            self._stopping.set()  # the sweep finishes its pass; the heartbeat keeps beating
            stopping.cancel()
            await self._drain(sweeping)
            await beating
        return self.stats

    async def _drain(self, sweeping: asyncio.Task[None]) -> None:
        """Let the passes still running (and the sweep) reach their next step boundary, for
        at most ``drain_timeout`` seconds; then cancel the rest and wait for them."""
        running = {sweeping, *self._tasks}
        waiting = asyncio.ensure_future(asyncio.wait(running, timeout=self.config.drain_timeout))
        giving_up = asyncio.ensure_future(self._abandoning.wait())
        await asyncio.wait({waiting, giving_up}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        giving_up.cancel()
        late = {task for task in running if not task.done()}
        if not late:
            return
        passes = late - {sweeping}
        self.abandoned = sorted(s for s, task in self._running.items() if task in passes)
        log.warning(
            "%s: %d sagas still running %s; their calls are abandoned",
            self.owner,
            len(passes),
            "when told to stop waiting"
            if self._abandoning.is_set()
            else f"after {self.config.drain_timeout:g}s",
        )
        self.stats.abandoned += len(passes)
        for task in late:
            task.cancel()
        await asyncio.wait(late)

    @property
    def beat_interval(self) -> float:
        """Seconds between the worker's own heartbeats in the ledger (idle or not)."""
        return min(self.config.lease_ttl / 3, 10.0)

    async def start(self) -> None:
        """Record in the ledger that this worker starts, with what it is (``run`` does it
        first unless done); raise ``WorkerNameTaken`` when a live worker has its name. A
        ledger that cannot be reached is logged: the heartbeat tries again."""
        orch = self.orchestrator
        now = orch.clock.now()
        try:
            holder = await orch.store.start_worker(
                self.owner,
                now,
                version=pivotal_version(),
                catalogues=list(orch.app.catalogues),
                beat_every=self.beat_interval,
            )
        except PivotalError as exc:
            log.warning("%s: could not record that it started: %s", self.owner, exc)
            return
        if holder is not None:
            raise WorkerNameTaken.of(holder, now)
        self._started = True

    async def take_name(self) -> None:
        """Record this worker's start before it claims anything. While a live worker has
        its name, say so once and try again each beat: that worker may be running (this
        one then waits until it stops), or it crashed and its heartbeat is not stale yet
        (this one starts once it is, as a supervisor restarting it expects). Two workers
        never run under one name at once."""
        said = False
        while not self._started and not self._stopping.is_set():
            try:
                await self.start()
                return  # started, or the ledger could not be reached: the heartbeat retries
            except WorkerNameTaken as exc:
                if not said:
                    log.warning("%s: waiting to start: %s", self.owner, exc)
                    said = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.beat_interval)

    async def _beats(self) -> None:
        """Say in the ledger that this worker is alive, until it stops; then that it
        stopped. A beat that fails is logged; the next one tries again. Until its start
        is recorded it tries that instead; if a live worker took its name meanwhile, this
        one stops."""
        store, clock = self.orchestrator.store, self.orchestrator.clock
        while not self._stopping.is_set():
            try:
                if self._started:
                    await store.beat_worker(self.owner, clock.now())
                else:
                    await self.start()
            except WorkerNameTaken as exc:
                log.error("%s: stopping: %s", self.owner, exc)
                self.stop()
                return
            except Exception as exc:
                log.warning("%s: heartbeat failed: %s", self.owner, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.beat_interval)
        if not self._started:  # the name was never its own: nothing to say
            return
        try:
            await store.beat_worker(self.owner, clock.now(), stopped=True)
        except Exception as exc:
            log.warning("%s: could not record that it stopped: %s", self.owner, exc)

    async def _sweeps(self) -> None:
        """Sweep now and then every ``sweep_interval`` until the worker stops; nothing a
        sweep raises ends the sweeping."""
        while not self._stopping.is_set():
            try:
                await self._sweep()
            except Exception:
                log.exception("%s: sweep failed", self.owner)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.config.sweep_interval)

    async def _wait_for_work(self, seconds: float) -> None:
        try:
            await self.orchestrator.store.wait_for_work(seconds)
        except PivotalError:
            await asyncio.sleep(seconds)

    async def _active(self) -> bool:
        """Whether a saga this worker may run is still going (waiting for a retry, say):
        one of the catalogues it serves, and not one it found it cannot serve. When a page
        of sagas holds none of those but is full, there may be one further on: active."""
        served = self.orchestrator.app.catalogues
        skipped = set(self._skipped(self.orchestrator.clock.now()))
        page = _ACTIVE_PAGE + len(skipped)
        try:
            for status in ACTIVE:
                found = await self.orchestrator.store.list_sagas(status, limit=page)
                if len(found) >= page or any(
                    s.catalogue in served and s.saga_id not in skipped for s in found
                ):
                    return True
        except PivotalError:
            return True
        return False

    def _skipped(self, now: float) -> list[str]:
        """The sagas this worker does not claim now (it cannot serve them, and their
        backoff runs), the latest to end first; forgets the ones long past theirs."""
        forget = self.config.unserved_backoff_max
        for saga_id, (until, _) in list(self._unserved.items()):
            if until + forget < now:
                del self._unserved[saga_id]
        waiting = [(until, s) for s, (until, _) in self._unserved.items() if until > now]
        return [s for _, s in sorted(waiting, reverse=True)]

    def _back_off(self, saga_id: str, now: float) -> float:
        """Skip ``saga_id`` for a while (longer at each refusal in a row); until when."""
        cfg = self.config
        _, refusals = self._unserved.get(saga_id, (now, 0))
        wait = min(cfg.unserved_backoff * 2.0 ** min(refusals, 60), cfg.unserved_backoff_max)
        self._unserved[saga_id] = (now + wait, refusals + 1)
        return now + wait

    async def _claim(self) -> int:
        free = self.config.concurrency - len(self._tasks)
        if free <= 0:
            return 0
        orch = self.orchestrator
        await synced(orch.clock)
        now = orch.clock.now()
        try:
            claims = await orch.store.claim_next(
                self.owner,
                self.config.lease_ttl,
                now,
                free,
                catalogues=list(orch.app.catalogues),  # only sagas of what its app serves
                skip=self._skipped(now),
            )
        except PivotalError as exc:  # the ledger is unreachable: try again next round
            log.warning("%s: claiming failed: %s", self.owner, exc)
            return 0
        for saga_id, epoch in claims:
            # A saga claimed again while an older pass of it still runs here (this process
            # was too slow to renew its lease): adopting the new lease cancels the old pass,
            # and the new one starts only once the old one has ended.
            before = self._running.get(saga_id)
            lease = orch.leases.adopt(saga_id, epoch, self.config.lease_ttl, since=now)
            task = asyncio.create_task(self._run_one(lease, before), name=f"saga {saga_id}")
            self._running[saga_id] = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(functools.partial(self._forget_task, saga_id))
        return len(claims)

    def _forget_task(self, saga_id: str, task: asyncio.Task[None]) -> None:
        if self._running.get(saga_id) is task:
            del self._running[saga_id]

    async def _run_one(self, lease: Lease, before: asyncio.Task[None] | None = None) -> None:
        with saga_fields(lease.saga_id):  # every line about this saga names it
            await self._pass(lease, before)

    async def _pass(self, lease: Lease, before: asyncio.Task[None] | None) -> None:
        orch, saga_id = self.orchestrator, lease.saga_id
        if before is not None:
            await asyncio.wait([before])
        options = RunOptions(
            owner=self.owner,
            max_inline_wait=self.config.max_inline_wait,
            hook=self.hook,
            should_stop=self._stopping.is_set,
        )
        # the commit that ends the pass frees the lease: no release commit after it
        options = orch.leased(lease, options, release=True)
        self.stats.runs += 1
        error: str | None = None
        try:
            state = await orch.leases.guard(lease, orch.drive(saga_id, lease.epoch, options))
        except LeaseLost as exc:
            self.stats.leases_lost += 1
            orch.telemetry.lease_lost(saga_id, self.owner)
            log.warning(
                "%s: lease on saga %s lost; stopped working on it: %s", self.owner, saga_id, exc
            )
            orch.leases.forget(lease)
            return
        except SagaUnserved as exc:  # nothing ran: given back, uncounted, for a newer build
            await self._refuse(lease, exc)
            return
        except PivotalError as exc:  # e.g. the ledger unreachable: a later pass goes on
            self.stats.errors += 1
            error = f"{exc.code}: {exc}"
            log.warning("%s: saga %s stopped in this pass: %s", self.owner, saga_id, exc)
        except Exception as exc:  # a bug: keep the traceback; the poison rule bounds repeats
            self.stats.errors += 1
            error = f"{type(exc).__name__}: {exc}"
            log.exception("%s: saga %s failed in this pass", self.owner, saga_id)
        else:
            if state.status.terminal or state.status is SagaStatus.AWAITING_APPROVAL:
                name = state.status.value
                self.stats.finished[name] = self.stats.finished.get(name, 0) + 1
        try:
            await orch.leases.release(lease, error)
        except PivotalError as exc:  # the lease runs out by itself
            log.warning("%s: releasing saga %s failed: %s", self.owner, saga_id, exc)

    async def _refuse(self, lease: Lease, refusal: SagaUnserved) -> None:
        orch, saga_id = self.orchestrator, lease.saga_id
        self.stats.unserved += 1
        until = self._back_off(saga_id, orch.clock.now())  # before the release: no re-claim
        log.warning(
            "%s: saga %s given back unrun, not claimed here again for %gs: %s",
            self.owner,
            saga_id,
            until - orch.clock.now(),
            refusal,
        )
        try:
            await orch.refuse(lease, refusal)
        except PivotalError as exc:  # the lease runs out by itself
            log.warning("%s: giving back saga %s failed: %s", self.owner, saga_id, exc)

    async def _sweep(self) -> None:
        try:
            report = await self.sweeper.sweep()
        except PivotalError as exc:  # the ledger is unreachable: the next sweep tries again
            log.warning("%s: sweep failed: %s", self.owner, exc)
            return
        self.stats.swept.update(report.counts())
        if report.leases_recovered:
            log.info(
                "%s: recovered %d sagas with expired leases",
                self.owner,
                len(report.leases_recovered),
            )
