"""The ADK tests' commerce app: the shared one, with the orders the story's plans are for."""

from __future__ import annotations

import pytest
from adk_story import ANOTHER_ORDER, ORDER, open_order

from pivotal.examples.commerce import CommerceApp


@pytest.fixture
def app(app: CommerceApp) -> CommerceApp:
    """The shared app with the story's orders open (the shipped catalogues refuse a plan
    for an order the order system does not know)."""
    open_order(app.services, ORDER)
    open_order(app.services, ANOTHER_ORDER)
    return app
