"""Gauges read from the ledger: a Prometheus collector over the last ``OpsSnapshot``.

Every family is always described, so dashboards and rules find the names; a sample is only
given when the ledger was read and the figure exists (no age without an oldest record). The
snapshot is replaced whole, so a scrape in another thread (the worker's HTTP endpoint) sees
one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pivotal.sagas.state import SagaStatus
from pivotal.store.base import OpsSnapshot


class LedgerGauges(Collector):
    """Collects the ledger gauges from the last snapshot it was given."""

    def __init__(self) -> None:
        # the last snapshot (None before the first read or after a failed one) and whether
        # the last read failed: one tuple, replaced whole, so a scrape sees both or neither
        self._last: tuple[OpsSnapshot | None, bool] = (None, False)

    @property
    def snapshot(self) -> OpsSnapshot | None:
        """The last snapshot read (None before the first, or after a failed read)."""
        return self._last[0]

    def update(self, snapshot: OpsSnapshot) -> None:
        self._last = (snapshot, False)

    def failed(self) -> None:
        """The ledger could not be read: its gauges are unknown until it can."""
        self._last = (None, True)

    def describe(self) -> Iterator[Metric]:
        return self._families(None, False)

    def collect(self) -> Iterator[Metric]:
        return self._families(*self._last)

    def _families(self, s: OpsSnapshot | None, error: bool) -> Iterator[Metric]:
        err = GaugeMetricFamily(
            "pivotal_ledger_scrape_error",
            "1 when the last read of the ledger gauges failed, else 0.",
        )
        err.add_metric([], 1.0 if error else 0.0)
        yield err
        sagas = GaugeMetricFamily(
            "pivotal_sagas", "Sagas in the ledger by status.", labels=["status"]
        )
        if s is not None:
            counts = {status.value: 0 for status in SagaStatus}
            counts.update(s.sagas_by_status)
            for status, n in sorted(counts.items()):
                sagas.add_metric([status], float(n))
        yield sagas
        for name, documentation, read in _GAUGES:
            yield _gauge(name, documentation, None if s is None else read(s))


def _gauge(name: str, documentation: str, value: float | None) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation)
    if value is not None:
        family.add_metric([], float(value))
    return family


def _age(since: float | None, s: OpsSnapshot) -> float | None:
    return None if since is None else max(0.0, s.at - since)


def _until(when: float | None, s: OpsSnapshot) -> float | None:
    return None if when is None else when - s.at


# name, help, the figure from a snapshot (None: no sample)
_GAUGES: tuple[tuple[str, str, Callable[[OpsSnapshot], float | None]], ...] = (
    ("pivotal_dead_letters_open", "Open dead letters.", lambda s: s.open_dead_letters),
    (
        "pivotal_dead_letter_oldest_age_seconds",
        "Age of the oldest open dead letter.",
        lambda s: _age(s.oldest_open_dead_letter_at, s),
    ),
    (
        "pivotal_approvals_pending",
        "Approvals waiting for a decision.",
        lambda s: s.pending_approvals,
    ),
    (
        "pivotal_approval_oldest_age_seconds",
        "Age of the oldest pending approval request.",
        lambda s: _age(s.oldest_approval_requested_at, s),
    ),
    (
        "pivotal_approval_soonest_expiry_seconds",
        "Seconds until the soonest pending approval expires (negative: overdue).",
        lambda s: _until(s.soonest_approval_expires_at, s),
    ),
    ("pivotal_outbox_pending", "Outbox messages not delivered yet.", lambda s: s.outbox_pending),
    ("pivotal_outbox_dead", "Outbox messages whose retries ran out.", lambda s: s.outbox_dead),
    (
        "pivotal_outbox_oldest_age_seconds",
        "Age of the oldest pending outbox message.",
        lambda s: _age(s.oldest_pending_message_at, s),
    ),
    (
        "pivotal_workers_alive",
        "Workers that beat recently and have not stopped.",
        lambda s: s.workers_alive,
    ),
    (
        "pivotal_worker_heartbeat_age_seconds",
        "Age of the newest heartbeat of a running worker.",
        lambda s: _age(s.last_worker_heartbeat_at, s),
    ),
)
