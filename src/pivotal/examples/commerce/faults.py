"""Scripted faults for the simulated services: what the next call of an operation does."""

from __future__ import annotations

from collections import defaultdict, deque
from enum import StrEnum


class Fault(StrEnum):
    TRANSIENT = "transient"  # refused before any effect; the same call may succeed later
    PERMANENT = "permanent"  # refused for good (declined card, unknown order)
    TIMEOUT_BEFORE_EFFECT = "timeout_before_effect"  # the caller times out; nothing happened
    TIMEOUT_AFTER_EFFECT = "timeout_after_effect"  # the effect happened; the reply was lost


class Faults:
    """Per operation, a queue of faults consumed one per call, then an optional default."""

    def __init__(self) -> None:
        self._queued: dict[str, deque[Fault | None]] = defaultdict(deque)
        self._always: dict[str, Fault] = {}

    def next(self, op: str, *faults: Fault | None) -> Faults:
        """The next calls of ``op`` meet these faults in order (``None``: no fault)."""
        self._queued[op].extend(faults)
        return self

    def always(self, op: str, fault: Fault) -> Faults:
        """Every call of ``op`` after the queued ones meets ``fault``."""
        self._always[op] = fault
        return self

    def clear(self) -> None:
        self._queued.clear()
        self._always.clear()

    def take(self, op: str) -> Fault | None:
        queue = self._queued.get(op)
        if queue:
            return queue.popleft()
        return self._always.get(op)
