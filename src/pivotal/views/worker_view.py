"""What ``pivotal workers``, ``GET /v1/workers`` and the workers page show of each worker:
one description, so the three say the same."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pivotal.store.base import WorkerInfo

LEASES_SHOWN = 5  # saga ids a table cell names before it counts the rest


def describe(worker: WorkerInfo, now: float) -> dict[str, Any]:
    """One worker as JSON: its name, state (alive, stale or stopped), heartbeat and its age,
    start, stop, Pivotal version, catalogues served and the sagas whose leases it holds."""
    return {
        "name": worker.name,
        "state": worker.state(now),
        "heartbeat_at": worker.heartbeat_at,
        "heartbeat_age": max(now - worker.heartbeat_at, 0.0),
        "started_at": worker.started_at,
        "stopped_at": worker.stopped_at,
        "version": worker.version,
        "catalogues": list(worker.catalogues),
        "beat_every": worker.beat_every,
        "leases": list(worker.leases),
    }


def leases_text(leases: Iterable[str]) -> str:
    """The sagas leased, in one line: the first few by id, then how many more."""
    held = list(leases)
    shown = ", ".join(held[:LEASES_SHOWN])
    more = f", … {len(held) - LEASES_SHOWN} more" if len(held) > LEASES_SHOWN else ""
    return f"{shown}{more}"
