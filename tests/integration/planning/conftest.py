"""Planning fixtures: the ledger (the store itself keeps planning records) and the fake
chat-completions server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from chat_server import FakeChatServer

from pivotal.store import Store


@pytest.fixture
def chat_server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as server:
        yield server


@pytest.fixture
def ledger(store: Store) -> Store:
    """Planning records go through the same store as sagas, on every backend."""
    return store
