"""The seed document's worked example, on Pivotal's engine, offline."""

from __future__ import annotations

from adk_story import Checker, Session, check_stage, comp_records, deltas, order_agent

from pivotal import Orchestrator
from pivotal.examples.commerce import CommerceServices, Fault, Faults


async def test_ship_fails_refund_then_release_and_notify_never_runs(
    orchestrator: Orchestrator, services: CommerceServices, faults: Faults, check: Checker
) -> None:
    faults.always("ship", Fault.PERMANENT)
    session = Session(order_agent(orchestrator))
    events = await session.run()
    state = await session.state()

    assert state["saga_status"] == "compensated"
    assert "create_shipment (step 2) failed" in state["saga_reason"]
    comps = comp_records(state)
    assert set(comps) == {"comp:reserve", "comp:charge"}
    saga_id = state["pivotal_saga_id"]
    assert comps["comp:charge"]["key"] == f"{saga_id}:1"
    assert comps["comp:charge"]["undo_key"] == f"{saga_id}:1:undo"
    assert all(c["undo"] == "done" for c in comps.values())
    # the records appeared, one event per outcome, before compensation ran
    seen = [d for d in deltas(events) if any(k.startswith("comp:") for k in d)]
    firsts = [sorted(k for k in d if k.startswith("comp:")) for d in seen[:2]]
    assert firsts == [["comp:reserve"], ["comp:charge"]]
    assert seen[0]["comp:reserve"]["undo"] == "none"
    # newest first: the refund, then the release; the notification never ran
    ops = [c["op"] for c in services.calls() if c["op"] in ("refund", "release")]
    assert ops == ["refund", "release"]
    assert services.calls("email") == []
    stored = await check(saga_id)
    assert stored.status.value == "compensated"
    assert [r.status.value for r in stored.steps] == ["succeeded", "succeeded", "failed", "pending"]
    await session.close()


async def test_verdict_invalid_aborts_and_undoes_the_reservation(
    orchestrator: Orchestrator, services: CommerceServices, check: Checker
) -> None:
    session = Session(order_agent(orchestrator, check=check_stage("invalid")))
    await session.run()
    state = await session.state()

    assert state["verdict"] == "invalid"
    assert state["decided:check"] == "the order check said 'invalid'"
    assert state["saga_abort"] == "the order check said 'invalid'"
    assert state["saga_status"] == "compensated"
    assert state["saga_reason"] == "aborted by adk:check: the order check said 'invalid'"
    assert set(comp_records(state)) == {"comp:reserve"}
    assert state["comp:reserve"]["undo"] == "done"
    assert len(services.calls("reserve")) == 1
    assert len(services.calls("release")) == 1
    assert services.calls("charge") == []
    assert services.calls("email") == []
    await check(state["pivotal_saga_id"])
    await session.close()


async def test_verdict_valid_completes(
    orchestrator: Orchestrator, services: CommerceServices, check: Checker
) -> None:
    session = Session(order_agent(orchestrator, check=check_stage("valid")))
    events = await session.run()
    state = await session.state()

    assert state["saga_status"] == "completed"
    assert state["decided:check"] == "proceed"
    assert set(comp_records(state)) == {"comp:reserve", "comp:charge", "comp:ship"}
    assert len(services.calls("email")) == 1
    assert events[-1].content is not None
    assert "completed" in (events[-1].content.parts[0].text or "")
    stored = await check(state["pivotal_saga_id"])
    assert stored.status.value == "completed"
    await session.close()


async def test_the_session_state_is_exactly_the_fold_of_its_event_deltas(
    orchestrator: Orchestrator, faults: Faults
) -> None:
    faults.always("ship", Fault.PERMANENT)
    session = Session(order_agent(orchestrator, check=check_stage("valid")))
    await session.run()
    assert session.id is not None
    stored = await session.sessions.get_session(
        app_name="orders", user_id="ana", session_id=session.id
    )
    assert stored is not None
    folded: dict[str, object] = {}
    for event in stored.events:
        folded |= event.actions.state_delta
    assert folded == dict(stored.state)  # nothing written around the events
    assert folded["saga_status"] == "compensated"
