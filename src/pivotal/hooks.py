"""Named points in the engine's step protocol where a hook may run (fault injection)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum


class Point(StrEnum):
    """Where, around one step's action or undo, a process may die."""

    BEFORE_INTENT = "before_intent"  # the intent is not yet committed
    AFTER_INTENT = "after_intent"  # committed; the action not yet called
    AFTER_EFFECT = "after_effect"  # the action returned; its result not yet recorded
    BEFORE_UNDO_INTENT = "before_undo_intent"
    AFTER_UNDO_INTENT = "after_undo_intent"
    AFTER_UNDO_EFFECT = "after_undo_effect"
    AWAITING_APPROVAL = "awaiting_approval"  # the approval request is committed

    @property
    def undo(self) -> bool:
        return self in (Point.BEFORE_UNDO_INTENT, Point.AFTER_UNDO_INTENT, Point.AFTER_UNDO_EFFECT)


Hook = Callable[[Point, int], "Awaitable[None] | None"]
"""Called with the point and the step index; raising stops the saga right there, and an
awaitable it returns is awaited there (the process is paused while it runs)."""
