"""One thread owns a SQLite write connection; transactions queued together share a commit.

Group commit: while one commit is on disk, the transactions that arrive queue up; the writer
then runs them all, each inside its own savepoint, and makes them durable with one fsync.
No caller hears back before its work is committed, so intent-before-effect still holds; a
transaction that fails rolls back to its savepoint and takes nothing else with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], Any]


@dataclass
class _Job:
    work: Work
    transaction: bool
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    result: Any = None
    error: BaseException | None = None
    done: bool = field(default=False)

    def deliver(self) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody waits
            self.loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        if self.future.cancelled():
            return
        if self.error is not None:
            self.future.set_exception(self.error)
        else:
            self.future.set_result(self.result)


class GroupWriter:
    """The write side of a SQLite store."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], name: str, max_group: int = 64):
        self._connect = connect
        self._max_group = max_group
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._conn: sqlite3.Connection | None = None
        self.commits = 0  # how many commits (fsyncs) ...
        self.transactions = 0  # ... served how many transactions
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    async def call(self, work: Work) -> Any:
        """Run ``work(conn)`` alone, outside any transaction."""
        return await self._submit(work, transaction=False)

    async def transaction(self, work: Work) -> Any:
        """Run ``work(conn)`` in a transaction, committed (perhaps with others) before return."""
        return await self._submit(work, transaction=True)

    async def _submit(self, work: Work, *, transaction: bool) -> Any:
        loop = asyncio.get_running_loop()
        job = _Job(work, transaction, loop, loop.create_future())
        self._jobs.put(job)
        return await job.future

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join()

    # -- the writer thread ------------------------------------------------------------------

    def _loop(self) -> None:
        pending: _Job | None = None
        while True:
            job = pending or self._jobs.get()
            pending = None
            if job is None:
                break
            if not job.transaction:
                self._alone(job)
                continue
            group = [job]
            while len(group) < self._max_group:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None or not more.transaction:
                    pending = more
                    break
                group.append(more)
            self._commit(group)
            if pending is None and len(group) < self._max_group:
                continue
        if self._conn is not None:
            self._conn.close()

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
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            for job in group:
                job.error = exc
                job.deliver()
            return
        for job in group:
            conn.execute("SAVEPOINT job")
            try:
                job.result = job.work(conn)
            except BaseException as exc:
                job.error = exc
                conn.execute("ROLLBACK TO job")
            conn.execute("RELEASE job")
        try:
            conn.execute("COMMIT")
            self.commits += 1
            self.transactions += len(group)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for job in group:
                job.error = job.error or exc
        for job in group:
            job.deliver()
