"""What the providers say happened: the other half of every invariant."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class EffectProbe(Protocol):
    """Read-only questions to your providers, answered from their own state."""

    def effects(self) -> Mapping[str, int]:
        """For each action idempotency key, how many times its effect was applied."""
        ...

    def in_place(self, key: str) -> bool:
        """Whether the effect made with action key ``key`` exists and was not undone."""
        ...
