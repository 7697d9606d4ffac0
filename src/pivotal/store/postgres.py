"""The shared ledger: PostgreSQL through psycopg 3 with a connection pool.

Many workers on many machines claim from it (``FOR UPDATE SKIP LOCKED`` picks candidates,
one guarded ``UPDATE … RETURNING`` claims), are fenced by lease epochs exactly as on SQLite,
and are woken by ``LISTEN/NOTIFY`` when work arrives (polling remains the fallback).
Writes go through a group writer (``pg_writer``): the batches of many sagas that arrive
together share one transaction and one round trip, each still fenced on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import logging
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from pivotal.errors import PivotalError, SchemaMismatch, StoreError, StoreUnreachable
from pivotal.sagas.state import Event, SagaState
from pivotal.store import queries as q
from pivotal.store import rows
from pivotal.store.pg_merge import pg_sql
from pivotal.store.pg_writer import PgGroupWriter, stepwise
from pivotal.store.primitives import BatchResult, Fetch, Row, Stmt, write_failed
from pivotal.store.schema import POSTGRES_MIGRATIONS
from pivotal.store.sql import SQLStore

T = TypeVar("T")
log = logging.getLogger("pivotal.store.postgres")
CHANNEL = q.PG_WORK_CHANNEL
_MIGRATION_LOCK = 0x70697674  # advisory lock key: one migrator at a time
CONNECT_TIMEOUT = 5  # seconds to reach the server, unless the URL says connect_timeout
_SERVER = re.compile(r"connection to server (?:at|on) .*? failed: (.*)$")
_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")


_pg = pg_sql
# The statement-by-statement runner of a batch. Replacing it (as tests do, to act inside a
# transaction before its COMMIT) sends every batch through it, on the writer's careful path.
_stepwise = stepwise


def _url_params(url: str) -> dict[str, Any]:
    """The URL's connection parameters; a malformed URL is refused here, before any try."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        reason = _PASSWORD.sub(r"\1***@", " ".join(str(exc).split()))
        raise StoreError(f"invalid PostgreSQL ledger URL: {reason}") from None
    for port in str(params.get("port") or "").split(","):
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise StoreError(f"invalid PostgreSQL ledger URL: port {port!r} is not a port number")
    return params


def _target(params: Mapping[str, Any]) -> str:
    """Host, port and database a connection goes to, libpq's defaults filled in."""
    env = os.environ
    host = params.get("host") or params.get("hostaddr") or env.get("PGHOST") or "localhost"
    port = params.get("port") or env.get("PGPORT") or "5432"
    user = params.get("user") or env.get("PGUSER")
    if not user:
        with contextlib.suppress(Exception):
            user = getpass.getuser()
    database = params.get("dbname") or env.get("PGDATABASE") or user or "(default)"
    return f"host {host}, port {port}, database {database}"


def _reason(exc: BaseException) -> str:
    """The server's (or the network's) own reason for a failed connection, on one line."""
    lines = str(exc).strip().splitlines()
    first = lines[0].strip() if lines else type(exc).__name__
    found = _SERVER.search(first)
    reason = found.group(1) if found else first
    for prefix in ("connection failed: ", "connection is bad: "):
        reason = reason.removeprefix(prefix)
    reason = re.sub(r"^(?:FATAL|ERROR):\s*", "", reason)
    return " ".join(reason.split()) or type(exc).__name__


