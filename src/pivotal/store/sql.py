"""The ledger in SQL, once for every backend.

Backends supply two primitives (``pivotal.store.primitives``): ``_batch`` runs statements
in one write transaction, and ``_snapshot`` yields a fetch function reading one consistent
snapshot. Every statement is named in ``pivotal.store.queries``, written with ``?``
placeholders; a backend with another style translates them, and its variants of shared
statements come from its ``Dialect``. The planning operations come from ``SQLPlanning``.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any, ClassVar

from pivotal.declarations.exposure import still_reserved
from pivotal.declarations.plan import Plan, Provenance
from pivotal.errors import LeaseLost, NameTaken, StoreError, VersionConflict
from pivotal.people.principals import canonical_person
from pivotal.sagas.outbox import messages_for
from pivotal.sagas.state import ApprovalStatus, Event, SagaState, SagaStatus, StepStatus, UndoStatus
from pivotal.store import queries as q
from pivotal.store import rows, search
from pivotal.store.base import (
    DeadLetter,
    PendingApproval,
    Related,
    Reservation,
    SagaPage,
    SagaSummary,
    StoredSaga,
    Token,
)
from pivotal.store.primitives import BatchResult as BatchResult
from pivotal.store.primitives import Fetch as Fetch
from pivotal.store.primitives import Row as Row
from pivotal.store.primitives import Stmt as Stmt
from pivotal.store.schema import SQLITE_MIGRATIONS
from pivotal.store.search import SagaFilter, check_limit
from pivotal.store.sql_ops import SQLOps
from pivotal.store.sql_outbox import SQLOutbox
from pivotal.store.sql_planning import SQLPlanning
from pivotal.store.sql_saved import SQLSaved

_tokens = [uuid.uuid4().hex]  # this process's prefix; a counter makes each token unique
_counter = itertools.count()


def _reseed_tokens() -> None:
    """A forked child draws its own prefix: it must never repeat its parent's tokens."""
    _tokens[0] = uuid.uuid4().hex


os.register_at_fork(after_in_child=_reseed_tokens)


def _token(row: Row) -> Token:
    """A token from its row (``queries.TOKEN_COLUMNS``); the flag is 0 or 1 in the ledger."""
    token_id, name, role, created_at, revoked_at, require_on_behalf_of = row
    return Token(token_id, name, role, created_at, revoked_at, bool(require_on_behalf_of))


def _new_token() -> str:
    """A lease token no other acquisition has: unique in this process by its counter, and
    across processes by the random prefix (one read of the system's randomness per process,
    not per saga)."""
    return f"{_tokens[0]}-{next(_counter)}"


