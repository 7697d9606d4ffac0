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
    UNKNOWN = "unknown"  # anything else: the effect may have happened; settle, never retry


RetryPredicate = Callable[[BaseException], bool]

# Builtin errors of a connection or a name lookup: the call may be tried again.
_NETWORK_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError, EOFError)


def _is_transport_error(exc: BaseException) -> bool:
    """An ``httpx.TransportError`` (timeouts, connect and read errors), found by class name so
    that classifying never imports httpx."""
    return any(
        c.__name__ == "TransportError" and c.__module__.split(".")[0] == "httpx"
        for c in type(exc).__mro__
    )


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


def classify(
    exc: BaseException,
    retry_on: RetryPredicate | None = None,
    no_effect_on: tuple[type[BaseException], ...] = (),
) -> Outcome:
    """Classify an exception raised by an action or undo after its intent was recorded.

    ``Abort`` aborts. Only ``Permanent`` or an exception the step declares in
    ``no_effect_on`` means the call certainly took no effect. ``Transient``, timeouts, the
    builtin connection errors, httpx transport errors and whatever ``retry_on`` accepts are
    transient. Anything else is an unknown outcome: the effect may have happened.
    """
    if isinstance(exc, Abort):
        return Outcome.ABORT
    if isinstance(exc, Permanent) or (no_effect_on and isinstance(exc, no_effect_on)):
        return Outcome.PERMANENT
    if isinstance(exc, (Transient, asyncio.TimeoutError, *_NETWORK_ERRORS)):
        return Outcome.TRANSIENT
    if _is_transport_error(exc) or (retry_on is not None and _accepts(retry_on, exc)):
        return Outcome.TRANSIENT
    return Outcome.UNKNOWN


def _accepts(retry_on: RetryPredicate, exc: BaseException) -> bool:
    """A raising predicate accepts nothing: the outcome stays unknown."""
    try:
        return bool(retry_on(exc))
    except Exception:
        return False
