"""The store protocol: the only way the engine, and planning, reach the ledger.

One protocol for everything the ledger keeps: sagas with their steps, approvals, dead
letters and events, and the planning records (runs with their attempts, and escalations),
whose types live beside it in ``pivotal.store.planning_records``. The store never imports
``pivotal.planning``; planning builds on the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol, Self

from pivotal.declarations.plan import Plan, Provenance
from pivotal.records import quick_init
from pivotal.sagas.outbox import Message
from pivotal.sagas.state import ApprovalRecord, Event, SagaState, SagaStatus
from pivotal.store.planning_records import (
    Escalation,
    EscalationStatus,
    PlanningMode,
    PlanningRun,
)
from pivotal.store.saved import SavedSearch
from pivotal.store.search import SagaFilter


@dataclass(frozen=True, slots=True)
class SagaSummary:
    saga_id: str
    catalogue: str
    status: SagaStatus
    reason: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class SagaPage:
    """One page of a search (``Store.search_sagas``): its sagas, and the cursor the next
    page starts after (None: this is the last)."""

    items: list[SagaSummary]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Related:
    """A saga whose plan names a given entity (an order): what exposure across sagas
    counts."""

    saga_id: str
    status: SagaStatus
    updated_at: float
    plan: Plan


@dataclass(frozen=True, slots=True)
class Reservation:
    """Value a saga's step moves for a subject, as the ledger reserved it with the saga:
    ``held`` while it is not released (``exposure.still_reserved``)."""

    saga_id: str
    index: int
    step: str
    amount: Decimal
    currency: str
    held: bool


@dataclass(frozen=True, slots=True)
class PendingApproval:
    saga_id: str
    catalogue: str
    step_name: str
    approval: ApprovalRecord
    # the value the gated step moves, as the saga reserved it (``exposure``); None: none
    amount: Decimal | None = None
    currency: str | None = None

    @property
    def stake(self) -> str | None:
        """The amount at stake with its currency (``EUR 180.00``); None when none is kept."""
        if self.amount is None:
            return None
        return f"{self.currency} {self.amount}" if self.currency else str(self.amount)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An undo that could not run; it waits for an operator or a later retry."""

    id: int
    saga_id: str
    step: int
    step_name: str
    undo_key: str
    error: str | None
    attempts: int
    status: str  # "open" or "resolved"
    created_at: float
    retries: int = 0  # how often it was retried after being parked
    next_retry_at: float | None = None  # None: only an operator will retry it
    resolved_at: float | None = None
    resolution: str | None = None


@dataclass(frozen=True, slots=True)
class Token:
    """A bearer token of the HTTP API: who (``name``) acts in which ``role``. The ledger keeps
    only the hash of the secret."""

    id: str
    name: str
    role: str
    created_at: float
    revoked_at: float | None = None
    # every plan submitted with it must name the person it is for (provenance.on_behalf_of)
    require_on_behalf_of: bool = False


@dataclass(frozen=True, slots=True)
class OpsSnapshot:
    """What the ledger says about the whole system right now (for gauges and alerts): the
    same in every process that reads it, and right across restarts."""

    at: float
    sagas_by_status: Mapping[str, int]  # every status that has sagas
    open_dead_letters: int
    oldest_open_dead_letter_at: float | None
    pending_approvals: int
    oldest_approval_requested_at: float | None
    soonest_approval_expires_at: float | None
    outbox_pending: int
    outbox_dead: int
    oldest_pending_message_at: float | None
    workers_alive: int  # workers whose heartbeat is recent (see ``ops_snapshot``)
    last_worker_heartbeat_at: float | None


