"""Fixtures of the report tests: the reviewed ledger."""

from __future__ import annotations

from typing import Any

import pytest
from report_ledger import Ledger, build_ledger

from pivotal import FakeClock, Orchestrator
from pivotal.examples.commerce import Faults
from pivotal.store import Store


@pytest.fixture
async def reviewed(
    store: Store,
    clock: FakeClock,
    orchestrator: Orchestrator,
    faults: Faults,
    checkout_plan: Any,
    fulfilment_plan: Any,
) -> Ledger:
    """Sagas of every kind, planning runs and escalations: see ``build_ledger``."""
    return await build_ledger(store, clock, orchestrator, faults, checkout_plan, fulfilment_plan)
