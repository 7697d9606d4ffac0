"""One thread owns a SQLite write connection; transactions queued together share a commit.

Group commit: while one commit is on disk, the transactions that arrive queue up; the writer
then runs them all, each inside its own savepoint (a transaction alone in its group needs
none), and makes them durable with one fsync.
No caller hears back before its work is committed, so intent-before-effect still holds; a
transaction that fails rolls back to its savepoint and takes nothing else with it, unless
SQLite rolled back the whole transaction (disk full, I/O error): then every transaction of the
group fails, as none of them was kept.

No caller waits for ever: if the thread dies (or is stopped), every queued and later call
fails at once with a ``StoreError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pivotal.errors import LeaseLost, StoreError
from pivotal.store import native
from pivotal.store.primitives import BatchResult, Stmt, carried

T = TypeVar("T")
log = logging.getLogger(__name__)
Work = Callable[[sqlite3.Connection], Any]


@dataclass(slots=True)
class _Job:
    work: Work
    transaction: bool
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    stmts: Sequence[Stmt] | None = None  # the work as statements: the native writer runs them
    result: Any = None
    error: BaseException | None = None
    done: bool = False

    def deliver(self) -> None:
        _deliver([self])

    def _settle(self) -> None:
        if self.future.done():  # cancelled by its caller
            return
        if self.error is not None:
            self.future.set_exception(carried(self.error))
        else:
            self.future.set_result(self.result)


class GroupWriter:
    """The write side of a SQLite store."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        name: str,
        max_group: int = 64,
        native_path: str | None = None,
    ):
        self._connect = connect
        # with the native module, groups of statements run over the same connection's handle
        self._native_path = native_path if native.available() else None
        self._native: native.Connection | None = None
        self._max_group = max_group
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()  # None: stop
        self._conn: sqlite3.Connection | None = None
        self._serving: list[_Job] = []  # taken from the queue, not yet answered ...
        self._ahead: list[_Job | None] = []  # ... and the one taken that ended a group
        self._lock = threading.Lock()  # orders submits against the end of the thread
        self._ended: str | None = None  # why the writer serves no more, once it does not
        self._end_cause: BaseException | None = None
        self.commits = 0  # how many commits (fsyncs) ...
        self.transactions = 0  # ... served how many transactions
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def call(self, work: Work) -> Coroutine[Any, Any, Any]:
        """Run ``work(conn)`` alone, outside any transaction."""
        return self._submit(work, transaction=False)

    def transaction(self, work: Work) -> Coroutine[Any, Any, Any]:
        """Run ``work(conn)`` in a transaction, committed (perhaps with others) before return."""
        return self._submit(work, transaction=True)

    @property
    def native(self) -> bool:
        """Whether groups of statements run on the native writer (``statements``)."""
        return self._native_path is not None

    def statements(self, stmts: Sequence[Stmt], work: Work) -> Coroutine[Any, Any, Any]:
        """Run ``stmts`` in a transaction, committed (perhaps with others) before return;
        ``work(conn)`` runs the same statements on the Python connection, for a group the
        native writer does not take."""
        return self._submit(work, transaction=True, stmts=stmts)

    async def _submit(
        self, work: Work, *, transaction: bool, stmts: Sequence[Stmt] | None = None
    ) -> Any:
        loop = asyncio.get_running_loop()
        job = _Job(work, transaction, loop, loop.create_future(), stmts)
        with self._lock:
            if self._ended is not None:
                raise self._refusal()
            self._jobs.put(job)
        return await job.future

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join()

    def _refusal(self) -> StoreError:
        error = StoreError(self._ended)
        error.__cause__ = self._end_cause
        return error

    # -- the writer thread ------------------------------------------------------------------

    def _serve(self) -> None:
        """Serve until stopped; whatever ends the thread, fail every job left unanswered."""
        try:
            self._loop()
            ended, cause = f"the writer {self._thread.name} is stopped", None
        except BaseException as exc:  # a bug, or a failure nothing handles: told to callers
            ended, cause = f"the writer thread {self._thread.name} died: {exc!r}", exc
        with self._lock:
            self._ended, self._end_cause = ended, cause
        left = [*self._serving, *self._ahead]
        with contextlib.suppress(queue.Empty):
            while True:
                left.append(self._jobs.get_nowait())
        unanswered = [job for job in left if job is not None and not job.done]
        for job in unanswered:
            job.error = self._refusal()
        _deliver(unanswered)
        if self._native is not None:  # its statements first: they are the connection's
            self._native.close()
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()

    def _loop(self) -> None:
        while True:
            job = self._ahead.pop() if self._ahead else self._jobs.get()
            if job is None:
                return
            self._serving = [job]
            if job.transaction:
                self._gather()
                if self._native_path is not None and all(
                    j.stmts is not None for j in self._serving
                ):
                    self._commit_native(self._serving)
                else:
                    self._commit(self._serving)
            else:
                self._alone(job)

    def _gather(self) -> None:
        """Add the transactions already queued to the group; keep what ends it for later.
        (Only this thread takes from the queue: what it finds there stays until taken, so
        it asks whether the queue is empty rather than pay for an exception on every group.)"""
        while len(self._serving) < self._max_group and not self._jobs.empty():
            more = self._jobs.get_nowait()
            if more is None or not more.transaction:
                self._ahead.append(more)
                return
            self._serving.append(more)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _alone(self, job: _Job) -> None:
        try:
            job.result = job.work(self._connection())
        except BaseException as exc:  # delivered to the caller
            job.error = exc
        job.deliver()

    def _commit(self, group: list[_Job]) -> None:
        try:
            conn = self._connection()
            begin(conn)
        except sqlite3.Error as exc:
            lost: BaseException | None = exc
        else:
            lost = self._run(conn, group)
            rolled_back = len(group) == 1 and group[0].error is not None
            if lost is None and not rolled_back:
                self.commits += 1
                self.transactions += len(group)
            elif conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # the connection stays usable
                    conn.execute("ROLLBACK")
        for job in group:
            if lost is not None and job.error is None:  # its work was rolled back too
                job.error = lost if isinstance(lost, sqlite3.Error) else _lost(lost)
        _deliver(group)

    def _commit_native(self, group: list[_Job]) -> None:
        """The group's statements, from ``BEGIN`` to ``COMMIT``, without the interpreter
        lock (``_pivotal_writer``), by the rules of ``_run``."""
        if self._native is None:
            assert self._native_path is not None
            try:
                self._native = native.connect(self._connection(), self._native_path)
            except (ValueError, TypeError) as exc:  # not a handle it can drive: Python's
                log.warning("the native SQLite writer is not used: %s", exc)
                self._native_path = None
                self._commit(group)
                return
        try:
            lost, answers = self._native.run([job.stmts for job in group], BUSY_TIMEOUT)
        except Exception as exc:  # nothing ran: each of its callers hears why
            for job in group:
                job.error = exc
            _deliver(group)
            return
        for job, (first, second) in zip(group, answers, strict=True):
            if first is native.FENCE:
                assert job.stmts is not None
                job.error = LeaseLost(job.stmts[second].fence or "")
            elif first is native.BIND:
                job.error = second
            elif isinstance(first, BaseException):
                job.error = first
            else:
                job.result = BatchResult(first, second)
        for job in group:
            if lost is not None and job.error is None:  # its work was rolled back too
                job.error = lost
        if lost is None and any(job.error is None for job in group):
            self.commits += 1
            self.transactions += len(group)
        _deliver(group)

    @staticmethod
    def _run(conn: sqlite3.Connection, group: list[_Job]) -> BaseException | None:
        """Run the jobs, then commit; return why all was lost, if it was.

        A job alone in its group needs no savepoint: when it fails, the whole transaction
        (its own) is rolled back. A group runs first without savepoints; when a job fails
        (a refused fence, say: rare), the whole transaction is rolled back and the group
        runs again with a savepoint per job, so that the failing one takes nothing else
        with it. A job's work is its statements only, so running it twice is safe.
        """
        if len(group) == 1:
            return GroupWriter._run_alone(conn, group[0])
        try:
            for job in group:
                job.result = job.work(conn)
            conn.execute("COMMIT")
        except BaseException:  # the careful run below tells which job failed
            for job in group:
                job.result = None
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                begin(conn)
            except sqlite3.Error as exc:
                return exc
            return GroupWriter._run_with_savepoints(conn, group)
        return None

    @staticmethod
    def _run_with_savepoints(conn: sqlite3.Connection, group: list[_Job]) -> BaseException | None:
        """Each job in its savepoint: a failing one is rolled back alone."""
        try:
            for job in group:
                conn.execute("SAVEPOINT job")
                try:
                    job.result = job.work(conn)
                except BaseException as exc:
                    job.error = exc
                    if not conn.in_transaction:  # SQLite rolled back the whole transaction
                        return exc
                    conn.execute("ROLLBACK TO job")
                conn.execute("RELEASE job")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:  # the transaction could not go on, or not commit
            return exc
        return None

    @staticmethod
    def _run_alone(conn: sqlite3.Connection, job: _Job) -> BaseException | None:
        """One job in its own transaction: committed, or rolled back when it fails."""
        try:
            job.result = job.work(conn)
        except BaseException as exc:
            job.error = exc
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error as lost:  # the connection is unusable: report it
                    return lost
            return None
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:  # the commit failed: nothing of the job was kept
            return exc
        return None


