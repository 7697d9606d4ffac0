"""The shared ledger: PostgreSQL through psycopg 3 with a connection pool.

Many workers on many machines claim from it (``FOR UPDATE SKIP LOCKED`` picks candidates,
one guarded ``UPDATE … RETURNING`` claims), are fenced by lease epochs exactly as on SQLite,
and are woken by ``LISTEN/NOTIFY`` when work arrives (polling remains the fallback).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from pivotal.errors import LeaseLost, SchemaMismatch, StoreError
from pivotal.state import Event, SagaState
from pivotal.store.schema import POSTGRES_MIGRATIONS
from pivotal.store.sql import BatchResult, Fetch, Row, SQLStore, Stmt

T = TypeVar("T")
log = logging.getLogger("pivotal.store.postgres")
CHANNEL = "pivotal_work"
_MIGRATION_LOCK = 0x70697674  # advisory lock key: one migrator at a time


def _pg(sql: str) -> str:
    return sql.replace("?", "%s")


Conn = psycopg.AsyncConnection[Any]


async def _stepwise(conn: Conn, stmts: Sequence[Stmt]) -> BatchResult:
    result = BatchResult()
    for stmt in stmts:
        async with conn.cursor() as cur:
            if stmt.many:
                await cur.executemany(_pg(stmt.sql), stmt.params)
                continue
            await cur.execute(_pg(stmt.sql), stmt.params)
            if stmt.returning:
                result.rows.append(list(await cur.fetchall()))
            if stmt.ends_batch(cur.rowcount):
                result.stopped = True
                break
    return result


async def _pipelined(conn: Conn, stmts: Sequence[Stmt]) -> BatchResult:
    """All statements in one pipeline; a failed fence refuses the whole transaction."""
    cursors = [conn.cursor() for _ in stmts]
    failure: psycopg.Error | None = None
    async with conn.pipeline() as pipeline:
        try:
            for stmt, cur in zip(stmts, cursors, strict=True):
                if stmt.many:
                    await cur.executemany(_pg(stmt.sql), stmt.params)
                else:
                    await cur.execute(_pg(stmt.sql), stmt.params)
            await pipeline.sync()
        except psycopg.errors.IntegrityError as exc:  # e.g. a stale writer's events collide
            failure = exc
            # Read up to the sync point, so that the pipeline ends cleanly: an error met
            # before it (while sending) would otherwise be met again on leaving it.
            with contextlib.suppress(psycopg.Error):
                await pipeline.sync()
    for stmt, cur in zip(stmts, cursors, strict=True):
        if stmt.fence is not None and cur.rowcount != 1:
            raise LeaseLost(stmt.fence) from failure
    if failure is not None:
        raise failure
    result = BatchResult()
    for stmt, cur in zip(stmts, cursors, strict=True):
        if stmt.returning:
            result.rows.append(list(await cur.fetchall()))
        await cur.close()
    return result


class PostgresStore(SQLStore):
    """A ledger in PostgreSQL. ``migrate=True`` applies pending migrations on open;
    otherwise an out-of-date schema is refused with a clear message."""

    skip_locked = " FOR UPDATE SKIP LOCKED"

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = False,
        min_size: int = 1,
        max_size: int = 10,
        attempts: int = 3,
    ) -> None:
        self.url = url
        self.auto_migrate = migrate
        self.attempts = attempts
        self._pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True},
            name="pivotal",
        )
        self._listener: psycopg.AsyncConnection[Any] | None = None

    def _error(self, exc: psycopg.Error) -> StoreError:
        return StoreError(f"postgres ledger: {exc}".strip())

    # -- lifecycle ----------------------------------------------------------------------

    async def open(self) -> None:
        try:
            await self._pool.open(wait=True, timeout=15)
        except psycopg.Error as exc:
            raise self._error(exc) from exc
        except Exception as exc:  # the pool's own timeout error
            raise StoreError(f"postgres ledger unreachable: {exc}") from exc
        try:
            if self.auto_migrate:
                await self.migrate()
            else:
                await self.check_schema()
        except BaseException:
            await self._pool.close()
            raise

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
        await self._pool.close()

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def schema_version(self) -> int:
        found = await self._fetch("SELECT to_regclass('schema_version') IS NOT NULL")
        if not found[0][0]:
            return 0
        return int(
            (await self._fetch("SELECT COALESCE(MAX(version), 0) FROM schema_version"))[0][0]
        )

    async def check_schema(self) -> None:
        current, known = await self.schema_version(), len(POSTGRES_MIGRATIONS)
        if current > known:
            raise SchemaMismatch(
                f"the ledger's schema is version {current}, newer than this Pivotal knows "
                f"({known}); upgrade Pivotal before starting it against this database"
            )
        if current < known:
            raise SchemaMismatch(
                f"the ledger's schema is version {current}, this Pivotal needs {known}; run "
                "`pivotal migrate` (or start the worker with --migrate)"
            )

    async def migrate(self) -> tuple[int, int]:
        """Apply pending migrations under an advisory lock; return (from, to) versions."""
        known = len(POSTGRES_MIGRATIONS)
        try:
            async with self._pool.connection() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                    "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
                cur = await conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_version")
                row = await cur.fetchone()
                current = int(row[0]) if row else 0
                if current > known:
                    raise SchemaMismatch(
                        f"the ledger's schema is version {current}, newer than this Pivotal "
                        f"knows ({known}); upgrade Pivotal"
                    )
                for version in range(current + 1, known + 1):
                    for statement in POSTGRES_MIGRATIONS[version - 1].split(";"):
                        if statement.strip():
                            await conn.execute(statement)
                    await conn.execute(
                        "INSERT INTO schema_version (version) VALUES (%s)", (version,)
                    )
        except psycopg.Error as exc:
            raise self._error(exc) from exc
        return current, known

    async def truncate(self) -> None:
        """Delete every saga and record, keeping the schema (for tests and resets)."""
        found = await self._fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename <> 'schema_version'"
        )
        if found:
            tables = ", ".join(str(r[0]) for r in found)
            await self._batch([Stmt(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")])

    # -- primitives ---------------------------------------------------------------------

    async def _retry(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work``, again on a fresh connection when the link was lost (a server
        restart, a terminated backend). Every caller here is safe to repeat."""
        for attempt in range(1, self.attempts + 1):
            try:
                return await work()
            except psycopg.OperationalError as exc:
                if attempt == self.attempts:
                    raise self._error(exc) from exc
                log.warning("postgres link lost (%s); retrying", exc)
                await asyncio.sleep(0.05 * attempt)
                await self._pool.check()  # drop every idle connection the loss broke
            except psycopg.Error as exc:
                raise self._error(exc) from exc
        raise AssertionError("unreachable")

    async def _batch(self, stmts: Sequence[Stmt]) -> BatchResult:
        # A batch with a guard must stop early; any other goes out in one round trip.
        one_trip = len(stmts) > 1 and not any(stmt.guard for stmt in stmts)
        run = _pipelined if one_trip else _stepwise

        async def once() -> BatchResult:
            async with self._pool.connection() as conn, conn.transaction():
                return await run(conn, stmts)

        return await self._retry(once)

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[Fetch]:
        async with self._pool.connection() as conn:
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:

                async def fetch(sql: str, params: Sequence[Any]) -> list[Row]:
                    cur = await conn.execute(_pg(sql), params)
                    return list(await cur.fetchall())

                yield fetch
            finally:
                await conn.execute("COMMIT")

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """One statement is its own snapshot: no transaction needed."""

        async def once() -> list[Row]:
            async with self._pool.connection() as conn:
                cur = await conn.execute(_pg(sql), params)
                return list(await cur.fetchall())

        return await self._retry(once)

    async def _reading(self, read: Callable[[Fetch], Awaitable[T]]) -> T:
        async def once() -> T:
            async with self._snapshot() as fetch:
                return await read(fetch)

        return await self._retry(once)

    def _notify(self, saga_id: str) -> list[Stmt]:
        return [
            Stmt(
                "SELECT pg_notify(?, saga_id) FROM sagas WHERE saga_id = ? AND "
                "status IN ('submitted', 'running', 'compensating')",
                (CHANNEL, saga_id),
            )
        ]

    async def _landed(self, after: SagaState, events: Sequence[Event], epoch: int | None) -> bool:
        found = await self._fetch(
            "SELECT s.version, s.lease_epoch, e.type, e.at FROM sagas s JOIN events e "
            "ON e.saga_id = s.saga_id AND e.seq = s.version WHERE s.saga_id = ?",
            (after.saga_id,),
        )
        if not found or not events:
            return False
        version, lease_epoch, kind, at = found[0]
        last = events[-1]
        return (
            version == after.version
            and (epoch is None or lease_epoch == epoch)
            and (kind, at) == (last.type.value, last.at)
        )

    async def wait_for_work(self, seconds: float) -> None:
        try:
            if self._listener is None or self._listener.closed:
                self._listener = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                await self._listener.execute(f"LISTEN {CHANNEL}")
            async for _ in self._listener.notifies(timeout=seconds, stop_after=1):
                return
        except psycopg.Error as exc:
            log.warning("listening for work failed (%s); polling instead", exc)
            if self._listener is not None:
                await self._listener.close()
            self._listener = None
            await asyncio.sleep(seconds)
