"""What a running ``pivotal worker`` says: that it started, how its work goes, that it
stopped; as text lines, or as JSON lines (``--log-format json``), on stderr."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from pivotal.observability.logs import JsonLines, LogFormat, configure_logging
from pivotal.operations.worker import Worker, WorkerStats

__all__ = ["JsonLines", "LogFormat", "worker_logging"]  # kept here for existing imports

log = logging.getLogger("pivotal.cli.worker")


@contextlib.contextmanager
def worker_logging(fmt: LogFormat) -> Iterator[None]:
    """Log records at INFO and above to stderr for as long as the worker runs."""
    with configure_logging(fmt):
        yield


def snapshot(worker: Worker) -> dict[str, Any]:
    """How the worker's work goes: sagas claimed, in flight, finished by status."""
    stats = worker.stats
    return {
        "claimed": stats.runs,
        "in_flight": len(worker._tasks),
        "finished": dict(sorted(stats.finished.items())),
        "leases_lost": stats.leases_lost,
        "errors": stats.errors,
    }


def _finished(counts: dict[str, int]) -> str:
    return ", ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "none"


def describe(progress: dict[str, Any]) -> str:
    return (
        f"claimed {progress['claimed']}, in flight {progress['in_flight']}, finished "
        f"{_finished(progress['finished'])}; {progress['leases_lost']} leases lost, "
        f"{progress['errors']} errors"
    )


def started(worker: Worker, ledger: str, app: str) -> None:
    cfg = worker.config
    log.info(
        "worker %s started: ledger %s, app %s, concurrency %d, lease %ss",
        worker.owner,
        ledger,
        app,
        cfg.concurrency,
        cfg.lease_ttl,
        extra={
            "fields": {
                "event": "worker_started",
                "worker": worker.owner,
                "ledger": ledger,
                "app": app,
                "concurrency": cfg.concurrency,
                "lease_ttl": cfg.lease_ttl,
            }
        },
    )


async def report_progress(worker: Worker, every: float, done: asyncio.Event) -> None:
    """Every ``every`` seconds until ``done``, say how the work goes if it changed."""
    last: dict[str, Any] | None = None
    while not done.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), every)
        now = snapshot(worker)
        if now != last and not done.is_set():
            log.info(
                "worker %s: %s",
                worker.owner,
                describe(now),
                extra={"fields": {"event": "worker_progress", "worker": worker.owner, **now}},
            )
            last = now


def summary(worker: Worker, stats: WorkerStats) -> dict[str, Any]:
    return {
        "worker": worker.owner,
        "passes": stats.runs,
        "finished": dict(sorted(stats.finished.items())),
        "leases_lost": stats.leases_lost,
        "errors": stats.errors,
        "swept": dict(sorted(stats.swept.items())),
    }


def stopped(worker: Worker, result: dict[str, Any]) -> str:
    text = (
        f"worker {worker.owner} stopped: {result['passes']} passes, finished "
        f"{_finished(result['finished'])}; {result['leases_lost']} leases lost, "
        f"{result['errors']} errors"
    )
    log.info(text, extra={"fields": {"event": "worker_stopped", **result}})
    return text
