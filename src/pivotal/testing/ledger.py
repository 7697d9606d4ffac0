"""A ledger that fails on purpose: the n-th commit meets a ``StoreError``.

    flaky = flaky_ledger(memory_ledger, [CommitFault(3, StoreFault.AFTER_WRITE)])
    await run_in_process(make_world, scenario, ledger=flaky)

A failed commit ends the engine's pass; the harness then treats the process as crashed (its
lease runs out, the sweeper frees it) and a fresh process recovers from the ledger.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pivotal.declarations.plan import Plan, Provenance
from pivotal.errors import StoreError
from pivotal.sagas.outbox import Message
from pivotal.sagas.state import Event, SagaState, SagaStatus
from pivotal.store.base import (
    DeadLetter,
    OpsSnapshot,
    PendingApproval,
    Related,
    Reservation,
    SagaPage,
    SagaSummary,
    Store,
    StoredSaga,
    Token,
    WorkerInfo,
)
from pivotal.store.planning_records import (
    Escalation,
    EscalationStatus,
    PlanningMode,
    PlanningRun,
)
from pivotal.store.saved import SavedSearch
from pivotal.store.search import SagaFilter
from pivotal.testing.chaos import LedgerFactory
from pivotal.testing.inflight import CURRENT
from pivotal.testing.pause import take_over

_GROUP_WINDOW = 3  # loop turns a lost transaction waits for commits queued with it


class StoreFault(StrEnum):
    """How a commit fails."""

    BEFORE_WRITE = "before_write"  # refused before anything was written: nothing kept
    AFTER_WRITE = "after_write"  # the write landed, the reply was lost: all of it kept
    LOST = "lost"  # lost as a whole, with every commit queued with it: nothing kept
    # held back by a partition from the ledger past the lease, while another process takes
    # the saga over and drives it to rest; then delivered, late (the ledger fences it)
    PARTITIONED = "partitioned"


@dataclass(frozen=True)
class CommitFault:
    """The ``commit``-th commit through the ledger (counting from 1) meets ``kind``."""

    commit: int
    kind: StoreFault

    def __str__(self) -> str:
        return f"commit {self.commit}: {self.kind.value}"


class FlakyStore:
    """A ``Store`` that delegates to ``inner`` and fails the commits ``faults`` name.

    Only ``commit`` fails; every other call goes through. ``fired`` lists the faults met so
    far, ``commits`` counts the commits tried, ``lost_with_group`` the commits lost
    because they were queued with a transaction lost as a whole, and ``partitions`` what
    the other process did while a commit was held back by a partition.
    """

    def __init__(self, inner: Store, faults: Sequence[CommitFault]) -> None:
        self.inner = inner
        self.faults: Mapping[int, StoreFault] = {f.commit: f.kind for f in faults}
        self.fired: list[CommitFault] = []
        self.commits = 0
        self.lost_with_group = 0
        self.partitions: list[str] = []  # what the other process did during each partition
        self._losing = 0  # commits being lost right now, as a group

    async def commit(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int | None
    ) -> None:
        await self._faulty(lambda: self.inner.commit(before, after, events, epoch), after)

    async def commit_and_release(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int
    ) -> None:
        """The commit that ends a pass and frees its lease: counted, and failed, like any
        other commit (only when the inner store can do it; else a commit, then a release)."""
        inner = getattr(type(self.inner), "commit_and_release", None)
        if inner is None:
            await self._faulty(lambda: self.inner.commit(before, after, events, epoch), after)
            await self.inner.release(after.saga_id, epoch)
            return
        await self._faulty(lambda: inner(self.inner, before, after, events, epoch), after)

    async def create_leased(
        self,
        state: SagaState,
        plan: Plan,
        provenance: Provenance,
        events: Sequence[Event],
        lease: tuple[str, float, float],
    ) -> int | None:
        """``create`` with the first claim riding on it (when the inner store can)."""
        inner = getattr(type(self.inner), "create_leased", None)
        if inner is None:
            if not await self.inner.create(state, plan, provenance, events):
                return None
            owner, ttl, now = lease
            return await self.inner.claim(state.saga_id, owner, ttl, now)
        epoch: int | None = await inner(self.inner, state, plan, provenance, events, lease)
        return epoch

    async def _faulty(self, write: Callable[[], Awaitable[None]], after: SagaState) -> None:
        self.commits += 1
        n, kind = self.commits, self.faults.get(self.commits)
        if self._losing:  # queued with a transaction that is being lost: lost with it
            self.lost_with_group += 1
            raise StoreError(f"commit {n}: lost with its group (injected)")
        if kind is None:
            return await write()
        self.fired.append(CommitFault(n, kind))
        if kind is StoreFault.BEFORE_WRITE:
            raise StoreError(f"commit {n}: the ledger refused it (injected)")
        if kind is StoreFault.AFTER_WRITE:
            await write()
            raise StoreError(f"commit {n}: written, but the reply was lost (injected)")
        if kind is StoreFault.PARTITIONED:
            if CURRENT.get() is not None:  # a process of the run (not the harness itself)
                self.partitions.append(await take_over(after.saga_id))
            return await write()
        self._losing += 1
        try:
            for _ in range(_GROUP_WINDOW):  # let the commits of a parallel group queue up
                await asyncio.sleep(0)
        finally:
            self._losing -= 1
        raise StoreError(f"commit {n}: the transaction was lost as a whole (injected)")

    # -- everything else goes straight through ---------------------------------------------

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def __aenter__(self) -> FlakyStore:
        await self.inner.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.close()

    async def create(
        self, state: SagaState, plan: Plan, provenance: Provenance, events: Sequence[Event]
    ) -> bool:
        return await self.inner.create(state, plan, provenance, events)

    async def load(self, saga_id: str) -> StoredSaga | None:
        return await self.inner.load(saga_id)

    async def events(self, saga_id: str) -> list[Event]:
        return await self.inner.events(saga_id)

    async def provenance(self, ref: str) -> Provenance | None:
        return await self.inner.provenance(ref)

    async def claim(self, saga_id: str, owner: str, ttl: float, now: float) -> int | None:
        return await self.inner.claim(saga_id, owner, ttl, now)

    async def claim_next(
        self,
        owner: str,
        ttl: float,
        now: float,
        limit: int,
        *,
        catalogues: Sequence[str] | None = None,
        skip: Sequence[str] = (),
    ) -> list[tuple[str, int]]:
        return await self.inner.claim_next(owner, ttl, now, limit, catalogues=catalogues, skip=skip)

    async def heartbeat(
        self, owner: str, leases: Mapping[str, int], ttl: float, now: float
    ) -> set[str]:
        return await self.inner.heartbeat(owner, leases, ttl, now)

    async def expire_leases(self, now: float) -> list[str]:
        return await self.inner.expire_leases(now)

    async def record_progress(
        self,
        saga_id: str,
        index: int,
        record: Mapping[str, Any],
        *,
        epoch: int | None,
        renew: tuple[str, float] | None = None,
    ) -> bool:
        return await self.inner.record_progress(saga_id, index, record, epoch=epoch, renew=renew)

    async def progress_of(self, saga_id: str) -> dict[int, dict[str, Any]]:
        return await self.inner.progress_of(saga_id)

    async def release(
        self, saga_id: str, epoch: int, error: str | None = None, *, counted: bool = True
    ) -> None:
        await self.inner.release(saga_id, epoch, error, counted=counted)

    async def wait_for_work(self, seconds: float) -> None:
        await self.inner.wait_for_work(seconds)

    async def list_sagas(
        self, status: SagaStatus | None = None, limit: int = 100
    ) -> list[SagaSummary]:
        return await self.inner.list_sagas(status, limit)

    async def sagas_updated(
        self, status: SagaStatus, since: float, until: float, limit: int = 100
    ) -> list[SagaSummary]:
        return await self.inner.sagas_updated(status, since, until, limit)

    async def search_sagas(
        self, filter: SagaFilter, limit: int = 50, cursor: str | None = None
    ) -> SagaPage:
        return await self.inner.search_sagas(filter, limit, cursor)

    async def lease_of(self, saga_id: str) -> tuple[str | None, int, float | None] | None:
        return await self.inner.lease_of(saga_id)

    async def pending_approvals(self) -> list[PendingApproval]:
        return await self.inner.pending_approvals()

    async def ledger_time(self) -> float:
        return await self.inner.ledger_time()

    async def sagas_naming(self, name: str, value: str, since: float, limit: int) -> list[Related]:
        return await self.inner.sagas_naming(name, value, since, limit)

    async def reservations(
        self, subject: str, value: str, since: float, limit: int
    ) -> list[Reservation]:
        return await self.inner.reservations(subject, value, since, limit)

    async def dead_letters(
        self, status: str | None = "open", *, due_by: float | None = None, id: int | None = None
    ) -> list[DeadLetter]:
        return await self.inner.dead_letters(status, due_by=due_by, id=id)

    async def schedule_dead_letter(self, dead_letter_id: int, at: float) -> bool:
        return await self.inner.schedule_dead_letter(dead_letter_id, at)

    async def schema_versions(self) -> tuple[int, int]:
        return await self.inner.schema_versions()

    async def ops_snapshot(self, now: float, alive_within: float = 60.0) -> OpsSnapshot:
        return await self.inner.ops_snapshot(now, alive_within)

    async def beat_worker(self, name: str, now: float, *, stopped: bool = False) -> None:
        await self.inner.beat_worker(name, now, stopped=stopped)

    async def start_worker(
        self,
        name: str,
        now: float,
        *,
        version: str,
        catalogues: Sequence[str],
        beat_every: float,
    ) -> WorkerInfo | None:
        return await self.inner.start_worker(
            name, now, version=version, catalogues=catalogues, beat_every=beat_every
        )

    async def list_workers(self, now: float, limit: int = 100) -> list[WorkerInfo]:
        return await self.inner.list_workers(now, limit)

    async def claim_messages(self, owner: str, now: float, ttl: float, limit: int) -> list[Message]:
        return await self.inner.claim_messages(owner, now, ttl, limit)

    async def settle_message(
        self,
        message_id: str,
        owner: str,
        now: float,
        *,
        delivered: bool,
        error: str | None = None,
        next_attempt_at: float | None = None,
    ) -> bool:
        return await self.inner.settle_message(
            message_id,
            owner,
            now,
            delivered=delivered,
            error=error,
            next_attempt_at=next_attempt_at,
        )

    async def messages(
        self, status: str | None = None, saga_id: str | None = None, limit: int = 100
    ) -> list[Message]:
        return await self.inner.messages(status, saga_id, limit)

    async def replay_message(self, message_id: str, now: float) -> bool:
        return await self.inner.replay_message(message_id, now)

    async def create_token(
        self,
        name: str,
        role: str,
        token_hash: str,
        at: float,
        *,
        require_on_behalf_of: bool = False,
        sole: bool = False,
    ) -> Token:
        return await self.inner.create_token(
            name, role, token_hash, at, require_on_behalf_of=require_on_behalf_of, sole=sole
        )

    async def token_by_hash(self, token_hash: str) -> Token | None:
        return await self.inner.token_by_hash(token_hash)

    async def list_tokens(self) -> list[Token]:
        return await self.inner.list_tokens()

    async def revoke_token(self, token_id: str, at: float) -> Token | None:
        return await self.inner.revoke_token(token_id, at)

    async def save_search(self, person: str, name: str, query: str) -> SavedSearch:
        return await self.inner.save_search(person, name, query)

    async def saved_searches(self, person: str) -> list[SavedSearch]:
        return await self.inner.saved_searches(person)

    async def saved_search(self, person: str, name: str) -> SavedSearch | None:
        return await self.inner.saved_search(person, name)

    async def delete_search(self, person: str, name: str) -> bool:
        return await self.inner.delete_search(person, name)

    async def record_run(self, run: PlanningRun) -> None:
        await self.inner.record_run(run)

    async def escalate(self, run: PlanningRun, reason: str, at: float) -> Escalation:
        return await self.inner.escalate(run, reason, at)

    async def runs(
        self, mode: PlanningMode, batch_id: str | None = None, limit: int = 10_000
    ) -> list[PlanningRun]:
        return await self.inner.runs(mode, batch_id, limit)

    async def run(self, run_id: str) -> PlanningRun | None:
        return await self.inner.run(run_id)

    async def escalation_of_run(self, run_id: str) -> Escalation | None:
        return await self.inner.escalation_of_run(run_id)

    async def latest_batch(self, mode: PlanningMode = PlanningMode.SHADOW) -> str | None:
        return await self.inner.latest_batch(mode)

    async def escalations(
        self, status: EscalationStatus | None = EscalationStatus.OPEN, limit: int = 100
    ) -> list[Escalation]:
        return await self.inner.escalations(status, limit)

    async def escalation(self, escalation_id: int) -> Escalation | None:
        return await self.inner.escalation(escalation_id)

    async def close_escalation(
        self,
        escalation_id: int,
        by: str,
        resolution: str,
        at: float,
        saga_id: str | None = None,
    ) -> Escalation:
        return await self.inner.close_escalation(escalation_id, by, resolution, at, saga_id)


class FlakyLedger:
    """A ``LedgerFactory``: ledgers from ``base`` whose commits meet ``faults`` (each ledger
    opened counts its commits from 1). ``stores`` keeps every one it opened."""

    def __init__(self, base: LedgerFactory, faults: Sequence[CommitFault]) -> None:
        self.base = base
        self.faults = tuple(faults)
        self.stores: list[FlakyStore] = []

    def __call__(self) -> AbstractAsyncContextManager[Store]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Store]:
        async with self.base() as store:
            flaky = FlakyStore(store, self.faults)
            self.stores.append(flaky)
            yield flaky


def flaky_ledger(base: LedgerFactory, faults: Sequence[CommitFault]) -> FlakyLedger:
    """Ledgers from ``base`` whose commits meet ``faults``."""
    return FlakyLedger(base, faults)
