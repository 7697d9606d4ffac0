"""Scripted faults for the simulated services: what the next call of an operation does.

Once bound to the services' database the schedule is shared by every process using it and
survives a crash, as a flaky provider's behaviour would.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import defaultdict, deque
from enum import StrEnum

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS faults (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "op TEXT NOT NULL, fault TEXT, always INTEGER NOT NULL)"
)


class Fault(StrEnum):
    """What one call meets. On a lookup (``find``) or on the ``precondition`` and
    ``approval_policy`` checks, every fault means "raise" (they have no effect to make)."""

    TRANSIENT = "transient"  # refused before any effect; the same call may succeed later
    PERMANENT = "permanent"  # refused for good (declined card, unknown order)
    TIMEOUT_BEFORE_EFFECT = "timeout_before_effect"  # the caller times out; nothing happened
    TIMEOUT_AFTER_EFFECT = "timeout_after_effect"  # the effect happened; the reply was lost
    ERROR_BEFORE_EFFECT = "error_before_effect"  # the client failed (RuntimeError); no effect
    KEY_ERROR_AFTER_EFFECT = "key_error_after_effect"  # effect made; the reply lacked a field
    PARSE_ERROR_AFTER_EFFECT = "parse_error_after_effect"  # effect made; reply not JSON
    RUNTIME_ERROR_AFTER_EFFECT = "runtime_error_after_effect"  # effect made; client crashed
    RESET_AFTER_EFFECT = "reset_after_effect"  # effect made; connection reset (transient)

    @property
    def after_effect(self) -> bool:
        """Whether the call's effect is made before the fault is raised."""
        return self in _AFTER_EFFECT


_AFTER_EFFECT = frozenset(
    {
        Fault.TIMEOUT_AFTER_EFFECT,
        Fault.KEY_ERROR_AFTER_EFFECT,
        Fault.PARSE_ERROR_AFTER_EFFECT,
        Fault.RUNTIME_ERROR_AFTER_EFFECT,
        Fault.RESET_AFTER_EFFECT,
    }
)

CHECKS = ("precondition", "approval_policy")
"""Pseudo-operations: the catalogue's preconditions and its approval policy consult them."""


class Faults:
    """Per operation, a queue of faults consumed one per call, then an optional default."""

    def __init__(self) -> None:
        self._queued: dict[str, deque[Fault | None]] = defaultdict(deque)
        self._always: dict[str, Fault] = {}
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    def bind(self, db: sqlite3.Connection, lock: threading.RLock | None = None) -> None:
        """Keep the schedule in ``db`` from now on, starting with what is queued here;
        ``lock``: what every transaction on ``db`` holds (threads share the connection)."""
        db.execute(_SCHEMA)
        self._db = db
        self._lock = lock or threading.RLock()
        queued, always = self._queued, self._always
        self._queued, self._always = defaultdict(deque), {}
        for op, faults in queued.items():
            self.next(op, *faults)
        for op, fault in always.items():
            self.always(op, fault)

    def next(self, op: str, *faults: Fault | None) -> Faults:
        """The next calls of ``op`` meet these faults in order (``None``: no fault)."""
        if self._db is None:
            self._queued[op].extend(faults)
        else:
            self._db.executemany(
                "INSERT INTO faults (op, fault, always) VALUES (?, ?, 0)",
                [(op, f.value if f else None) for f in faults],
            )
        return self

    def always(self, op: str, fault: Fault) -> Faults:
        """Every call of ``op`` after the queued ones meets ``fault``."""
        if self._db is None:
            self._always[op] = fault
        else:
            self._db.execute("DELETE FROM faults WHERE op = ? AND always = 1", (op,))
            self._db.execute(
                "INSERT INTO faults (op, fault, always) VALUES (?, ?, 1)", (op, fault.value)
            )
        return self

    def clear(self) -> None:
        self._queued.clear()
        self._always.clear()
        if self._db is not None:
            self._db.execute("DELETE FROM faults")

    def check(self, op: str) -> None:
        """Raise ``RuntimeError`` if a fault is scheduled for this call of ``op`` (a
        precondition or an approval policy that fails)."""
        fault = self.take(op)
        if fault is not None:
            raise RuntimeError(f"{op} failed ({fault.value})")

    def take(self, op: str) -> Fault | None:
        """The fault the next call of ``op`` meets, consumed from the queue."""
        if self._db is None:
            queue = self._queued.get(op)
            if queue:
                return queue.popleft()
            return self._always.get(op)
        db = self._db
        with self._lock:  # a precondition asks on a facts thread while providers are called
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT id, fault, always FROM faults WHERE op = ? ORDER BY always, id LIMIT 1",
                    (op,),
                ).fetchone()
                if row is not None and not row[2]:
                    db.execute("DELETE FROM faults WHERE id = ?", (row[0],))
            finally:
                db.execute("COMMIT")
        return None if row is None or row[1] is None else Fault(row[1])
