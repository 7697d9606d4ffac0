"""The outbox's relay side in any SQL ledger: claim due messages, settle deliveries.

(Messages are inserted by ``SQLStore.create`` and ``SQLStore.commit``, in the transaction
of the state change they announce.)

A relay leases messages the way a worker leases sagas: ``lease_owner`` and
``lease_expires_at`` on the row. Of each saga only its oldest pending message is ever a
candidate, so messages reach a receiver in the order of their saga's log, and a message
that failed holds back the later ones of its saga until it is delivered or dead. Claiming
is one guarded ``UPDATE … RETURNING``: on PostgreSQL its candidates are picked ``FOR UPDATE
SKIP LOCKED`` (concurrent relays pass over each other's rows) and the update checks the
lease again, so two relays never hold one message at once; on SQLite the write lock
serialises claims. A claim retried after its reply was lost takes back what its first try
took, since a relay may always re-claim its own leases.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pivotal.sagas.outbox import Message
from pivotal.store.primitives import SQLPrimitives, Stmt
from pivotal.store.queries import OUTBOX_COLUMNS, Dialect
from pivotal.store.rows import message_from_row

PENDING, DELIVERED, DEAD = "pending", "delivered", "dead"
STATUSES = (PENDING, DELIVERED, DEAD)
MAX_ERROR = 2000  # characters of a delivery error kept

# Free for ``owner``: not leased, leased by ``owner`` itself, or its lease ran out.
# Parameters: owner, now.
_FREE = "(lease_owner IS NULL OR lease_owner = ? OR lease_expires_at < ?)"


def claim_sql(lock: str) -> str:
    """Lease due messages, the oldest pending of each saga only. Parameters: (candidates)
    now, owner, now, limit; owner, expires at; (the guard, checked again on each row)
    owner, now. ``lock`` is appended to the candidate selection (PostgreSQL: ``FOR UPDATE
    OF o SKIP LOCKED``). The candidates are materialised once: a subquery under ``IN``
    could be evaluated again and lease more than ``limit``."""
    columns = ", ".join(f"outbox.{c.strip()}" for c in OUTBOX_COLUMNS.split(","))
    return (
        "WITH picked AS MATERIALIZED (SELECT o.seq FROM outbox o "
        "WHERE o.status = 'pending' AND o.next_attempt_at <= ? "
        f"AND {_FREE.replace('lease_', 'o.lease_')} "
        "AND NOT EXISTS (SELECT 1 FROM outbox e WHERE e.saga_id = o.saga_id "
        "AND e.status = 'pending' AND e.seq < o.seq) "
        f"ORDER BY o.seq LIMIT ?{lock}) "
        "UPDATE outbox SET lease_owner = ?, lease_expires_at = ? FROM picked "
        "WHERE outbox.seq = picked.seq AND outbox.status = 'pending' AND "
        f"{_FREE.replace('lease_', 'outbox.lease_')} RETURNING {columns}"
    )


CLAIM_SQLITE = claim_sql("")  # one writer at a time: nothing to skip
CLAIM_POSTGRES = claim_sql(" FOR UPDATE OF o SKIP LOCKED")

# Each settles a message only while ``owner`` holds it (the fence), and frees it.
_SETTLED = "lease_owner = NULL, lease_expires_at = NULL, attempts = attempts + 1"
_HELD = "WHERE id = ? AND lease_owner = ? AND status = 'pending'"
# delivered at, id, owner
SETTLE_DELIVERED = f"UPDATE outbox SET status = 'delivered', delivered_at = ?, {_SETTLED} {_HELD}"
# error, next attempt at, id, owner
SETTLE_RETRY = f"UPDATE outbox SET last_error = ?, next_attempt_at = ?, {_SETTLED} {_HELD}"
# error, id, owner
SETTLE_DEAD = f"UPDATE outbox SET status = 'dead', last_error = ?, {_SETTLED} {_HELD}"
# What a settle wrote, to tell a write that landed before its reply was lost.
SELECT_SETTLED = (
    "SELECT status, delivered_at, last_error, next_attempt_at, lease_owner FROM outbox WHERE id = ?"
)
# now, id: due again, with a fresh count of attempts (its retry policy starts over)
REPLAY = (
    "UPDATE outbox SET status = 'pending', next_attempt_at = ?, attempts = 0, "
    "lease_owner = NULL, lease_expires_at = NULL WHERE id = ? AND status IN ('dead', 'delivered')"
)


def select_messages(
    status: str | None, saga_id: str | None, limit: int
) -> tuple[str, tuple[Any, ...]]:
    """Messages by status and saga (each filter only when given), in outbox order."""
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (("status = ?", status), ("saga_id = ?", saga_id)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    sql = f"SELECT {OUTBOX_COLUMNS} FROM outbox{where} ORDER BY seq LIMIT ?"
    return sql, (*params, limit)


class SQLOutbox(SQLPrimitives):
    """Outbox operations over the backend primitives."""

    dialect: ClassVar[Dialect]  # the store's (``SQLStore`` sets it)

    async def claim_messages(self, owner: str, now: float, ttl: float, limit: int) -> list[Message]:
        if limit < 1:
            return []
        sql = CLAIM_POSTGRES if self.dialect.name == "postgresql" else CLAIM_SQLITE
        params = (now, owner, now, limit, owner, now + ttl, owner, now)
        result = await self._batch([Stmt(sql, params, returning=True)])
        found = [message_from_row(r) for r in result.rows[0]]
        return sorted(found, key=lambda m: m.seq)

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
        kept = None if error is None else error[:MAX_ERROR]
        if delivered:
            stmt = Stmt(SETTLE_DELIVERED, (now, message_id, owner), guard=True)
        elif next_attempt_at is not None:
            stmt = Stmt(SETTLE_RETRY, (kept, next_attempt_at, message_id, owner), guard=True)
        else:
            stmt = Stmt(SETTLE_DEAD, (kept, message_id, owner), guard=True)
        result = await self._batch([stmt])
        if not result.stopped:
            return True
        return await self._settle_landed(message_id, now, delivered, kept, next_attempt_at)

    async def _settle_landed(
        self,
        message_id: str,
        now: float,
        delivered: bool,
        error: str | None,
        next_attempt_at: float | None,
    ) -> bool:
        """Whether a refused settle is in fact our own, landed by an earlier try whose reply
        was lost (a backend that retries after a lost link can meet one)."""
        found = await self._fetch(SELECT_SETTLED, (message_id,))
        if not found:
            return False
        status, delivered_at, last_error, due, lease_owner = found[0]
        if lease_owner is not None:
            return False
        if delivered:
            return bool(status == DELIVERED and delivered_at == now)
        if next_attempt_at is not None:
            return bool(status == PENDING and last_error == error and due == next_attempt_at)
        return bool(status == DEAD and last_error == error)

    async def messages(
        self, status: str | None = None, saga_id: str | None = None, limit: int = 100
    ) -> list[Message]:
        found = await self._fetch(*select_messages(status, saga_id, max(0, limit)))
        return [message_from_row(r) for r in found]

    async def replay_message(self, message_id: str, now: float) -> bool:
        result = await self._batch([Stmt(REPLAY, (now, message_id), guard=True)])
        return not result.stopped
