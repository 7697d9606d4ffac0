"""An agent's HTTP client over the ``store`` fixture: a token of role ``agent`` in the
ledger, the API in this process."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from pivotal import FakeClock
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role, hash_token
from pivotal.server import create_app
from pivotal.store import Store


@pytest.fixture
async def agent(
    store: Store, app: CommerceApp, clock: FakeClock
) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP API as the agent ``agent-7`` calls it."""
    secret = "pvt_test_agent_bound"
    await store.create_token("agent-7", Role.AGENT.value, hash_token(secret), clock.now())
    api = create_app(store, app, clock=clock)
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api), base_url="http://pivotal", headers=headers
    ) as client:
        yield client
