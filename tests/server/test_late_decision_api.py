"""A decision that comes after the approval was decided is refused (409, nothing
recorded), and the answer says it was decided already, and by whom."""

from __future__ import annotations

from typing import Any

import pytest
from server_api import Clients, add_token, approval_plan, as_json

from pivotal import FakeClock, Orchestrator, SagaStatus
from pivotal.people.principals import Role
from pivotal.store import Store
from pivotal.views.saga_scope import scoped

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

BIG = scoped("agent", "big")


async def test_a_late_decision_says_who_decided(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock, client: Any
) -> None:
    reply = await as_role[Role.AGENT].post(
        "/v1/sagas?saga_id=big", content=as_json(approval_plan())
    )
    assert reply.status_code == 201, reply.text
    waiting = await orchestrator.run(BIG)
    assert waiting.status is SagaStatus.AWAITING_APPROVAL
    approved = await as_role[Role.APPROVER].post(
        f"/v1/approvals/{BIG}/approve", content=as_json({"version": waiting.version})
    )
    assert approved.status_code == 200, approved.text
    now = approved.json()["version"]
    bob = client(await add_token(store, "bob", Role.APPROVER, clock))
    late = await bob.post(f"/v1/approvals/{BIG}/approve", content=as_json({"version": now}))
    assert late.status_code == 409
    error = late.json()["error"]
    assert error["code"] == "approval_invalid"
    assert error["message"].startswith(f"saga {BIG} was already decided: ")
    assert "the approval of capture_payment was approved by approver" in error["message"]
    stored = await store.load(BIG)
    assert stored is not None
    assert stored.state.version == now  # nothing was recorded
