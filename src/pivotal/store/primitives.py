"""What a SQL backend supplies: a write transaction of statements and a read snapshot.

``_batch`` runs statements in one write transaction; ``_snapshot`` yields a fetch function
reading one consistent snapshot. The ledger's operations (``sql.py`` for sagas,
``sql_planning.py`` for planning records) are written once over these two.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pivotal.errors import LeaseLost, StoreError
from pivotal.records import quick_init

T = TypeVar("T")
Row = tuple[Any, ...]
Fetch = Callable[[str, Sequence[Any]], Awaitable[list[Row]]]


@quick_init
@dataclass(frozen=True, slots=True)
class Stmt:
    """One statement of a write batch."""

    sql: str
    params: Sequence[Any] = ()
    many: bool = False  # params is a sequence of parameter tuples
    fence: str | None = None  # must touch exactly one row, else LeaseLost(fence)
    guard: bool = False  # touching no row ends the batch early (what ran is kept)
    returning: bool = False  # collect the rows it returns

    def ends_batch(self, rowcount: int) -> bool:
        """Apply the fence and the guard to the rows this statement touched: a failed
        fence raises ``LeaseLost``; True when the guard ends the batch here."""
        if self.fence is not None and rowcount != 1:
            raise LeaseLost(self.fence)
        return self.guard and rowcount == 0


def write_failed(ledger: str, exc: Exception) -> StoreError:
    """What the caller of a write that failed on something else than the driver (whose
    errors each backend wraps) or the ledger itself (``LeaseLost``, which goes as it is)
    is told: a value the driver cannot send, statements that cannot be built, a bug."""
    return StoreError(f"{ledger}: the write failed: {type(exc).__name__}: {exc}")


def carried(error: BaseException) -> BaseException:
    """``error`` as a future can carry it to the caller of a write: a ``StopIteration``
    set on a future is refused (``TypeError``, which would leave its caller and the ones
    answered after it waiting), or a subclass taken by the awaiting coroutine for a return
    (the write would seem to succeed); it goes as a ``RuntimeError`` caused by it."""
    if not isinstance(error, StopIteration):
        return error
    wrapped = RuntimeError(f"the write raised {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped


@dataclass
class BatchResult:
    stopped: bool = False  # a guard ended the batch
    rows: list[list[Row]] = field(default_factory=list)  # per returning statement


class SQLPrimitives(ABC):
    """The two primitives, and reads built on them."""

    @abstractmethod
    async def _batch(self, stmts: Sequence[Stmt]) -> BatchResult: ...

    @abstractmethod
    def _snapshot(self) -> AbstractAsyncContextManager[Fetch]: ...

    async def _batch_built(self, build: Callable[[], Sequence[Stmt]]) -> BatchResult:
        """``_batch`` of the statements ``build()`` returns. A backend that queues its
        writes (SQLite's writer thread) builds them only when it runs them, so a write
        waiting its turn keeps no rows; ``build`` must only read what it was given."""
        return await self._batch(build())

    async def _reading(self, read: Callable[[Fetch], Awaitable[T]]) -> T:
        """Run ``read`` against one snapshot (a backend may retry it after a lost link)."""
        async with self._snapshot() as fetch:
            return await read(fetch)

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return await self._reading(lambda fetch: fetch(sql, params))
