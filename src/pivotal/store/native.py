"""The native group writer (``_pivotal_writer``, built from ``native/`` by ``make``), if it
is installed: it runs a group of write batches from ``BEGIN`` to ``COMMIT`` over SQLite's C
API without the interpreter lock. Without it, or with ``PIVOTAL_SQLITE_WRITER=python``, the
pure-Python writer runs every group; the two follow the same rules (``writer.py``)."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any, Protocol

from pivotal.store.primitives import Stmt

WRITER_ENV = "PIVOTAL_SQLITE_WRITER"  # "python": the pure-Python writer, module or not


class Connection(Protocol):
    """What ``_pivotal_writer.Connection`` is."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None: ...

    def run(
        self, batches: list[Sequence[Stmt] | None], timeout: float
    ) -> tuple[BaseException | None, list[tuple[Any, Any]]]: ...

    def close(self) -> None: ...


FENCE: object = object()
BIND: object = object()
_Connection: type[Connection] | None = None
try:
    import _pivotal_writer  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - the fallback is tested with WRITER_ENV
    pass
else:
    FENCE, BIND = _pivotal_writer.FENCE, _pivotal_writer.BIND
    _Connection = _pivotal_writer.Connection


def installed() -> bool:
    """Whether the native module is installed (for a Python whose ``sqlite3.Connection``
    it knows: it drives the handle at the start of the object, as 3.11 to 3.13 lay it out)."""
    return _Connection is not None and (3, 11) <= sys.version_info[:2] <= (3, 13)


def available() -> bool:
    """Whether SQLite ledgers opened now write through the native module."""
    return installed() and os.environ.get(WRITER_ENV, "native") != "python"


def connect(conn: sqlite3.Connection, path: str) -> Connection:
    """The native writer over ``conn``'s own handle (``conn`` must be open over ``path``):
    the same connection, its settings and its transaction, as the Python writer's."""
    if _Connection is None:
        raise RuntimeError("the native writer is not installed")
    return _Connection(conn, path)


__all__ = ["BIND", "FENCE", "WRITER_ENV", "Connection", "available", "connect", "installed"]
