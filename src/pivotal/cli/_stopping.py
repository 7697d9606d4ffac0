"""What ``pivotal worker`` does when told to stop (Ctrl-C, SIGINT or SIGTERM): the first
signal stops claiming and says what it waits for; a second one stops waiting, and the worker
says what it left in doubt. Private to ``pivotal.cli``."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pivotal.errors import PivotalError
from pivotal.operations.worker import Worker
from pivotal.sagas.state import StepStatus, UndoStatus

log = logging.getLogger("pivotal.cli.worker")
SIGNALS = (signal.SIGTERM, signal.SIGINT)
EXIT_ABANDONED = 130  # as a shell reports a command ended by Ctrl-C


class Stopping:
    """Counts the stop signals a worker gets: the first stops it, the second abandons."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.signals = 0

    @property
    def abandoned(self) -> bool:
        return self.signals >= 2

    def __call__(self, sig: int) -> None:
        self.signals += 1
        w = self.worker
        if self.signals == 1:
            w.stop()
            self._stopping(signal.Signals(sig).name)
        elif self.signals == 2:
            w.abandon()
            log.warning(
                "worker %s: stop waiting: the calls in flight are abandoned, left in doubt",
                w.owner,
                extra={"fields": {"event": "worker_abandoning", "worker": w.owner}},
            )

    def _stopping(self, name: str) -> None:
        w = self.worker
        flying = w.in_flight
        if flying:
            what = (
                f"waiting for {len(flying)} saga{'' if len(flying) == 1 else 's'} in flight "
                f"({', '.join(flying)}) to finish their current calls and release their leases "
                f"(at most {w.config.drain_timeout:g}s); Ctrl-C again to stop waiting (their "
                "calls are left in doubt, as the ledger records them, and their leases lapse)"
            )
        else:
            what = "no saga in flight; finishing its sweep"
        log.info(
            "worker %s stopping (%s): %s",
            w.owner,
            name,
            what,
            extra={
                "fields": {
                    "event": "worker_stopping",
                    "worker": w.owner,
                    "signal": name,
                    "in_flight": flying,
                    "drain_timeout": w.config.drain_timeout,
                }
            },
        )


@contextmanager
def handled(worker: Worker) -> Iterator[Stopping]:
    """Stop signals go to a ``Stopping`` of ``worker`` while the block runs."""
    stopping = Stopping(worker)
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, stopping, sig)
    try:
        yield stopping
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)


async def left_in_doubt(worker: Worker) -> list[dict[str, Any]]:
    """The sagas whose passes were abandoned, each with its steps in doubt (an intent
    recorded, no outcome: the action's or the undo's), as the ledger has them now."""
    found: list[dict[str, Any]] = []
    for saga_id in worker.abandoned:
        steps: list[str] | None = []
        try:
            stored = await worker.orchestrator.store.load(saga_id)
        except PivotalError:
            stored, steps = None, None  # unknown: the ledger cannot say now
        if stored is not None and steps is not None:
            for i, step in enumerate(stored.state.steps):
                if step.status is StepStatus.STARTED:
                    steps.append(f"{i} {step.name}")
                if step.undo_status is UndoStatus.STARTED:
                    steps.append(f"{i} {step.name} (undo)")
        found.append({"saga_id": saga_id, "in_doubt": steps})
    return found


def say_abandoned(worker: Worker, doubts: list[dict[str, Any]]) -> str:
    """Log and return what the worker left in doubt when it stopped waiting."""
    if not doubts:
        text = f"worker {worker.owner} stopped waiting: nothing was left in doubt"
    else:
        parts = []
        for d in doubts:
            steps = d["in_doubt"]
            if steps is None:
                parts.append(f"{d['saga_id']} (the ledger could not be read)")
            else:
                parts.append(f"{d['saga_id']} (in doubt: {', '.join(steps) or 'no step'})")
        text = (
            f"worker {worker.owner} stopped waiting: left in doubt {'; '.join(parts)}. Their "
            f"intents are recorded and their leases lapse within "
            f"{worker.config.lease_ttl:g}s; then another worker settles them"
        )
    log.warning(
        text,
        extra={
            "fields": {"event": "worker_abandoned", "worker": worker.owner, "abandoned": doubts}
        },
    )
    return text
