"""Planning fixtures: the planning ledger and the fake chat-completions server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chat_server import FakeChatServer

from pivotal.planning import PlanningLedger, planning_ledger
from pivotal.store import Store


@pytest.fixture
def chat_server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as server:
        yield server


@pytest.fixture
def ledger(store: Store) -> PlanningLedger:
    return planning_ledger(store)
