"""The embedded ledger: SQLite in WAL mode, one writer thread per store."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from pivotal.errors import LedgerNotFound, PivotalError, SchemaMismatch, StoreError
from pivotal.store.primitives import write_failed
from pivotal.store.queries import SQLITE_PRAGMAS
from pivotal.store.schema import SQLITE_MIGRATIONS
from pivotal.store.sql import BatchResult, Fetch, Row, SQLStore, Stmt
from pivotal.store.writer import GroupWriter, begin

T = TypeVar("T")


# sqlite3 binds a parameter of a type it has no adapter for after a failed lookup of the
# adaptation protocol (two missed attributes, an exception each): every NULL a saga writes
# (some ninety) paid for it. Registered, None is bound as NULL at the cost of one call, of a
# builtin rather than a Python function: an empty dict's ``get`` answers None for None.
_NULL: dict[None, None] = {}
sqlite3.register_adapter(type(None), _NULL.get)


class SQLiteStore(SQLStore):
    """A ledger in one SQLite file; several processes may share it.

    Writes run on one writer thread per store, with group commit; reads run in the caller's
    thread on their own connection, each as one snapshot.

    ``create=False`` opens an existing ledger only: a missing file is ``LedgerNotFound``,
    and neither the file nor its folder is created.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = str(path)
        self._create = create
        self._writer: GroupWriter | None = None
        self._reader: sqlite3.Connection | None = None

    # -- plumbing -----------------------------------------------------------------------

    def _error(self, exc: sqlite3.Error) -> StoreError:
        return StoreError(f"sqlite ledger {self.path}: {exc}")

    @property
    def writer(self) -> GroupWriter:
        if self._writer is None:
            raise StoreError("the store is not open; call open() first")
        return self._writer

    async def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work(conn)`` on the writer thread, outside a transaction."""
        try:
            result: T = await self.writer.call(work)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        return result

    @staticmethod
    def _run_batch(conn: sqlite3.Connection, stmts: Sequence[Stmt]) -> BatchResult:
        result = BatchResult()
        for stmt in stmts:
            if stmt.many:
                conn.executemany(stmt.sql, stmt.params)
                continue
            cur = conn.execute(stmt.sql, stmt.params)
            if stmt.returning:
                result.rows.append(cur.fetchall())
            if stmt.ends_batch(cur.rowcount):
                result.stopped = True
                break
        return result

    async def _batch(self, stmts: Sequence[Stmt]) -> BatchResult:
        return await self._batch_built(lambda: stmts)

    async def _batch_built(self, build: Callable[[], Sequence[Stmt]]) -> BatchResult:
        """The statements are built on the writer thread, when their transaction runs."""
        writer = self.writer
        try:
            if writer.native:  # built here: the writer runs them without the GIL
                stmts = build()
                result: BatchResult = await writer.statements(
                    stmts, functools.partial(self._run_batch, stmts=stmts)
                )
            else:
                result = await writer.transaction(functools.partial(self._run_built, build))
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        except PivotalError:  # the ledger's own (LeaseLost): as it is
            raise
        except Exception as exc:  # this batch's own failure: only its caller hears of it
            raise write_failed(f"sqlite ledger {self.path}", exc) from exc
        return result

    def _run_built(
        self, build: Callable[[], Sequence[Stmt]], conn: sqlite3.Connection
    ) -> BatchResult:
        return self._run_batch(conn, build())

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[Fetch]:
        if self._reader is None:  # in memory: one connection, reads on the writer thread

            async def via_writer(sql: str, params: Sequence[Any]) -> list[Row]:
                return await self._call(lambda conn: conn.execute(sql, params).fetchall())

            yield via_writer
            return
        conn = self._reader

        async def fetch(sql: str, params: Sequence[Any]) -> list[Row]:
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

        conn.execute("BEGIN")
        try:
            yield fetch
        finally:
            conn.execute("COMMIT")

    # -- opening ------------------------------------------------------------------------

    def _open_file(self, **options: Any) -> sqlite3.Connection:
        """A connection to the file; without ``create``, only to a file that exists."""
        if self._create or self.path == ":memory:":
            conn: sqlite3.Connection = sqlite3.connect(self.path, isolation_level=None, **options)
            return conn
        uri = Path(self.path).absolute().as_uri() + "?mode=rw"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, **options)
        return conn

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:" and self._create:
            _make_private(Path(self.path))
        conn = self._open_file()
        for pragma in SQLITE_PRAGMAS:
            conn.execute(pragma)
        # the write connection waits for another process's write lock its own way, in
        # short steps (``writer.begin``); SQLite's own waits grow to 100 ms
        conn.execute("PRAGMA busy_timeout = 0")
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        begin(conn)
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
                "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
            )
            current = conn.execute(
                "SELECT COALESCE(MAX(version), 0) FROM schema_version"
            ).fetchone()[0]
            if current > len(SQLITE_MIGRATIONS):
                raise SchemaMismatch(
                    f"ledger {self.path} has schema version {current}, newer than this "
                    f"Pivotal knows ({len(SQLITE_MIGRATIONS)}); upgrade Pivotal"
                )
            for version in range(current + 1, len(SQLITE_MIGRATIONS) + 1):
                for statement in _statements(SQLITE_MIGRATIONS[version - 1]):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def open(self) -> None:
        """Open the file, creating it (unless ``create`` is false) and applying migrations
        as needed."""
        if not self._create and self.path != ":memory:" and not _is_file(self.path):
            raise LedgerNotFound(f"sqlite ledger {self.path} does not exist")
        self._writer = GroupWriter(
            self._connect,
            name=f"pivotal-sqlite {self.path}",
            native_path=None if self.path == ":memory:" else self.path,
        )
        try:
            await self._call(self._migrate)
        except BaseException:
            await self.close()
            raise
        if self.path != ":memory:":
            reader = self._open_file(check_same_thread=False)
            reader.execute("PRAGMA busy_timeout = 10000")
            self._reader = reader

    async def close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            await asyncio.to_thread(writer.stop)
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    async def __aenter__(self) -> SQLiteStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _statements(script: str) -> list[str]:
    """The statements of a migration, each whole (a trigger's body has semicolons too)."""
    found: list[str] = []
    pending = ""
    for part in script.split(";"):
        pending += part + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                found.append(pending)
            pending = ""
    if pending.strip(" \n;"):
        raise SchemaMismatch(f"a migration ends inside a statement: {pending[:80]!r}")
    return found


def _is_file(path: str) -> bool:
    try:
        return Path(path).is_file()
    except OSError:  # e.g. a name too long to be a file
        return False


def _make_private(path: Path) -> None:
    """Make a ledger file that does not exist yet readable by its owner only (0600), in
    folders made for it 0700, whatever the umask: it holds every saga, the token hashes and
    the outbox. SQLite gives its WAL and shared-memory files the mode of the database file.
    A file or folder that exists keeps the mode its owner gave it."""
    missing = []
    folder = path.absolute().parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        with contextlib.suppress(FileExistsError):
            made.mkdir(mode=0o700)
            made.chmod(0o700)  # the umask may have taken bits away, never added: set it
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
