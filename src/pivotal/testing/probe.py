"""What the providers say happened: the other half of every invariant."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pivotal.examples.commerce.services import CommerceServices


class EffectProbe(Protocol):
    """Read-only questions to your providers, answered from their own state."""

    def effects(self) -> Mapping[str, int]:
        """For each action idempotency key, how many times its effect was applied."""
        ...

    def in_place(self, key: str) -> bool:
        """Whether the effect made with action key ``key`` exists and was not undone."""
        ...


class CommerceProbe:
    """The probe for the bundled commerce services."""

    _IN_PLACE = (
        ("reservations", "status = 'active'"),
        ("payments", "status IN ('charged', 'authorized', 'captured')"),
        ("shipments", "status = 'created'"),
        ("emails", "1 = 1"),
    )

    def __init__(self, services: CommerceServices) -> None:
        self.services = services

    def effects(self) -> Mapping[str, int]:
        return self.services.effects_per_key()

    def in_place(self, key: str) -> bool:
        db = self.services.db
        return any(
            db.execute(f"SELECT 1 FROM {table} WHERE key = ? AND {cond}", (key,)).fetchone()
            for table, cond in self._IN_PLACE
        )
