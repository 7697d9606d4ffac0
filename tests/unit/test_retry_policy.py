"""RetryPolicy backoff bounds and failure classification."""

from __future__ import annotations

import random

import httpx
import pytest

from pivotal import Abort, Permanent, RetryPolicy, Transient
from pivotal.declarations.retry import NO_RETRY, Outcome, classify

REQUEST = httpx.Request("POST", "https://psp.invalid/charge")
RESPONSE = httpx.Response(500, request=REQUEST)


def cap(policy: RetryPolicy, attempt: int) -> float:
    return min(policy.max_delay, policy.base_delay * policy.multiplier ** (attempt - 1))


@pytest.mark.parametrize("seed", range(5))
def test_delays_lie_within_zero_and_the_cap(seed: int) -> None:
    policy = RetryPolicy(max_attempts=20, base_delay=0.1, multiplier=2.0, max_delay=5.0)
    rng = random.Random(seed)
    for attempt in range(1, 21):
        for _ in range(50):
            assert 0.0 <= policy.delay(attempt, rng) <= cap(policy, attempt)


def test_cap_grows_exponentially_and_is_bounded_by_max_delay() -> None:
    policy = RetryPolicy(base_delay=0.5, multiplier=3.0, max_delay=20.0, jitter=False)
    assert [policy.delay(n) for n in range(1, 7)] == [0.5, 1.5, 4.5, 13.5, 20.0, 20.0]
    assert policy.delay(100) == 20.0


def test_very_late_attempts_stay_at_max_delay() -> None:
    """A long-lived retriable step (large max_attempts) must not crash its saga's backoff."""
    policy = RetryPolicy(max_attempts=5000, base_delay=0.1, multiplier=2.0, max_delay=60.0)
    assert policy.delay(1100, random.Random(0)) <= 60.0
    assert RetryPolicy(max_delay=60.0, jitter=False).delay(1100) == 60.0


def test_jittered_delays_fill_the_range_and_reach_the_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, multiplier=2.0, max_delay=3.0)
    rng = random.Random(1)
    late = [policy.delay(10, rng) for _ in range(500)]
    assert max(late) <= 3.0
    assert max(late) > 2.5  # the bound in force is max_delay, not base * 2**9
    assert min(late) < 0.5  # full jitter: can be close to zero
    early = [policy.delay(1, rng) for _ in range(500)]
    assert max(early) <= 1.0


def test_seeded_rng_makes_delays_reproducible() -> None:
    policy = RetryPolicy()
    first = [policy.delay(n, random.Random(7)) for n in range(1, 5)]
    second = [policy.delay(n, random.Random(7)) for n in range(1, 5)]
    assert first == second


def test_attempts_are_bounded() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [policy.exhausted(n) for n in (1, 2, 3, 4)] == [False, False, True, True]
    assert NO_RETRY.exhausted(1)
    assert NO_RETRY.delay(1) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"base_delay": -1.0},
        {"max_delay": -0.1},
        {"multiplier": 0.5},
    ],
)
def test_invalid_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"max_attempts|delays"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (Transient("busy"), Outcome.TRANSIENT),
        (TimeoutError("slow"), Outcome.TRANSIENT),
        (Permanent("declined"), Outcome.PERMANENT),
        (Abort("no"), Outcome.ABORT),
        (ValueError("bug"), Outcome.UNKNOWN),
        (KeyError("charge_id"), Outcome.UNKNOWN),
        (ConnectionError("reset"), Outcome.TRANSIENT),
        (ConnectionResetError("reset by peer"), Outcome.TRANSIENT),
        (httpx.ReadTimeout("no reply"), Outcome.TRANSIENT),
        (httpx.ConnectError("refused"), Outcome.TRANSIENT),
        (httpx.HTTPStatusError("500", request=REQUEST, response=RESPONSE), Outcome.UNKNOWN),
    ],
)
def test_classify_without_a_predicate(exc: BaseException, outcome: Outcome) -> None:
    assert classify(exc) is outcome


def test_retry_on_makes_other_exceptions_transient() -> None:
    def network(exc: BaseException) -> bool:
        return isinstance(exc, ConnectionError)

    assert classify(OSError("reset"), network) is Outcome.UNKNOWN
    assert classify(ConnectionError("reset"), network) is Outcome.TRANSIENT
    assert classify(ValueError("bug"), network) is Outcome.UNKNOWN


def test_only_permanent_or_a_declared_exception_means_no_effect() -> None:
    class CardDeclined(Exception):
        pass

    assert classify(CardDeclined("declined"), no_effect_on=(CardDeclined,)) is Outcome.PERMANENT
    assert classify(ValueError("bug"), no_effect_on=(CardDeclined,)) is Outcome.UNKNOWN


def test_a_raising_retry_predicate_leaves_the_outcome_unknown() -> None:
    def broken(exc: BaseException) -> bool:
        raise RuntimeError("predicate bug")

    assert classify(ValueError("bug"), broken) is Outcome.UNKNOWN


def test_retry_on_cannot_override_explicit_signals() -> None:
    def everything(exc: BaseException) -> bool:
        return True

    assert classify(Permanent("declined"), everything) is Outcome.PERMANENT
    assert classify(Abort("no"), everything) is Outcome.ABORT
    assert classify(Transient("busy"), lambda exc: False) is Outcome.TRANSIENT
