"""Retry policies: bounded attempts, exponential backoff with full jitter, classification."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from pivotal.errors import Abort, Permanent, Transient


class Outcome(StrEnum):
    """How one failed attempt is classified."""

    TRANSIENT = "transient"  # may succeed later; the effect may or may not have happened
    PERMANENT = "permanent"  # took no effect and never will
    ABORT = "abort"  # soft failure: compensate


RetryPredicate = Callable[[BaseException], bool]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how fast a failing call is tried again.

    ``max_attempts`` counts the first call. The delay before attempt ``n + 1`` is drawn
    uniformly from ``[0, min(max_delay, base_delay * multiplier ** (n - 1))]`` (full jitter).
    """

    max_attempts: int = 3
    base_delay: float = 0.1
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("delays must be >= 0 and multiplier >= 1")

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        exponent = max(0, attempt - 1)
        try:
            grown = self.base_delay * self.multiplier**exponent
        except OverflowError:
            grown = math.inf
        cap = min(self.max_delay, grown)
        if not self.jitter:
            return cap
        return (rng or random).uniform(0.0, cap)

    def exhausted(self, attempt: int) -> bool:
        return attempt >= self.max_attempts


NO_RETRY = RetryPolicy(max_attempts=1, base_delay=0.0)


def classify(exc: BaseException, retry_on: RetryPredicate | None = None) -> Outcome:
    """Classify an exception raised by an action or undo.

    ``Transient`` and timeouts are transient; ``Abort`` aborts; ``Permanent`` and anything
    else is permanent unless the step's ``retry_on`` predicate says it is transient.
    """
    if isinstance(exc, Abort):
        return Outcome.ABORT
    if isinstance(exc, Transient | TimeoutError | asyncio.TimeoutError):
        return Outcome.TRANSIENT
    if isinstance(exc, Permanent):
        return Outcome.PERMANENT
    if retry_on is not None and retry_on(exc):
        return Outcome.TRANSIENT
    return Outcome.PERMANENT
