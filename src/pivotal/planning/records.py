"""What planning leaves in the ledger: runs with every attempt, and escalations.

The records themselves are defined in ``pivotal.store.planning_records`` (the store keeps
them without importing planning); this module keeps the names where they always were.
"""

from __future__ import annotations

from pivotal.store.planning_records import Escalation as Escalation
from pivotal.store.planning_records import EscalationStatus as EscalationStatus
from pivotal.store.planning_records import PlanningMode as PlanningMode
from pivotal.store.planning_records import PlanningOutcome as PlanningOutcome
from pivotal.store.planning_records import PlanningRun as PlanningRun
from pivotal.store.planning_records import new_run_id as new_run_id
