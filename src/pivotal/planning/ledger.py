"""Where planning runs and escalations are kept: in the store itself.

Planning records go through the same ``Store`` protocol as sagas (``record_run``,
``escalate``, ``runs``, ``latest_batch``, ``escalations``, ``escalation``,
``close_escalation``), on every backend. ``PlanningLedger`` and ``planning_ledger`` remain
for code written when planning had a protocol of its own: the first is ``Store``, the
second returns the store it is given.
"""

from __future__ import annotations

from typing import TypeAlias

from pivotal.store.base import Store

PlanningLedger: TypeAlias = Store


def planning_ledger(store: Store) -> Store:
    """The store itself: it keeps the planning records next to the sagas."""
    return store