class PostgresStore(SQLStore):
    """A ledger in PostgreSQL. ``migrate=True`` applies pending migrations on open;
    otherwise an out-of-date schema is refused with a clear message.

    A malformed URL is refused when the store is made (``StoreError``). Opening connects
    once before the pool starts: a server that cannot be reached, or that refuses the
    connection, fails at once with ``StoreUnreachable`` naming host, port, database and the
    reason given (within ``connect_timeout`` seconds: the URL's, else ``CONNECT_TIMEOUT``).
    """

    dialect = q.POSTGRES

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = False,
        min_size: int = 1,
        max_size: int = 10,
        attempts: int = 3,
    ) -> None:
        params = _url_params(url)  # a malformed URL fails here, at once
        self.url = url
        self.auto_migrate = migrate
        self.attempts = attempts
        self.target = _target(params)
        self._connect: dict[str, Any] = (
            {} if params.get("connect_timeout") else {"connect_timeout": CONNECT_TIMEOUT}
        )
        self._pool = AsyncConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True, **self._connect},
            name="pivotal",
        )
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._writer = self._group_writer()

    def _group_writer(self) -> PgGroupWriter:
        return PgGroupWriter(
            self._pool,
            attempts=self.attempts,
            stepwise=lambda conn, stmts: _stepwise(conn, stmts),
            fast_path=lambda: _stepwise is stepwise,
        )

    def _error(self, exc: psycopg.Error) -> StoreError:
        return StoreError(f"postgres ledger: {exc}".strip())

    # -- lifecycle ----------------------------------------------------------------------

    def _unreachable(self, reason: str) -> StoreUnreachable:
        return StoreUnreachable(
            f"cannot connect to the PostgreSQL ledger at {self.target}: {reason}"
        )

    async def _probe(self) -> None:
        """Connect once, so that a server that cannot be reached (or refuses us) fails at
        once with its own reason, instead of the pool retrying it until its timeout."""
        try:
            conn = await psycopg.AsyncConnection.connect(self.url, **self._connect)
        except psycopg.Error as exc:
            raise self._unreachable(_reason(exc)) from None
        await conn.close()

    async def open(self) -> None:
        await self._probe()
        self._writer = self._group_writer()
        try:
            await self._pool.open(wait=True, timeout=15)
        except PoolTimeout as exc:  # the server went away since the probe
            await self._pool.close()
            raise self._unreachable(_reason(exc)) from exc
        except psycopg.Error as exc:
            await self._pool.close()
            raise self._error(exc) from exc
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
        await self._writer.close()
        await self._pool.close()

    async def __aenter__(self) -> PostgresStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def schema_version(self) -> int:
        found = await self._fetch(self.dialect.schema_exists)
        if not found[0][0]:
            return 0
        return int((await self._fetch(q.SCHEMA_VERSION))[0][0])

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
                await conn.execute(_pg(q.PG_MIGRATION_LOCK), (_MIGRATION_LOCK,))
                await conn.execute(self.dialect.create_schema_version)
                cur = await conn.execute(q.SCHEMA_VERSION)
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
                    await conn.execute(_pg(q.RECORD_SCHEMA_VERSION), (version,))
        except psycopg.Error as exc:
            raise self._error(exc) from exc
        return current, known

    async def truncate(self) -> None:
        """Delete every saga and record, keeping the schema (for tests and resets)."""
        found = await self._fetch(q.PG_USER_TABLES)
        if found:
            await self._batch([Stmt(q.pg_truncate([str(r[0]) for r in found]))])

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
        """Through the group writer: committed, perhaps with other sagas' batches."""
        try:
            return await self._writer.run(stmts)
        except psycopg.Error as exc:
            raise self._error(exc) from exc
        except PivotalError:  # the ledger's own (LeaseLost): as it is
            raise
        except Exception as exc:  # this batch's own failure: only its caller hears of it
            raise write_failed("postgres ledger", exc) from exc

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[Fetch]:
        async with self._pool.connection() as conn:
            await conn.execute(self.dialect.begin_read)
            try:

                async def fetch(sql: str, params: Sequence[Any]) -> list[Row]:
                    cur = await conn.execute(_pg(sql), params)
                    return list(await cur.fetchall())

                yield fetch
            finally:
                await conn.execute(q.COMMIT)

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
        return [Stmt(q.PG_NOTIFY_WORK, (CHANNEL, saga_id))]

    async def _landed(self, after: SagaState, events: Sequence[Event], epoch: int | None) -> bool:
        found = await self._fetch(q.PG_LANDED, (after.saga_id,))
        if not found or not events:
            return False
        version, lease_epoch, *written = found[0]
        last = events[-1]  # ours, if it landed: the same in every column, not only its kind
        ours = (last.type.value, last.at, last.step, last.attempt, rows.dumps(dict(last.data)))
        return (
            version == after.version
            and (epoch is None or lease_epoch == epoch)
            and tuple(written) == ours
        )

    async def wait_for_work(self, seconds: float) -> None:
        try:
            if self._listener is None or self._listener.closed:
                self._listener = await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, **self._connect
                )
                await self._listener.execute(q.PG_LISTEN)
            async for _ in self._listener.notifies(timeout=seconds, stop_after=1):
                return
        except psycopg.Error as exc:
            log.warning("listening for work failed (%s); polling instead", exc)
            if self._listener is not None:
                await self._listener.close()
            self._listener = None
            await asyncio.sleep(seconds)
