"""What the providers did, kept apart from the ledger: the independent record the
invariants are checked against. Money and goods moved per idempotency key: each effect
made (by a provider call landing, or by a person's hand), each undo that moved something
back, every call's span, and what may still land."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Effect:
    """Everything that happened under one action key (``{saga}:{index}``)."""

    step: str
    made: list[tuple[float, str]] = field(default_factory=list)  # (when, by whom)
    undone: list[tuple[float, str]] = field(default_factory=list)
    provider_has: int = 0  # effects in the provider's own books, not yet reversed there
    applied: bool = False  # the provider has applied this key (a replaying one: once)
    seen_at: float | None = None  # when the provider's lookup sees the first effect
    undo_keys: set[str] = field(default_factory=set)  # undo keys the provider applied
    pending: int = 0  # calls of the action that may still land
    pending_undo: int = 0  # calls of the undo that may still land
    lookup_failed: bool = False  # a lookup of it raised or hung: nobody could tell
    undone_nothing: list[float] = field(default_factory=list)  # undos that found nothing

    @property
    def net(self) -> int:
        """What is in place: made, less what was moved back."""
        return len(self.made) - len(self.undone)


@dataclass
class Span:
    key: str
    host: str
    start: float
    end: float | None = None


class Bank:
    """The providers' books for one run, and the violations seen as calls happen."""

    def __init__(self) -> None:
        self.effects: dict[str, Effect] = {}
        self.open: dict[str, list[Span]] = defaultdict(list)  # calls in flight, by key
        self.violations: list[str] = []
        self.calls = 0

    def of(self, key: str, step: str) -> Effect:
        found = self.effects.get(key)
        if found is None:
            found = self.effects[key] = Effect(step)
        return found

    def begin(self, key: str, host: str, at: float) -> Span:
        """A call with ``key`` (an action's or an undo's) reaches its provider."""
        self.calls += 1
        busy = [s for s in self.open[key] if s.end is None]
        if busy:
            self.violations.append(
                f"two calls of {key} at once: {host} at {at:.3f} while {busy[0].host}'s, "
                f"begun at {busy[0].start:.3f}, had not ended"
            )
        span = Span(key, host, at)
        self.open[key].append(span)
        return span

    def end(self, span: Span, at: float) -> None:
        span.end = at
        self.open[span.key] = [s for s in self.open[span.key] if s.end is None]

    def note(self, violation: str) -> None:
        self.violations.append(violation)