# Another process may hold the ledger's write lock (a server beside its worker). SQLite's own
# busy handler waits for it in steps that grow to 100 ms, so a waiter that just missed it
# sleeps long after it is free, and keeps losing it to the other process: the tail of every
# caller's latency. The write connection therefore has no busy timeout of its own (in WAL
# mode only the start of a write transaction waits for the lock: ``begin``), and asks again
# after a short, jittered pause (from ``BUSY_FIRST`` up to ``BUSY_MOST`` seconds) for as
# long as SQLite would have waited.
BUSY_TIMEOUT = 10.0  # seconds, as the read connections' busy_timeout
BUSY_FIRST = 0.0002
BUSY_MOST = 0.004
_busy_jitter = random.Random()


def begin(conn: sqlite3.Connection, timeout: float = BUSY_TIMEOUT) -> None:
    """``BEGIN IMMEDIATE`` on ``conn`` (a connection with no busy timeout), waiting for
    another process's write lock in short steps for up to ``timeout`` seconds; then
    SQLite's ``database is locked``."""
    deadline = time.monotonic() + timeout
    pause = BUSY_FIRST
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause * _busy_jitter.uniform(0.5, 1.5))
        pause = min(pause * 1.5, BUSY_MOST)


def _busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:  # the extended codes of "busy" (recovery, snapshot) too
        return bool(code & 0xFF == sqlite3.SQLITE_BUSY)
    return "locked" in str(exc)


def _deliver(jobs: list[_Job]) -> None:
    """Answer the jobs' callers with one wake-up per event loop, not one per job.

    Every wake-up writes to the loop's self-pipe, which hands the GIL over to the busy loop
    thread; one per job kept this thread waiting for the GIL more than it ran SQLite.
    """
    by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
    for job in jobs:
        job.done = True
        by_loop.setdefault(job.loop, []).append(job)
    for loop, mine in by_loop.items():
        try:
            loop.call_soon_threadsafe(_settle_all, mine)
        except RuntimeError:  # the caller's loop is gone: nobody waits
            continue  # (not contextlib.suppress: an object and two calls per group)


def _settle_all(jobs: list[_Job]) -> None:
    for job in jobs:
        job._settle()


def _lost(cause: BaseException) -> StoreError:
    error = StoreError(f"the transaction was rolled back with its group after {cause!r}")
    error.__cause__ = cause
    return error
