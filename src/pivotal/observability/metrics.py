"""Prometheus metrics: what the engine did (counters, histograms) and what the ledger holds
(gauges read from it, the same in every process and across restarts).

``PivotalMetrics`` is a ``Telemetry`` observer with a registry of its own (never the
process-wide default one), so two orchestrators in one process, or two tests, never share
samples. Counters and histograms come from ``committed`` (called once per acknowledged
commit, so each event is counted once, by the process that committed it) and from ``call``
(latency of each action and undo). The ledger gauges come from ``refresh(store, now)``,
which reads ``Store.ops_snapshot``; a failed read sets ``pivotal_ledger_scrape_error`` to 1
and drops the ledger gauges until a read succeeds, while counters keep being served.

Labels are bounded: catalogue and step names (from code), statuses, outcomes, decisions;
never a saga id, key or principal. Scraping several processes (API and workers) gives each
counter per process: aggregate with ``sum``; the ledger gauges are the same everywhere:
aggregate with ``max``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from pivotal.engine.telemetry import Call, Telemetry
from pivotal.observability.metrics_ledger import LedgerGauges
from pivotal.sagas.outbox import OUTCOMES, Message
from pivotal.sagas.state import ApprovalStatus, Event, EventType, SagaState
from pivotal.store.base import Store

log = logging.getLogger("pivotal.metrics")

SAGA_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400, 86400)
CALL_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
APPROVAL_SECONDS = (1, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 259200)

CALL_OUTCOMES = frozenset({"succeeded", "transient", "permanent", "abort", "unknown", "timeout"})
UNKNOWN_STEP = "unknown"  # the label of an event whose step index names no step

_ENDINGS = {
    EventType.SAGA_COMPLETED: "completed",
    EventType.SAGA_COMPENSATED: "compensated",
    EventType.SAGA_COMPENSATION_FAILED: "compensation_failed",
    EventType.SAGA_NEEDS_HUMAN: "needs_human",
    EventType.SAGA_RESOLVED: "resolved",
}
_COMPENSATION_ENDINGS = frozenset({EventType.SAGA_COMPENSATED, EventType.SAGA_COMPENSATION_FAILED})
_STEP_OUTCOMES = {
    EventType.STEP_FAILED: "failed",
    EventType.STEP_UNKNOWN: "unknown",
    EventType.STEP_RETRY_SCHEDULED: "retried",
}
_UNDO_OUTCOMES = {
    EventType.UNDO_RETRY_SCHEDULED: "retried",
    EventType.UNDO_LAPSED: "lapsed",
    EventType.UNDO_DEAD_LETTERED: "dead_lettered",
    EventType.DEAD_LETTER_RESOLVED: "resolved",
}
_DECISIONS = {
    EventType.APPROVAL_REJECTED: "rejected",
    EventType.APPROVAL_EXPIRED: "expired",
}


def _step_name(state: SagaState, index: int | None) -> str:
    if index is None or not 0 <= index < len(state.steps):
        return UNKNOWN_STEP
    return state.steps[index].name


class PivotalMetrics(Telemetry):
    """Pivotal's Prometheus metrics, in ``self.registry`` (its own unless one is given)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        alive_within: float = 60.0,
        read_timeout: float = 5.0,
    ) -> None:
        """``alive_within``: how recent a worker's heartbeat must be for it to count as
        alive; ``read_timeout``: how long ``refresh`` waits for the ledger."""
        self.alive_within = alive_within
        self.read_timeout = read_timeout
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.sagas_submitted = Counter(
            "pivotal_sagas_submitted", "Sagas recorded.", ["catalogue"], registry=r
        )
        self.sagas_finished = Counter(
            "pivotal_sagas_finished",
            "Sagas that reached a final status (a needs_human saga a person resumes or "
            "resolves ends again).",
            ["catalogue", "status"],
            registry=r,
        )
        self.steps = Counter(
            "pivotal_steps",
            "Step outcomes: succeeded, succeeded_by_lookup, failed, unknown, retried.",
            ["catalogue", "step", "outcome"],
            registry=r,
        )
        self.undos = Counter(
            "pivotal_undos",
            "Undo outcomes: done, noop, partial, lapsed (a hold that lapsed: no call), "
            "retried, dead_lettered, resolved (by an operator).",
            ["catalogue", "step", "outcome"],
            registry=r,
        )
        self.undos_partial = Counter(
            "pivotal_undos_partial",
            "Undos that could restore only part of what was there (settled, with a note).",
            ["catalogue", "step"],
            registry=r,
        )
        self.compensations = Counter(
            "pivotal_compensations_started",
            "Times a saga started to compensate.",
            ["catalogue"],
            registry=r,
        )
        self.approvals = Counter(
            "pivotal_approvals",
            "Approvals requested, and decided: granted, rejected, expired.",
            ["catalogue", "decision"],
            registry=r,
        )
        self.lease_takeovers = Counter(
            "pivotal_lease_takeovers", "Leases this process lost to another holder.", registry=r
        )
        self.poison = Counter(
            "pivotal_poison_sagas",
            "Sagas parked for a person after passes that made no progress.",
            ["catalogue"],
            registry=r,
        )
        self.unserved_sagas = Counter(
            "pivotal_sagas_unserved",
            "Sagas this process claimed and gave back without running anything: its "
            "catalogue lacks a step they use, or has one of another kind (a rolling deploy: "
            "a worker of the newer build runs them).",
            ["catalogue"],
            registry=r,
        )
        self.saga_seconds = Histogram(
            "pivotal_saga_duration_seconds",
            "From submission to the final status.",
            ["catalogue", "status"],
            buckets=SAGA_SECONDS,
            registry=r,
        )
        self.compensation_seconds = Histogram(
            "pivotal_compensation_duration_seconds",
            "From the first failure (compensation started) to compensated or failed.",
            ["catalogue", "status"],
            buckets=SAGA_SECONDS,
            registry=r,
        )
        self.call_seconds = Histogram(
            "pivotal_step_call_duration_seconds",
            "Latency of one call of an action or an undo (kind), by its outcome.",
            ["catalogue", "step", "kind", "outcome"],
            buckets=CALL_SECONDS,
            registry=r,
        )
        self.approval_seconds = Histogram(
            "pivotal_approval_wait_seconds",
            "From the approval request to its decision.",
            ["catalogue", "decision"],
            buckets=APPROVAL_SECONDS,
            registry=r,
        )
        self.deliveries = Counter(
            "pivotal_outbox_deliveries",
            "Outbox messages a relay in this process settled: delivered, failed (to be "
            "retried), dead (retries ran out, or the receiver refused it for good), lost "
            "(another relay took it over).",
            ["outcome"],
            registry=r,
        )
        self.ledger = LedgerGauges()
        r.register(self.ledger)

    def expect(self, catalogues: Iterable[str]) -> None:
        """Start the saga counters of these catalogues at zero, so that the first saga of a
        kind is an increase that rules see (``increase`` needs a sample before it)."""
        for catalogue in catalogues:
            self.sagas_submitted.labels(catalogue)
            self.compensations.labels(catalogue)
            self.poison.labels(catalogue)
            self.unserved_sagas.labels(catalogue)
            for status in _ENDINGS.values():
                self.sagas_finished.labels(catalogue, status)
            for decision in ("requested", "granted", "rejected", "expired"):
                self.approvals.labels(catalogue, decision)
        for outcome in ("delivered", "failed", "dead"):
            self.deliveries.labels(outcome)

    # -- Telemetry ----------------------------------------------------------------------

    def committed(
        self, before: SagaState | None, after: SagaState, events: Sequence[Event]
    ) -> None:
        """Count each event of one acknowledged commit."""
        grants = [e for e in events if e.type is EventType.APPROVAL_GRANTED]
        for event in events:
            if event.type is EventType.APPROVAL_GRANTED:
                if event is grants[-1]:
                    self._granted(after, event)
            else:
                self._count(after, event)

    @contextlib.contextmanager
    def call(self, call: Call) -> Iterator[None]:
        """Time one call; labelled with the outcome the engine set on it."""
        start = time.perf_counter()
        try:
            yield
        finally:
            outcome = call.outcome if call.outcome in CALL_OUTCOMES else "unknown"
            kind = "undo" if call.undo else "action"
            self.call_seconds.labels(call.catalogue, call.step, kind, outcome).observe(
                time.perf_counter() - start
            )

    def lease_lost(self, saga_id: str, owner: str) -> None:
        self.lease_takeovers.inc()

    def unserved(self, state: SagaState, owner: str, reason: str) -> None:
        """Count one saga given back unrun (labelled by its catalogue: a name from code)."""
        self.unserved_sagas.labels(state.catalogue).inc()

    def outbox_settled(self, message: Message, outcome: str, error: str | None) -> None:
        """Count one settled delivery (a relay's ``on_settled``); outcomes are bounded."""
        known = outcome if outcome in OUTCOMES else "other"
        self.deliveries.labels(known).inc()

    # -- the ledger ---------------------------------------------------------------------

    async def refresh(self, store: Store, now: float) -> bool:
        """Read the ledger gauges from ``store`` as of ``now``; False (and the error gauge
        set) when the ledger could not be read within ``self.read_timeout`` seconds."""
        try:
            async with asyncio.timeout(self.read_timeout):
                snapshot = await store.ops_snapshot(now, self.alive_within)
        except Exception as exc:
            log.warning("the ledger gauges could not be read: %s: %s", type(exc).__name__, exc)
            self.ledger.failed()
            return False
        self.ledger.update(snapshot)
        return True

    # -- counting -----------------------------------------------------------------------

    def _count(self, after: SagaState, event: Event) -> None:
        catalogue, t = after.catalogue, event.type
        if t is EventType.SAGA_SUBMITTED:
            self.sagas_submitted.labels(catalogue).inc()
        elif t is EventType.STEP_SUCCEEDED:
            via = "succeeded_by_lookup" if event.data.get("via") == "lookup" else "succeeded"
            self.steps.labels(catalogue, _step_name(after, event.step), via).inc()
        elif t in _STEP_OUTCOMES:
            self.steps.labels(catalogue, _step_name(after, event.step), _STEP_OUTCOMES[t]).inc()
        elif t is EventType.UNDO_SUCCEEDED:
            done = "noop" if event.data.get("noop") is True else "done"
            self.undos.labels(catalogue, _step_name(after, event.step), done).inc()
        elif t is EventType.UNDO_PARTIAL:
            step = _step_name(after, event.step)
            self.undos.labels(catalogue, step, "partial").inc()
            self.undos_partial.labels(catalogue, step).inc()
        elif t in _UNDO_OUTCOMES:
            self.undos.labels(catalogue, _step_name(after, event.step), _UNDO_OUTCOMES[t]).inc()
        elif t is EventType.COMPENSATION_STARTED:
            self.compensations.labels(catalogue).inc()
        elif t is EventType.APPROVAL_REQUESTED:
            self.approvals.labels(catalogue, "requested").inc()
        elif t in _DECISIONS:
            self._decided(after, event, _DECISIONS[t])
        elif t in _ENDINGS:
            self._ended(after, event, _ENDINGS[t])

    def _ended(self, after: SagaState, event: Event, status: str) -> None:
        catalogue = after.catalogue
        self.sagas_finished.labels(catalogue, status).inc()
        self.saga_seconds.labels(catalogue, status).observe(max(0.0, event.at - after.created_at))
        since = after.compensating_since
        if event.type in _COMPENSATION_ENDINGS and since is not None:
            self.compensation_seconds.labels(catalogue, status).observe(max(0.0, event.at - since))
        if event.type is EventType.SAGA_NEEDS_HUMAN and event.data.get("poison") is True:
            self.poison.labels(catalogue).inc()

    def _granted(self, after: SagaState, event: Event) -> None:
        """A grant decides only when it completes the approvers needed; one that leaves
        the approval pending (four eyes: another approver is needed) is not a decision."""
        approval = after.approval
        if approval is not None and approval.status is ApprovalStatus.APPROVED:
            self._decided(after, event, "granted")

    def _decided(self, after: SagaState, event: Event, decision: str) -> None:
        self.approvals.labels(after.catalogue, decision).inc()
        if after.approval is not None:
            waited = max(0.0, event.at - after.approval.requested_at)
            self.approval_seconds.labels(after.catalogue, decision).observe(waited)
