"""Group commit for PostgreSQL: the write batches of many sagas share one transaction.

One connection writes (taken from the store's pool while batches are queued). While a
group's transaction is on its way, the batches that arrive queue up; the next group takes
them all and sends them in one pipeline: ``BEGIN``, every batch's statements (fewer and
larger ones: ``pg_merge``), ``COMMIT`` and one sync: one round trip and one WAL flush for the
whole group. Nobody hears back before that ``COMMIT`` succeeded, so
intent-before-effect still holds.

On the fast path a fence (``Stmt.fence``) or a guard (``Stmt.guard``) is checked by the
server: the statement is wrapped so that touching the wrong number of rows raises an error,
which aborts the transaction before ``COMMIT`` runs. Any error on the fast path rolls the
whole transaction back, and the group is run again on the careful path: each batch in its
own ``SAVEPOINT``, statement by statement, exactly as a batch alone would run. A refused
fence then rolls back only its own batch (``LeaseLost``) and the others commit.

Whatever else one batch raises while the link holds (a value the driver cannot send, one
too large for its index, statements that cannot be merged, a bug: any ``Exception``) is
that batch's own: on the fast path it sends the group down the careful path, where it rolls
back only its own savepoint and is told to its caller alone; the other batches commit.

A link lost during a group (an ``OperationalError`` that broke the connection) loses the
whole transaction: the group is run again on a fresh connection, up to ``attempts`` times,
as a single batch would be (each caller is safe to repeat; a commit whose first try landed
meets its own fence, and ``_landed`` tells it so; a creation meets its own lease token);
after the last attempt every batch of the group fails with the error. Nothing of a group is
ever half-applied.

A batch queued when no task serves the queue starts one. A task stops serving the moment it
finds the queue empty, before it hands its connection back (which takes a turn of the
loop): a batch queued meanwhile starts a task of its own, instead of waiting for the next
write to start one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import pq
from psycopg_pool import AsyncConnectionPool

from pivotal.store.pg_merge import commands, fast, pg_sql
from pivotal.store.primitives import BatchResult, Stmt, carried

log = logging.getLogger("pivotal.store.postgres")
Conn = psycopg.AsyncConnection[Any]
Runner = Callable[[Conn, Sequence[Stmt]], Awaitable[BatchResult]]


async def stepwise(conn: Conn, stmts: Sequence[Stmt]) -> BatchResult:
    """One statement at a time: a guard may end the batch, a fence may refuse it."""
    result = BatchResult()
    for stmt in stmts:
        async with conn.cursor() as cur:
            if stmt.many:
                await cur.executemany(pg_sql(stmt.sql), stmt.params)
                continue
            await cur.execute(pg_sql(stmt.sql), stmt.params)
            if stmt.returning:
                result.rows.append(list(await cur.fetchall()))
            if stmt.ends_batch(cur.rowcount):
                result.stopped = True
                break
    return result


@dataclass(slots=True)
class _Job:
    stmts: Sequence[Stmt]
    future: asyncio.Future[BatchResult]
    result: BatchResult | None = None
    error: BaseException | None = None

    def deliver(self) -> None:
        if self.future.done():  # cancelled by its caller
            return
        if self.error is not None:
            self.future.set_exception(carried(self.error))
        else:
            self.future.set_result(self.result or BatchResult())


@dataclass
class PgGroupWriter:
    """The write side of a PostgreSQL store: batches queued together commit together."""

    pool: AsyncConnectionPool[Any]
    # Runs one batch statement by statement (the careful path); while ``fast_path()`` is
    # false every group takes the careful path (a seam for instrumenting transactions).
    stepwise: Runner = stepwise
    fast_path: Callable[[], bool] = lambda: True
    attempts: int = 3
    max_group: int = 256
    commits: int = 0  # how many transactions committed ...
    batches: int = 0  # ... carrying how many batches
    _queue: list[_Job] = field(default_factory=list)
    _server: asyncio.Task[None] | None = None  # the task serving the queue, while one does
    _servers: set[asyncio.Task[None]] = field(default_factory=set)  # and those handing back
    _conn: Conn | None = None
    _closed: bool = False

    async def run(self, stmts: Sequence[Stmt]) -> BatchResult:
        """Run ``stmts`` in a transaction (perhaps with others); return once committed."""
        if self._closed:
            raise psycopg.OperationalError("the store is closed")
        job = _Job(stmts, asyncio.get_running_loop().create_future())
        self._queue.append(job)
        if self._server is None or self._server.done():
            self._server = server = asyncio.create_task(self._serve())
            self._servers.add(server)
            server.add_done_callback(self._servers.discard)
        return await job.future

    async def close(self) -> None:
        """Refuse new batches; wait for the ones under way."""
        self._closed = True
        for server in list(self._servers):
            with contextlib.suppress(BaseException):
                await server

    # -- serving ----------------------------------------------------------------------------

    async def _serve(self) -> None:
        """Serve groups while batches are queued, on one pooled connection held meanwhile.

        It stops serving (``_server``) with no ``await`` since its last look at the queue:
        a batch queued later starts a new task, even while this one still hands its
        connection back (it holds none of the writer's state by then)."""
        try:
            while self._queue:
                group, self._queue = self._queue[: self.max_group], self._queue[self.max_group :]
                try:
                    await self._group(group)
                except BaseException as exc:  # cancelled, or a bug: nobody may wait for ever
                    for job in group:
                        job.error = job.error or exc
                        job.deliver()
                    for job in self._queue:
                        job.error = exc
                        job.deliver()
                    self._queue = []
                    raise
        finally:
            self._server = None
            await self._release()

    async def _group(self, group: list[_Job]) -> None:
        for attempt in range(1, self.attempts + 1):
            for job in group:
                job.result, job.error = None, None
            try:
                await self._once(group)
            except psycopg.OperationalError as exc:
                if self._conn is not None and not self._conn.broken:
                    with contextlib.suppress(psycopg.Error):
                        await _rollback(self._conn)
                await self._release()
                if attempt == self.attempts:
                    for job in group:
                        job.error = exc
                    break
                log.warning("postgres link lost (%s); running the group again", exc)
                await asyncio.sleep(0.05 * attempt)
                with contextlib.suppress(psycopg.Error):
                    await self.pool.check()  # drop every idle connection the loss broke
                continue
            except psycopg.Error as exc:  # COMMIT itself refused: nothing was kept
                for job in group:
                    job.error = job.error or exc
            break
        for job in group:
            job.deliver()

    async def _connection(self) -> Conn:
        if self._conn is None:
            self._conn = await self.pool.getconn()
        return self._conn

    async def _release(self) -> None:
        """Give the connection back (the pool drops it if the link is broken)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await self.pool.putconn(conn)

    async def _once(self, group: list[_Job]) -> None:
        conn = await self._connection()
        if self.fast_path() and all(_fast(job) for job in group):
            try:
                await self._fast(conn, group)
                self._count(group)
                return
            except Exception as exc:  # a refused check, or one batch's failure: see below
                if _lost(conn, exc):
                    raise
                await _rollback(conn)
        await self._careful(conn, group)
        self._count(group)

    def _count(self, group: list[_Job]) -> None:
        self.commits += 1
        self.batches += len(group)

    @staticmethod
    async def _fast(conn: Conn, group: list[_Job]) -> None:
        """The whole group in one pipeline: ``BEGIN``, its commands (``pg_merge``),
        ``COMMIT``, one sync. Any error aborts the transaction before its ``COMMIT``."""
        sent: list[tuple[int | None, psycopg.AsyncCursor[Any]]] = []
        async with conn.pipeline() as pipeline:
            try:
                await conn.execute("BEGIN")
                for command in commands([job.stmts for job in group]):
                    cur = conn.cursor()
                    if command.many:
                        await cur.executemany(command.sql, command.params)
                    else:
                        await cur.execute(command.sql, command.params)
                    sent.append((command.owner, cur))
                await conn.execute("COMMIT")
                await pipeline.sync()
            except Exception as exc:
                if not _lost(conn, exc):  # read up to the sync point: the pipeline ends cleanly
                    with contextlib.suppress(psycopg.Error):
                        await pipeline.sync()
                raise
        # Committed: from here on nothing may send the group down the careful path again.
        results = [BatchResult() for _ in group]
        for owner, cur in sent:
            try:
                if owner is not None:
                    results[owner].rows.append(list(await cur.fetchall()))
                await cur.close()
            except Exception as exc:  # its rows cannot be read: its caller is told
                if owner is not None:
                    group[owner].error = group[owner].error or exc
        for job, result in zip(group, results, strict=True):
            job.result = result

    async def _careful(self, conn: Conn, group: list[_Job]) -> None:
        """Each batch in its own savepoint, statement by statement; then one COMMIT."""
        await conn.execute("BEGIN")
        try:
            for job in group:
                await conn.execute("SAVEPOINT batch")
                try:
                    job.result = await self.stepwise(conn, job.stmts)
                except Exception as exc:
                    if _lost(conn, exc):
                        raise
                    # a refused fence (LeaseLost) or statement, a value the driver cannot
                    # send, a bug: this batch's failure alone
                    job.error = exc
                    await conn.execute("ROLLBACK TO SAVEPOINT batch")
                await conn.execute("RELEASE SAVEPOINT batch")
            await conn.execute("COMMIT")
        except psycopg.OperationalError:
            raise
        except BaseException:
            await _rollback(conn)
            raise


def _lost(conn: Conn, exc: Exception) -> bool:
    """Whether ``exc`` lost the link, and with it the group's transaction. PostgreSQL counts
    some errors of one statement's own among its operational ones (a value too large for
    its index, a statement timeout): with the connection still up, they are that batch's."""
    return isinstance(exc, psycopg.OperationalError) and conn.broken


def _fast(job: _Job) -> bool:
    """Whether the batch can go on the fast path; one that cannot even be looked at goes
    on the careful path, which fails it alone."""
    try:
        return fast(job.stmts)
    except Exception:
        return False


async def _rollback(conn: Conn) -> None:
    """End a failed transaction, if the connection is still in one, and forget the
    statements psycopg believes prepared: in a pipeline cut short by an error, the ones
    it was preparing never were (the server skipped them), yet psycopg would use them."""
    conn._prepared.clear()  # the server's are deallocated before the next statement
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        await conn.execute("ROLLBACK")
