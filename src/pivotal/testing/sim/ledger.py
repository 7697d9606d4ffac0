"""The real ledger, run inline: ``SQLiteStore``'s own statements, schema and reads, over one
in-memory SQLite connection that every simulated host shares, executed on the event loop's
thread (no writer thread: nothing in a run depends on a thread's timing).

Each host reaches the ledger through its own ``SimLedger``, and the world meets every call
there: the request's way out and the reply's way back take time, a paused host waits before
its request leaves, a host that is gone gets nothing done, and a host may go away between
two writes (the write landed, the reply was lost)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

from pivotal.errors import PivotalError
from pivotal.sagas.state import Event, EventType, SagaState
from pivotal.store.primitives import write_failed
from pivotal.store.queries import SQLITE_PRAGMAS
from pivotal.store.sql import BatchResult, Fetch, Row, Stmt
from pivotal.store.sqlite import SQLiteStore
from pivotal.testing.sim.loop import now

T = TypeVar("T")
_INTENTS = frozenset({EventType.STEP_STARTED, EventType.UNDO_STARTED})


_EMPTY: list[sqlite3.Connection] = []  # an empty ledger, migrated once per process


def _connect() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    for pragma in SQLITE_PRAGMAS:
        conn.execute(pragma)
    return conn


def fresh() -> sqlite3.Connection:
    """An empty ledger for one run: a copy of one migrated once (faster than migrating)."""
    if not _EMPTY:
        empty = _connect()
        SQLiteStore(":memory:")._migrate(empty)
        _EMPTY.append(empty)
    conn = _connect()
    _EMPTY[0].backup(conn)
    return conn


class Way(Protocol):
    """How a host's requests reach the ledger, and its replies come back
    (``pivotal.testing.sim.hosts.Host``)."""

    intent: bool  # the write under way holds an intent

    async def request(self, *, write: bool = False) -> None: ...

    async def reply(self, *, wrote: bool = False) -> None: ...


class SimLedger(SQLiteStore):
    """One host's handle on the shared ledger."""

    def __init__(self, conn: sqlite3.Connection, host: Way) -> None:
        super().__init__(":memory:")
        self.conn = conn
        self.host = host

    async def open(self) -> None:
        return None

    async def __aenter__(self) -> SimLedger:
        return self

    async def close(self) -> None:
        return None

    async def ledger_time(self) -> float:
        await self.host.request()
        at = now()
        await self.host.reply()
        return at

    async def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        await self.host.request()
        try:
            result = work(self.conn)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        await self.host.reply()
        return result

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[Fetch]:
        """One read, its statements run at once (nothing else runs between them): one
        snapshot, as a file ledger's reader connection reads."""
        await self.host.request()

        async def fetch(sql: str, params: Sequence[Any]) -> list[Row]:
            try:
                return self.conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

        yield fetch
        await self.host.reply()

    async def _batch_built(self, build: Callable[[], Sequence[Stmt]]) -> BatchResult:
        await self.host.request(write=True)
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = self._run_batch(conn, build())
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise self._error(exc) from exc
        except PivotalError:  # the ledger's own (LeaseLost): as it is
            conn.execute("ROLLBACK")
            raise
        except Exception as exc:
            conn.execute("ROLLBACK")
            raise write_failed("the simulated ledger", exc) from exc
        conn.execute("COMMIT")
        await self.host.reply(wrote=True)
        return result

    async def commit(
        self, before: SagaState, after: SagaState, events: Sequence[Event], epoch: int | None
    ) -> None:
        """A pass's commit; the host may be frozen right after one that holds an intent,
        between it and its call."""
        self.host.intent = any(e.type in _INTENTS for e in events)
        try:
            await super().commit(before, after, events, epoch)
        finally:
            self.host.intent = False

    def lease_row(self, saga_id: str) -> tuple[Any, ...] | None:
        """The saga's lease as the ledger has it now (owner, epoch, expiry), read at once:
        what the world checks a call against, never what the host believes."""
        found = self.conn.execute(
            "SELECT lease_owner, lease_epoch, lease_expires_at FROM sagas WHERE saga_id = ?",
            (saga_id,),
        ).fetchone()
        return None if found is None else tuple(found)
