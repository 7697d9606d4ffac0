"""Points in time as people write them: ``7d``, ``24h``, ``30m``, ``45s``, ``2w`` back from
now, or an ISO date or date-time (UTC unless it names its offset). The one reader of them,
for the report's period and the saga search's ranges alike; and how long ago, as people read
it (``age``: a worker's heartbeat, a call in progress); and a ledger time in words
(``moment``)."""

from __future__ import annotations

import datetime as dt
import math
import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_DURATION = re.compile(r"^\s*(\d{1,6})\s*([smhdw])\s*$")


class BadMoment(ValueError):
    """Not a duration nor an ISO date (its message says which was given); each caller
    raises its own error with it."""


def parse_moment(text: str, now: float) -> float:
    """Seconds since the epoch that ``text`` names, relative to ``now`` for a duration."""
    found = _DURATION.match(text)
    if found:
        return now - int(found[1]) * _UNITS[found[2]]
    try:
        moment = dt.datetime.fromisoformat(text.strip())
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        at = moment.timestamp()
    except ValueError:
        raise BadMoment(
            f"{text[:64]!r} is neither a duration (7d, 24h, 30m) nor an ISO date (2026-11-01)"
        ) from None
    except OverflowError:  # a date past what a timestamp holds
        raise BadMoment(f"{text[:40]!r} is not a time a ledger holds") from None
    if not math.isfinite(at):
        raise BadMoment(f"{text[:40]!r} is not a time")
    return at


def moment(at: float) -> str:
    """A ledger time as people read it (UTC, to the second)."""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def age(seconds: float) -> str:
    """``seconds`` as a short age: ``4s``, ``3m 2s``, ``2h 5m``, ``3d 4h``."""
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86_400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86_400}d {s % 86_400 // 3600}h"
