"""What the providers say happened: the other half of every invariant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class EffectProbe(Protocol):
    """Read-only questions to your providers, answered from their own state."""

    def effects(self) -> Mapping[str, int]:
        """For each action idempotency key, how many times its effect was applied."""
        ...

    def in_place(self, key: str) -> bool:
        """Whether the effect made with action key ``key`` exists and was not undone."""
        ...


@dataclass(frozen=True)
class CallSpan:
    """One call with idempotency key ``key``, from ``start`` to ``end`` on one shared order
    of ticks (any increasing counter): ``end`` is the last tick issued while it was in
    flight, None when the call never returned (its caller died). ``by`` names the caller
    when known; ``stale`` marks a call started after its caller had lost its lease.
    ``recorder`` names whose counter the ticks are on: spans of different recorders are
    never compared."""

    key: str
    start: int
    end: int | None
    by: str = ""
    stale: bool = False
    recorder: str = ""


@runtime_checkable
class CallProbe(Protocol):
    """A probe that also knows when each call started and ended (optional: it enables the
    ``no_concurrent_calls`` invariant)."""

    def call_spans(self) -> Sequence[CallSpan]:
        """Every call the providers (or a recorder in front of them) saw."""
        ...
