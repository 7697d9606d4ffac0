"""What a group's batches become on PostgreSQL's fast path: fewer, larger statements.

On the fast path a group is one transaction that either commits whole or is run again
carefully, batch by batch; so statements of different batches may be reordered, as long as
each batch keeps its own order. Batches of the same shape (the same statements, in the same
order) go out stage by stage, and at each stage their multi-row ``INSERT``s become one
``INSERT … VALUES (…), (…), …`` (a power of two rows at a time, so that only a few
statement texts exist: parsed once by the driver, prepared once by the server).

A fence or a guard is moved to the server: the statement fails (division by zero) when it
touched the wrong number of rows, which aborts the transaction before its ``COMMIT``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pivotal.store.primitives import Stmt

MAX_PARAMS = 50  # per multi-row INSERT: psycopg caches the parse of a query up to 50 params
_VALUES = re.compile(r"^(INSERT INTO .*? VALUES\s*)(\((?:\s*\?\s*,)*\s*\?\s*\))(.*)$", re.S)
Shape = tuple[tuple[str, bool, bool, bool, bool], ...]


def pg_sql(sql: str) -> str:
    """``?`` placeholders written the way psycopg expects them."""
    return sql.replace("?", "%s")


def checked(stmt: Stmt) -> str:
    """The statement, made to fail on the server when its fence or guard is not met."""
    if stmt.fence is None and not stmt.guard:
        return pg_sql(stmt.sql)
    # A non-constant divisor: 1/0 is only evaluated (and fails) when the rows are wrong.
    wanted = "count(*) = 1" if stmt.fence is not None else "count(*) > 0"
    touched = f"WITH touched AS ({pg_sql(stmt.sql)} RETURNING 1)"
    return f"{touched} SELECT 1 / ({wanted})::int FROM touched"


def fast(stmts: Sequence[Stmt]) -> bool:
    """Whether a batch can go on the fast path (its checks can be moved to the server)."""
    return all(
        (s.fence is None and not s.guard)
        or (not s.many and not s.returning and "RETURNING" not in s.sql.upper())
        for s in stmts
    )


@dataclass(frozen=True)
class Command:
    """One statement sent; ``owner`` is the batch its returned rows belong to."""

    sql: str
    params: Sequence[Any]
    many: bool = False
    owner: int | None = None


def commands(batches: Sequence[Sequence[Stmt]]) -> list[Command]:
    """The commands that run ``batches`` (all fast) in one transaction."""
    shapes: dict[Shape, list[int]] = {}
    for index, stmts in enumerate(batches):
        shape = tuple((s.sql, s.many, s.fence is not None, s.guard, s.returning) for s in stmts)
        shapes.setdefault(shape, []).append(index)
    found: list[Command] = []
    for shape, members in shapes.items():
        for stage in range(len(shape)):
            stmts = [batches[index][stage] for index in members]
            parts = _VALUES.match(stmts[0].sql) if stmts[0].many else None
            if parts is not None:
                rows = [row for stmt in stmts for row in stmt.params]
                found += _inserts(parts.group(1), parts.group(2), parts.group(3), rows)
                continue
            found += [
                Command(checked(stmt), stmt.params, stmt.many, index if stmt.returning else None)
                for index, stmt in zip(members, stmts, strict=True)
            ]
    return found


def _most(columns: int) -> int:
    """The largest power of two rows whose parameters the driver still caches the parse of."""
    most = 1
    while most * 2 * columns <= MAX_PARAMS:
        most *= 2
    return most


def _inserts(head: str, row: str, tail: str, rows: Sequence[Sequence[Any]]) -> list[Command]:
    """``rows`` in multi-row ``INSERT``s of 1, 2, 4, … ``MAX_ROWS`` rows: a few statement
    texts only, so that the driver's parse cache and the server's prepared plans serve."""
    found = []
    start, most = 0, _most(len(rows[0]) if rows else 1)
    while start < len(rows):
        size = min(most, 1 << ((len(rows) - start).bit_length() - 1))
        chunk = rows[start : start + size]
        sql = pg_sql(head + ", ".join([row] * size) + tail)
        found.append(Command(sql, [value for values in chunk for value in values]))
        start += size
    return found