# A worker is taken for gone once it missed this many heartbeats in a row (one recorded
# before its beats were, without an interval, once its last beat is a minute old).
MISSED_BEATS = 3
UNKNOWN_BEAT_SPAN = 60.0


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker as the ledger knows it, and the sagas whose leases it holds now."""

    name: str
    started_at: float
    heartbeat_at: float
    stopped_at: float | None  # it said it stopped (its last beat)
    version: str | None  # the Pivotal it runs (None: recorded before versions were)
    catalogues: tuple[str, ...]  # the catalogues it serves
    beat_every: float | None  # seconds between its heartbeats
    leases: tuple[str, ...] = ()  # sagas whose unexpired lease it holds, by id

    def gone_after(self) -> float:
        """Seconds after its last heartbeat past which it is taken for gone."""
        if self.beat_every is None:
            return UNKNOWN_BEAT_SPAN
        return MISSED_BEATS * self.beat_every

    def state(self, now: float) -> str:
        """``stopped`` (it said so), ``alive`` (it beats) or ``stale`` (it went silent:
        crashed, frozen or cut off; another worker may take its name)."""
        if self.stopped_at is not None:
            return "stopped"
        return "alive" if now - self.heartbeat_at <= self.gone_after() else "stale"


@quick_init
@dataclass(frozen=True, slots=True)
class StoredSaga:
    state: SagaState
    plan: Plan
    idle_passes: int = 0  # passes in a row, this one included, that made no progress yet
    last_error: str | None = None  # why the last pass without progress ended, if known


class Store(Protocol):
    """Durable ledger operations. Every write is one transaction.

    ``commit`` is fenced: it applies only when the stored version equals ``before.version``
    and, when ``epoch`` is given, the stored lease epoch equals it; otherwise it writes
    nothing and raises ``LeaseLost`` (the epoch moved on: another holder) or
    ``VersionConflict`` (the lease is still held but the saga changed: reload).

    A lease is exclusive: ``claim`` never re-enters a lease that is held, whoever holds it,
    and each acquisition gets a new epoch. Each claim counts a pass; a commit (progress) or
    a release after a pass that ended well resets the count, and a release not ``counted``
    (the holder could not serve the saga: nothing ran) takes the claim's count back.

    Planning records share the ledger, and its transactions, with the sagas: a run is kept
    with all its attempts at once, and a run with its escalation.
    """

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def create(
        self, state: SagaState, plan: Plan, provenance: Provenance, events: Sequence[Event]
    ) -> bool:
        """Insert a new saga; return False (writing nothing) when the id already exists."""
        ...

    async def load(self, saga_id: str) -> StoredSaga | None: ...

    async def commit(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int | None
    ) -> None: ...

    async def events(self, saga_id: str) -> list[Event]: ...

    async def provenance(self, ref: str) -> Provenance | None: ...

    async def claim(self, saga_id: str, owner: str, ttl: float, now: float) -> int | None:
        """Take the saga's lease if it is free or expired; return the new epoch."""
        ...

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
        """Lease up to ``limit`` runnable sagas; return (saga id, epoch) pairs. Only sagas
        of ``catalogues`` when given (the ones the claiming worker serves; none when it is
        empty), and never the sagas named in ``skip`` (ones it found it cannot serve)."""
        ...

    async def heartbeat(
        self, owner: str, leases: Mapping[str, int], ttl: float, now: float
    ) -> set[str]:
        """Extend the leases still held at these epochs; return the saga ids still held."""
        ...

    async def record_progress(
        self,
        saga_id: str,
        index: int,
        record: Mapping[str, Any],
        *,
        epoch: int | None,
        renew: tuple[str, float] | None = None,
    ) -> bool:
        """Keep ``record`` as the progress of step ``index``'s call in progress, fenced by
        ``epoch`` (None: unfenced); ``renew`` (owner, expires at) extends the lease with it.
        False: the lease is no longer held at ``epoch``, nothing was written."""
        ...

    async def progress_of(self, saga_id: str) -> dict[int, dict[str, Any]]:
        """The last progress report kept of each step, by step index."""
        ...

    async def expire_leases(self, now: float) -> list[str]:
        """Free leases past their expiry, bumping the epoch so stale holders are fenced."""
        ...

    async def release(
        self, saga_id: str, epoch: int, error: str | None = None, *, counted: bool = True
    ) -> None:
        """Give the lease up; ``error`` says why the pass ended badly (None: it ended well).
        Not ``counted``: nothing ran (the holder cannot serve the saga, ``error`` says why):
        the claim's count of a pass without progress is taken back."""
        ...

    async def wait_for_work(self, seconds: float) -> None:
        """Return when new work may be runnable (a notification), or after ``seconds``."""
        ...

    async def list_sagas(
        self, status: SagaStatus | None = None, limit: int = 100
    ) -> list[SagaSummary]: ...

    async def search_sagas(
        self, filter: SagaFilter, limit: int = 50, cursor: str | None = None
    ) -> SagaPage:
        """The sagas ``filter`` keeps, at most ``limit`` (1 to ``search.MAX_LIMIT``), in its
        order (newest created first by default), starting after ``cursor`` (a page's
        ``next_cursor``). ``InvalidCursor`` for a cursor no search in this order made,
        ``InvalidFilter`` for a limit out of range."""
        ...

    async def sagas_updated(
        self, status: SagaStatus, since: float, until: float, limit: int = 100
    ) -> list[SagaSummary]:
        """The sagas of ``status`` whose last change falls in ``[since, until]``, the most
        recently changed first."""
        ...

    async def lease_of(self, saga_id: str) -> tuple[str | None, int, float | None] | None:
        """(owner, epoch, expires at) of the saga's lease; owner None when free."""
        ...

    async def pending_approvals(self) -> list[PendingApproval]: ...

    async def ledger_time(self) -> float:
        """Seconds since the epoch by the ledger's own clock: every lease stamp, expiry and
        due time is taken from it (``clock.LedgerClock``)."""
        ...

    async def sagas_naming(self, name: str, value: str, since: float, limit: int) -> list[Related]:
        """The sagas whose plans name the entity ``name`` = ``value`` (its canonical id, as
        the submission recorded it) that are still going or changed at or after ``since``;
        newest first, at most ``limit``."""
        ...

    async def reservations(
        self, subject: str, value: str, since: float, limit: int
    ) -> list[Reservation]:
        """The value sagas reserved for ``subject`` (an entity kind: ``"order"``) =
        ``value`` (its canonical id), by sagas still going or parked for a person, or
        changed at or after ``since``; newest first, at most ``limit``, each saying whether
        it is still held."""
        ...

    async def dead_letters(
        self, status: str | None = "open", *, due_by: float | None = None, id: int | None = None
    ) -> list[DeadLetter]: ...

    async def schedule_dead_letter(self, dead_letter_id: int, at: float) -> bool:
        """Make an open dead letter due at ``at`` (a worker's sweep retries it); False when
        there is no open dead letter with that id."""
        ...

    async def schema_versions(self) -> tuple[int, int]:
        """(the ledger's schema version, the version this Pivotal writes)."""
        ...

    # -- bearer tokens of the HTTP API ------------------------------------------------------

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
        """Keep a new token's principal, role and hash (never the token), and whether every
        plan submitted with it must say whom it is for (``provenance.on_behalf_of``).
        ``sole``: refuse it (``NameTaken``, nothing written) when a live token names the same
        person (``principals.canonical_person``), decided in the transaction that would
        write it, so two made at once cannot both be."""
        ...

    async def token_by_hash(self, token_hash: str) -> Token | None:
        """The token with this hash, revoked or not."""
        ...

    async def list_tokens(self) -> list[Token]:
        """Every token, oldest first (never a secret: only hashes are kept)."""
        ...

    async def revoke_token(self, token_id: str, at: float) -> Token | None:
        """Revoke a token (a revoked one keeps its first revocation time); None when there is
        no token with that id."""
        ...

    # -- a person's saved searches (``store.saved``) -----------------------------------------

    async def save_search(self, person: str, name: str, query: str) -> SavedSearch:
        """Keep ``query`` (a search's query, as typed) as the search ``name`` of ``person``
        (a name, kept canonical: ``principals.canonical_person``), replacing theirs of that
        name; times from the ledger's clock. Refused, writing nothing: a query no search
        understands or with paging (``InvalidFilter``), a bad name or no person
        (``InvalidSavedSearch``), a person keeping ``saved.MAX_SAVED`` searches already
        (``SavedSearchesFull``), decided in the transaction that would write."""
        ...

    async def saved_searches(self, person: str) -> list[SavedSearch]:
        """``person``'s saved searches, by name (never another person's)."""
        ...

    async def saved_search(self, person: str, name: str) -> SavedSearch | None:
        """``person``'s saved search ``name``; None when they have none of that name."""
        ...

    async def delete_search(self, person: str, name: str) -> bool:
        """Delete ``person``'s saved search ``name``; False when they had none."""
        ...

    # -- operations ---------------------------------------------------------------------------

    async def ops_snapshot(self, now: float, alive_within: float = 60.0) -> OpsSnapshot:
        """Counts and ages for gauges; a worker is alive when it beat within
        ``alive_within`` seconds and has not said it stopped."""
        ...

    async def beat_worker(self, name: str, now: float, *, stopped: bool = False) -> None:
        """Record that worker ``name`` is alive at ``now`` (or, with ``stopped``, that it
        stopped); the first beat of a name records when it started."""
        ...

    async def start_worker(
        self,
        name: str,
        now: float,
        *,
        version: str,
        catalogues: Sequence[str],
        beat_every: float,
    ) -> WorkerInfo | None:
        """Record that worker ``name`` starts at ``now`` (its first beat), unless a live
        worker has that name (not stopped, and its heartbeat not stale: see
        ``WorkerInfo.state``): then nothing is written and that worker is returned. A name
        whose worker stopped or went stale is taken over (a restart after a crash)."""
        ...

    async def list_workers(self, now: float, limit: int = 100) -> list[WorkerInfo]:
        """The workers recorded, the latest heartbeat first, each with the sagas whose
        lease it holds at ``now`` (unexpired)."""
        ...

    # -- the outbox ---------------------------------------------------------------------------

    async def claim_messages(self, owner: str, now: float, ttl: float, limit: int) -> list[Message]:
        """Lease up to ``limit`` due messages to relay ``owner`` until ``now + ttl``: of each
        saga only its oldest undelivered message (order per saga), and never one that another
        relay holds."""
        ...

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
        """Record a delivery (``delivered``), or a failed one: ``error``, one more attempt,
        and the next at ``next_attempt_at`` (None: retries ran out, the message is dead).
        False, writing nothing, when ``owner`` no longer holds the message."""
        ...

    async def messages(
        self, status: str | None = None, saga_id: str | None = None, limit: int = 100
    ) -> list[Message]:
        """Outbox messages in outbox order (of one status, of one saga)."""
        ...

    async def replay_message(self, message_id: str, now: float) -> bool:
        """Make a dead (or delivered) message due again now; False when there is none."""
        ...

    # -- planning records -------------------------------------------------------------------

    async def record_run(self, run: PlanningRun) -> None:
        """Keep a planning run and all its attempts. Recording the very same run again (a
        retry whose first try landed) changes nothing; another run under its id is refused
        with ``StoreError``."""
        ...

    async def escalate(self, run: PlanningRun, reason: str, at: float) -> Escalation:
        """Keep a run and open an escalation for it, in one transaction; idempotent like
        ``record_run``."""
        ...

    async def runs(
        self, mode: PlanningMode, batch_id: str | None = None, limit: int = 10_000
    ) -> list[PlanningRun]:
        """Planning runs of ``mode`` (of one batch when given), oldest first."""
        ...

    async def run(self, run_id: str) -> PlanningRun | None:
        """One planning run, by its id."""
        ...

    async def escalation_of_run(self, run_id: str) -> Escalation | None:
        """The escalation a planning run ended in, if it did."""
        ...

    async def latest_batch(self, mode: PlanningMode = PlanningMode.SHADOW) -> str | None:
        """The batch id of the latest run of ``mode`` that has one."""
        ...

    async def escalations(
        self, status: EscalationStatus | None = EscalationStatus.OPEN, limit: int = 100
    ) -> list[Escalation]:
        """Escalations (of every status when ``status`` is None), newest first."""
        ...

    async def escalation(self, escalation_id: int) -> Escalation | None: ...

    async def close_escalation(
        self,
        escalation_id: int,
        by: str,
        resolution: str,
        at: float,
        saga_id: str | None = None,
    ) -> Escalation:
        """Close an open escalation; raise ``EscalationClosed`` if it is closed already and
        ``EscalationNotFound`` if there is none with that id."""
        ...