class SQLStore(SQLPlanning, SQLOutbox, SQLOps, SQLSaved):
    """Every store operation, over the two backend primitives."""

    dialect: ClassVar[q.Dialect] = q.SQLITE

    def _notify(self, saga_id: str) -> list[Stmt]:
        """Statements telling idle workers that ``saga_id`` may be runnable (if supported)."""
        return []

    async def wait_for_work(self, seconds: float) -> None:
        """Return when new work may be runnable, or after ``seconds`` (polling)."""
        await asyncio.sleep(seconds)

    # -- sagas --------------------------------------------------------------------------

    async def create(
        self, state: SagaState, plan: Plan, provenance: Provenance, events: Sequence[Event]
    ) -> bool:
        build = functools.partial(self._creation, state, plan, provenance, events, None)
        result = await self._batch_built(build)
        return not result.stopped

    async def create_leased(
        self,
        state: SagaState,
        plan: Plan,
        provenance: Provenance,
        events: Sequence[Event],
        lease: tuple[str, float, float],
    ) -> int | None:
        """``create``, with the saga leased at once to ``lease`` = (owner, ttl, now): its
        first claim rides on its creation, in one commit. The lease's epoch (1), or None
        when a saga with this id exists already (then nothing is written).

        ``state`` may be past its submission (``events`` then start with it): the engine
        creates a saga it runs at once with its first intent, in one commit.

        A creation whose reply was lost (the link dropped after its ``COMMIT``: the writer
        ran it again and met the saga, or gave up) is told by its lease token, which no
        other acquisition has: read back with ours, it is our creation that landed (1);
        with another token, or none, the saga is someone else's (None). When it cannot be
        read back, or is not there after an unknown outcome, the ``StoreError`` stands:
        the pass ends without calling anything."""
        owner, ttl, now = lease
        token = _new_token()
        build = functools.partial(
            self._creation, state, plan, provenance, events, (owner, token, now + ttl)
        )
        try:
            result = await self._batch_built(build)
        except LeaseLost:
            raise
        except StoreError as unknown:  # a lost link, perhaps after the COMMIT: landed?
            exists, holder = await self._created_by(state.saga_id, unknown)
            if not exists:
                raise
        else:
            if not result.stopped:
                return 1
            exists, holder = await self._created_by(state.saga_id, None)
        return 1 if holder == token else None

    async def _created_by(
        self, saga_id: str, unknown: StoreError | None
    ) -> tuple[bool, str | None]:
        """Whether the saga exists, and its lease's token: read back when the reply to a
        creation did not tell whose the saga is. Unreadable, the outcome stays unknown."""
        try:
            found = await self._fetch(q.SELECT_LEASE_TOKEN, (saga_id,))
        except StoreError as exc:
            after = f" ({unknown})" if unknown is not None else ""
            raise StoreError(
                f"whether saga {saga_id} was created is unknown{after}: reading it back "
                f"failed: {exc}"
            ) from exc
        return (True, found[0][0]) if found else (False, None)

    def _creation(
        self,
        state: SagaState,
        plan: Plan,
        provenance: Provenance,
        events: Sequence[Event],
        leased: tuple[str, str, float] | None,
    ) -> list[Stmt]:
        saga = (
            state.saga_id,
            state.catalogue,
            plan.to_json(),
            state.plan_digest,
            state.provenance_ref,
            rows.VALUE[state.status],
            state.reason,
            state.version,
            state.outcomes,
            state.created_at,
            state.updated_at,
            state.wake_at,
            state.traceparent,
        )
        insert = (
            Stmt(q.INSERT_SAGA, saga, guard=True)
            if leased is None
            else Stmt(q.INSERT_SAGA_LEASED, (*saga, *leased), guard=True)
        )
        stmts = [
            Stmt(q.INSERT_PROVENANCE, (state.provenance_ref, provenance.model_dump_json())),
            insert,
            Stmt(
                q.UPSERT_STEP,
                [rows.step_row(state.saga_id, r) for r in state.steps],
                many=True,
            ),
        ]
        subjects = rows.subject_rows(state.saga_id, events)
        if subjects:
            stmts.append(Stmt(q.INSERT_SUBJECT, subjects, many=True))
        reserved = rows.reservation_rows(state.saga_id, events)
        if reserved:  # the value it moves, reserved with the saga: one transaction
            stmts.append(Stmt(q.INSERT_RESERVATION, reserved, many=True))
        # A saga created with the first events of its pass (its first intent, say) may
        # carry what a later commit would write: all of it lands in the same transaction.
        if state.approval is not None:
            stmts.append(Stmt(q.UPSERT_APPROVAL, rows.approval_row(state.saga_id, state.approval)))
        if state.compensating_since is not None:
            stmts.append(Stmt(q.SET_COMPENSATING_SINCE, (state.compensating_since, state.saga_id)))
        stmts += [Stmt(sql, p) for sql, p in rows.dead_letter_changes(state, events)]
        stmts += [self._events(state, events), *self._messages(state, events)]
        if leased is None:  # leased: this process runs it now; nobody else needs waking
            stmts += self._notify(state.saga_id)
        return stmts

    @staticmethod
    def _messages(state: SagaState, events: Sequence[Event]) -> list[Stmt]:
        """The outbox messages these events announce, inserted in the same transaction."""
        found = messages_for(state, events)
        if not found:
            return []
        return [Stmt(q.INSERT_OUTBOX, [rows.outbox_row(m) for m in found], many=True)]

    @staticmethod
    def _events(state: SagaState, events: Sequence[Event]) -> Stmt:
        return Stmt(
            q.INSERT_EVENT,
            [rows.event_row(state.saga_id, state.provenance_ref, e) for e in events],
            many=True,
        )

    async def load(self, saga_id: str) -> StoredSaga | None:
        async def read(fetch: Fetch) -> tuple[list[Row], list[Row], list[Row]]:
            found = await fetch(q.SELECT_SAGA, (saga_id,))
            if not found:
                return [], [], []
            steps = await fetch(q.SELECT_STEPS, (saga_id,))
            approval = await fetch(q.SELECT_APPROVAL, (saga_id,))
            return found, steps, approval

        found, steps, approval = await self._reading(read)
        if not found:
            return None
        state = rows.saga_from_row(
            found[0],
            [rows.step_from_row(r) for r in steps],
            rows.approval_from_row(approval[0]) if approval else None,
        )
        row = found[0]
        state = replace(state, compensating_since=row[13], traceparent=row[14])
        return StoredSaga(state, Plan.model_validate_json(row[10]), int(row[11]), row[12])

    async def commit(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int | None
    ) -> None:
        await self._commit(before, after, events, epoch, release=False)

    async def commit_and_release(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int
    ) -> None:
        """``commit`` at ``epoch``, freeing the lease in the same transaction: for the
        commit that ends a pass (the saga ended, or waits for a person), saving the
        release's own commit."""
        await self._commit(before, after, events, epoch, release=True)

    async def _commit(
        self,
        before: SagaState,
        after: SagaState,
        events: Sequence[Event],
        epoch: int | None,
        *,
        release: bool,
    ) -> None:
        # a partial, not a closure: no cell per local of this frame while the write waits
        build = functools.partial(self._changes, before, after, events, epoch, release)
        try:
            await self._batch_built(build)
        except LeaseLost as exc:
            if await self._landed(after, events, epoch):
                return
            raise await self._refusal(before, epoch, exc) from exc

    def _changes(
        self,
        before: SagaState,
        after: SagaState,
        events: Sequence[Event],
        epoch: int | None,
        release: bool,
    ) -> list[Stmt]:
        """The statements of one commit: the saga fenced by version (and epoch), what
        changed of its steps, approval and dead letters, its events and their messages."""
        params: tuple[Any, ...] = (
            rows.VALUE[after.status],
            after.reason,
            after.version,
            after.outcomes,
            after.updated_at,
            after.wake_at,
            after.compensating_since,
            after.saga_id,
            before.version,
        )
        fence = (
            f"saga {after.saga_id} changed under this writer (expected version "
            f"{before.version}, lease epoch {epoch}); the write was refused"
        )
        if epoch is None:
            update = Stmt(q.UPDATE_SAGA, params, fence=fence)
        else:
            sql = q.UPDATE_SAGA_AND_RELEASE if release else q.UPDATE_SAGA_AT_EPOCH
            update = Stmt(sql, (*params, epoch), fence=fence)
        stmts = [update]
        changed = rows.changed_steps(before, after)
        if changed:
            stmts.append(
                Stmt(q.UPSERT_STEP, [rows.step_row(after.saga_id, r) for r in changed], many=True)
            )
        if after.approval is not None and after.approval != before.approval:
            stmts.append(Stmt(q.UPSERT_APPROVAL, rows.approval_row(after.saga_id, after.approval)))
        stmts += [Stmt(sql, p) for sql, p in rows.dead_letter_changes(after, events)]
        stmts.append(self._events(after, events))
        stmts += self._messages(after, events)
        if epoch is None:  # a decision from outside a worker (approval, operator)
            stmts += self._notify(after.saga_id)
        return stmts

    async def _landed(self, after: SagaState, events: Sequence[Event], epoch: int | None) -> bool:
        """Whether a refused write is in fact our own, landed by an earlier try whose reply
        was lost (only a backend that retries after a lost link can meet one)."""
        return False

    async def _refusal(self, before: SagaState, epoch: int | None, exc: LeaseLost) -> Exception:
        """Tell a lost lease (the epoch moved on) from a version conflict (reload)."""
        found = await self._fetch(q.SELECT_VERSION_AND_EPOCH, (before.saga_id,))
        if found and (epoch is None or int(found[0][1]) == epoch):
            return VersionConflict(
                f"saga {before.saga_id} changed under this writer (version {found[0][0]}, "
                f"expected {before.version}); the write was refused"
            )
        return exc

    async def events(self, saga_id: str) -> list[Event]:
        found = await self._fetch(q.SELECT_EVENTS, (saga_id,))
        return [rows.event_from_row(r) for r in found]

    async def provenance(self, ref: str) -> Provenance | None:
        found = await self._fetch(q.SELECT_PROVENANCE, (ref,))
        return Provenance.model_validate_json(found[0][0]) if found else None

    # -- leases -------------------------------------------------------------------------

    async def claim(self, saga_id: str, owner: str, ttl: float, now: float) -> int | None:
        token = uuid.uuid4().hex
        result = await self._batch(
            [
                Stmt(q.CLAIM, (owner, token, now + ttl, saga_id, now)),
                Stmt(q.SELECT_CLAIMED, (token,), returning=True),
            ]
        )
        found = result.rows[0]
        return int(found[0][1]) if found else None

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
        if catalogues is not None and not catalogues:
            return []  # serves nothing: nothing to claim
        token = uuid.uuid4().hex
        sql, params = q.claim_next(
            self.dialect, (owner, token, now + ttl), now, limit, catalogues, skip
        )
        result = await self._batch(
            [Stmt(sql, params), Stmt(q.SELECT_CLAIMED, (token,), returning=True)]
        )
        return [(str(r[0]), int(r[1])) for r in result.rows[0]]

    async def heartbeat(
        self, owner: str, leases: Mapping[str, int], ttl: float, now: float
    ) -> set[str]:
        result = await self._batch(
            [
                Stmt(q.HEARTBEAT, (now + ttl, saga_id, owner, epoch), returning=True)
                for saga_id, epoch in leases.items()
            ]
        )
        return {str(r[0]) for found in result.rows for r in found}

    async def expire_leases(self, now: float) -> list[str]:
        result = await self._batch([Stmt(q.EXPIRE_LEASES, (now,), returning=True)])
        return [str(r[0]) for r in result.rows[0]]

    async def release(
        self, saga_id: str, epoch: int, error: str | None = None, *, counted: bool = True
    ) -> None:
        if not counted:  # nothing ran: the claim's count is taken back
            reason = (error or "not served by this worker")[:2000]
            released = Stmt(q.RELEASE_UNSERVED, (reason, saga_id, epoch))
        elif error is None:
            released = Stmt(q.RELEASE, (saga_id, epoch))
        else:
            released = Stmt(q.RELEASE_FAILED, (error[:2000], saga_id, epoch))
        await self._batch([released, *self._notify(saga_id)])

    async def record_progress(
        self,
        saga_id: str,
        index: int,
        record: Mapping[str, Any],
        *,
        epoch: int | None,
        renew: tuple[str, float] | None = None,
    ) -> bool:
        text = json.dumps(record, separators=(",", ":"), allow_nan=False)
        stmts = []
        if renew is not None and epoch is not None:
            owner, until = renew
            stmts.append(Stmt(q.RENEW_WITH_PROGRESS, (until, saga_id, owner, epoch), guard=True))
        if epoch is None:
            stmts.append(Stmt(q.SET_PROGRESS, (text, saga_id, index)))
        else:
            fenced = (text, saga_id, index, saga_id, epoch)
            stmts.append(Stmt(q.SET_PROGRESS_FENCED, fenced, guard=True))
        return not (await self._batch(stmts)).stopped

    async def progress_of(self, saga_id: str) -> dict[int, dict[str, Any]]:
        found = await self._fetch(q.SELECT_PROGRESS, (saga_id,))
        return {int(idx): json.loads(text) for idx, text in found}

    # -- operator views -----------------------------------------------------------------

    async def lease_of(self, saga_id: str) -> tuple[str | None, int, float | None] | None:
        """(owner, epoch, expires at) of the saga's lease; owner None when free."""
        found = await self._fetch(q.SELECT_LEASE, (saga_id,))
        return (found[0][0], int(found[0][1]), found[0][2]) if found else None

    async def list_sagas(
        self, status: SagaStatus | None = None, limit: int = 100
    ) -> list[SagaSummary]:
        found = await (
            self._fetch(q.LIST_SAGAS, (limit,))
            if status is None
            else self._fetch(q.LIST_SAGAS_WITH_STATUS, (status.value, limit))
        )
        return [SagaSummary(r[0], r[1], SagaStatus(r[2]), r[3], r[4], r[5]) for r in found]

    async def search_sagas(
        self, filter: SagaFilter, limit: int = 50, cursor: str | None = None
    ) -> SagaPage:
        """One page of the sagas ``filter`` keeps (the SQL is ``SagaFilter``'s: its probes
        choose how it is read): one more row is read than shown, to know whether a next
        page follows. All in one read snapshot."""
        check_limit(limit)
        after, dialect = filter.position(cursor), self.dialect.name

        async def read(fetch: Fetch) -> list[Row]:
            # the filter on another table keeping the fewest sagas, if it keeps few
            lookup, fewest = None, search.FEW
            for n, probe in enumerate(filter.probes(dialect)):
                kept = int((await fetch(*probe))[0][0])
                if kept < fewest:
                    lookup, fewest = n, kept
            return await fetch(*filter.sql(dialect, limit + 1, after, lookup=lookup))

        found = await self._reading(read)
        items = [SagaSummary(r[0], r[1], SagaStatus(r[2]), r[3], r[4], r[5]) for r in found]
        if len(items) <= limit:
            return SagaPage(items, None)
        last = items[limit - 1]
        return SagaPage(
            items[:limit], filter.cursor_after(last.created_at, last.updated_at, last.saga_id)
        )

    async def sagas_updated(
        self, status: SagaStatus, since: float, until: float, limit: int = 100
    ) -> list[SagaSummary]:
        found = await self._fetch(q.LIST_SAGAS_UPDATED, (status.value, since, until, limit))
        return [SagaSummary(r[0], r[1], SagaStatus(r[2]), r[3], r[4], r[5]) for r in found]

    async def pending_approvals(self) -> list[PendingApproval]:
        found = await self._fetch(q.PENDING_APPROVALS, (ApprovalStatus.PENDING.value,))
        return [
            PendingApproval(
                r[0],
                r[12],
                r[13],
                rows.approval_from_row(r),
                Decimal(r[14]) if r[14] is not None else None,
                r[15],
            )
            for r in found
        ]

    async def sagas_naming(self, name: str, value: str, since: float, limit: int) -> list[Related]:
        found = await self._fetch(q.SAGAS_NAMING, (name, value, since, limit))
        return [
            Related(r[0], SagaStatus(r[1]), float(r[2]), Plan.model_validate_json(r[3]))
            for r in found
        ]

    async def reservations(
        self, subject: str, value: str, since: float, limit: int
    ) -> list[Reservation]:
        found = await self._fetch(q.RESERVATIONS, (subject, value, since, limit))
        return [
            Reservation(
                r[0],
                int(r[1]),
                r[2],
                Decimal(r[3]),
                r[4],
                still_reserved(SagaStatus(r[5]), StepStatus(r[6]), UndoStatus(r[7])),
            )
            for r in found
        ]

    async def dead_letters(
        self, status: str | None = "open", *, due_by: float | None = None, id: int | None = None
    ) -> list[DeadLetter]:
        found = await self._fetch(*q.select_dead_letters(status, due_by, id))
        return [DeadLetter(*r) for r in found]

    async def schedule_dead_letter(self, dead_letter_id: int, at: float) -> bool:
        if not 1 <= dead_letter_id < 2**63:
            return False
        found = await self._batch([Stmt(q.SCHEDULE_DEAD_LETTER, (at, dead_letter_id), guard=True)])
        return not found.stopped

    async def schema_versions(self) -> tuple[int, int]:
        found = await self._fetch(q.SCHEMA_VERSION)
        return int(found[0][0]), len(SQLITE_MIGRATIONS)

    # -- bearer tokens of the HTTP API --------------------------------------------------

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
        token = Token(f"tok_{uuid.uuid4().hex[:12]}", name, role, at, None, require_on_behalf_of)
        person = canonical_person(name)
        row = (token.id, name, role, token_hash, at, int(require_on_behalf_of), person)
        if not sole:
            await self._batch([Stmt(q.INSERT_TOKEN, row)])
            return token
        # one creator at a time decides (PostgreSQL's transactions may run side by side;
        # SQLite's writer runs one at a time already)
        lock = (
            [Stmt(q.PG_TOKENS_LOCK, (q.TOKENS_LOCK_KEY,))] if self.dialect.name != "sqlite" else []
        )
        insert = Stmt(q.INSERT_SOLE_TOKEN, (*row, person), guard=True)
        if (await self._batch([*lock, insert])).stopped:
            raise NameTaken(f"{name[:200]!r} names the same person as a live token")
        return token

    async def token_by_hash(self, token_hash: str) -> Token | None:
        found = await self._fetch(q.SELECT_TOKEN_BY_HASH, (token_hash,))
        return _token(found[0]) if found else None

    async def list_tokens(self) -> list[Token]:
        return [_token(r) for r in await self._fetch(q.LIST_TOKENS)]

    async def revoke_token(self, token_id: str, at: float) -> Token | None:
        await self._batch([Stmt(q.REVOKE_TOKEN, (at, token_id))])
        found = await self._fetch(q.SELECT_TOKEN, (token_id,))
        return _token(found[0]) if found else None

    # -- the ledger's clock -------------------------------------------------------------

    async def ledger_time(self) -> float:
        """Seconds since the epoch by the ledger's own clock (PostgreSQL's server time,
        SQLite's: the host's), never a client's."""
        found = await self._fetch(q.LEDGER_TIME[self.dialect.name])
        return float(found[0][0])
