"""Operators settle what waits for a person, through the API: a real dead letter retried
(due now) and resolved, a needs_human saga resumed or resolved, an escalation resolved. Each
call only records; a worker (here the orchestrator and the sweeper) does the running."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from server_api import Clients, as_json, csrf_of

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus
from pivotal.examples.commerce import CommerceApp, CommerceServices, Fault
from pivotal.operations.worker import Sweeper
from pivotal.people.principals import Role
from pivotal.planning import (
    PlanningMode,
    PlanningOutcome,
    PlanRequest,
    ScriptedPlanner,
    propose_plan,
)
from pivotal.sagas.state import EventType
from pivotal.store import Store
from pivotal.store.base import DeadLetter

PlanBuilder = Callable[..., Plan]


async def dead_letter(
    orchestrator: Orchestrator, services: CommerceServices, checkout_plan: PlanBuilder
) -> DeadLetter:
    """A checkout whose charge is refused and whose stock release is refused too."""
    services.faults.next("charge", Fault.PERMANENT).always("release", Fault.PERMANENT)
    state = await orchestrator.execute(checkout_plan("dl"), saga_id="dl")
    assert state.status is SagaStatus.COMPENSATION_FAILED
    [letter] = await orchestrator.store.dead_letters("open")
    return letter


async def test_a_dead_letter_retried_is_due_now_and_a_sweep_settles_it(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    store: Store,
    clock: FakeClock,
) -> None:
    letter = await dead_letter(orchestrator, services, checkout_plan)
    assert letter.next_retry_at is not None
    assert letter.next_retry_at > clock.now()
    listed = (await as_role[Role.VIEWER].get("/v1/dead-letters")).json()
    assert [d["id"] for d in listed["items"]] == [letter.id]

    reply = await as_role[Role.OPERATOR].post(f"/v1/dead-letters/{letter.id}/retry")

    assert reply.status_code == 202, reply.text
    assert reply.json() == {
        "dead_letter_id": letter.id,
        "status": "open",
        "next_retry_at": clock.now(),
        "noted": True,
    }
    [due] = await store.dead_letters("open")
    assert due.next_retry_at == clock.now()
    note = (await store.events("dl"))[-1]  # who asked, on the saga
    assert note.type is EventType.DEAD_LETTERS_DUE
    assert (note.data["by"], note.data["letters"]) == ("operator", [letter.id])
    services.faults.clear()  # the warehouse is back
    report = await Sweeper(orchestrator).sweep()  # no clock advance: it is due now
    assert (report.dead_letters_retried, report.dead_letters_settled) == (1, 1)
    assert (await orchestrator.get("dl")).state.status is SagaStatus.COMPENSATED
    again = await as_role[Role.OPERATOR].post(f"/v1/dead-letters/{letter.id}/retry")
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "dead_letter_not_found"


async def test_a_retry_whose_note_loses_to_a_changing_saga_says_so_and_stays_due(
    as_role: Clients,
    browser: Callable[[], httpx.AsyncClient],
    api: FastAPI,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    store: Store,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The letter is made due; the note of who asked is not written (the saga kept
    changing): the API and the page say both, not an error that suggests nothing changed."""
    letter = await dead_letter(orchestrator, services, checkout_plan)

    async def loses(*args: Any) -> bool:
        return False

    monkeypatch.setattr(api.state.pivotal.orchestrator, "_note", loses)

    reply = await as_role[Role.OPERATOR].post(f"/v1/dead-letters/{letter.id}/retry")

    assert reply.status_code == 202, reply.text
    assert reply.json()["noted"] is False
    [due] = await store.dead_letters("open")
    assert due.next_retry_at == clock.now()
    assert (await store.events("dl"))[-1].type is not EventType.DEAD_LETTERS_DUE

    await store.schedule_dead_letter(letter.id, clock.now() + 3600)
    page = browser()  # logged in with the operator's token as_role made
    form = await page.get("/ui/login")
    token = {"token": "pvt_test_operator_operator", "csrf": csrf_of(form.text)}
    assert (await page.post("/ui/login", data=token)).status_code == 303
    csrf = csrf_of((await page.get("/ui/dead-letters")).text)
    posted = await page.post(f"/ui/dead-letters/{letter.id}/retry", data={"csrf": csrf})
    assert posted.status_code == 303
    assert posted.headers["location"] == "/ui/dead-letters?notice=retry-not-noted"
    shown = await page.get(posted.headers["location"])
    assert "Who asked is not noted on its saga: the saga kept changing." in shown.text


async def test_a_dead_letter_resolved_by_hand_records_who_and_why(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    store: Store,
) -> None:
    letter = await dead_letter(orchestrator, services, checkout_plan)
    why = {"reason": "released in the WMS by hand"}

    reply = await as_role[Role.OPERATOR].post(
        f"/v1/dead-letters/{letter.id}/resolve", content=as_json(why)
    )

    assert reply.status_code == 200, reply.text
    assert reply.json() == {"dead_letter_id": letter.id, "status": "resolved", "by": "operator"}
    [row] = await store.dead_letters(None)
    assert (row.status, row.resolution) == ("resolved", "released in the WMS by hand")
    assert (await orchestrator.get("dl")).state.status is SagaStatus.COMPENSATED
    resolved = (await as_role[Role.VIEWER].get("/v1/dead-letters?status=resolved")).json()
    assert [d["id"] for d in resolved["items"]] == [letter.id]
    twice = await as_role[Role.OPERATOR].post(
        f"/v1/dead-letters/{letter.id}/resolve", content=as_json(why)
    )
    assert twice.status_code == 404


async def timed_out_release(
    orchestrator: Orchestrator, services: CommerceServices, checkout_plan: PlanBuilder
) -> tuple[DeadLetter, float]:
    """A checkout whose charge is refused and whose release times out each time (its
    reply lost after the effect): the dead letter, and until when its last try may land."""
    services.faults.next("charge", Fault.PERMANENT).always("release", Fault.TIMEOUT_AFTER_EFFECT)
    state = await orchestrator.execute(checkout_plan("dl"), saga_id="dl")
    until = state.steps[0].undo_doubt_until
    assert state.status is SagaStatus.COMPENSATION_FAILED
    assert until is not None
    [letter] = await orchestrator.store.dead_letters("open")
    return letter, until


async def test_a_dead_letter_whose_undo_may_still_land_is_not_resolved_by_hand(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    store: Store,
    clock: FakeClock,
) -> None:
    """A person who released by hand now could see the release Pivotal sent land after: the
    API refuses, says until when, and records nothing; once it cannot land it accepts."""
    letter, until = await timed_out_release(orchestrator, services, checkout_plan)
    why = {"reason": "released in the WMS by hand"}

    reply = await as_role[Role.OPERATOR].post(
        f"/v1/dead-letters/{letter.id}/resolve", content=as_json(why)
    )
    assert reply.status_code == 409, reply.text
    assert reply.json()["error"]["code"] == "may_still_land"
    assert "cannot land after" in reply.json()["error"]["message"]
    assert [d.status for d in await store.dead_letters(None)] == ["open"]

    clock.advance(until - clock.now() + 1)
    reply = await as_role[Role.OPERATOR].post(
        f"/v1/dead-letters/{letter.id}/resolve", content=as_json(why)
    )
    assert reply.status_code == 200, reply.text
    assert (await orchestrator.get("dl")).state.status is SagaStatus.COMPENSATED


async def test_the_dead_letters_page_says_until_when_an_undo_may_still_land(
    login: Callable[[Role], Any],
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
    store: Store,
) -> None:
    letter, _ = await timed_out_release(orchestrator, services, checkout_plan)
    page = await login(Role.OPERATOR)
    form = await page.get("/ui/dead-letters")
    posted = await page.post(
        f"/ui/dead-letters/{letter.id}/resolve",
        data={"reason": "released by hand", "csrf": csrf_of(form.text)},
    )
    assert posted.status_code == 409
    assert "may still land" in posted.text
    assert "cannot land after" in posted.text
    assert [d.status for d in await store.dead_letters(None)] == ["open"]


async def parked(
    orchestrator: Orchestrator, services: CommerceServices, fulfilment_plan: PlanBuilder
) -> None:
    """A fulfilment past its pivot whose shipment keeps failing: it waits for a person."""
    services.faults.always("ship", Fault.PERMANENT)
    state = await orchestrator.execute(fulfilment_plan(), saga_id="s")
    assert state.status is SagaStatus.NEEDS_HUMAN


async def test_a_needs_human_saga_resumed_goes_on_in_a_worker(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)
    waiting = (await as_role[Role.VIEWER].get("/v1/sagas?status=needs_human")).json()
    assert [s["saga_id"] for s in waiting["items"]] == ["s"]
    services.faults.clear()  # the carrier's account was fixed

    reply = await as_role[Role.OPERATOR].post(
        "/v1/sagas/s/resume", content=as_json({"reason": "carrier account fixed"})
    )

    assert reply.status_code == 200, reply.text
    assert reply.json()["saga_id"] == "s"
    assert reply.json()["status"] != SagaStatus.NEEDS_HUMAN.value
    assert (await orchestrator.run("s")).status is SagaStatus.COMPLETED
    again = await as_role[Role.OPERATOR].post(
        "/v1/sagas/s/resume", content=as_json({"reason": "again"})
    )
    assert again.status_code == 409


async def test_a_needs_human_saga_resolved_by_hand_ends_resolved(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    fulfilment_plan: PlanBuilder,
    store: Store,
) -> None:
    await parked(orchestrator, services, fulfilment_plan)

    reply = await as_role[Role.ADMIN].post(
        "/v1/sagas/s/resolve", content=as_json({"reason": "shipped by hand"})
    )

    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == SagaStatus.RESOLVED.value
    shown = (await as_role[Role.VIEWER].get("/v1/sagas/s")).json()
    assert shown["status"] == SagaStatus.RESOLVED.value
    assert any("shipped by hand" in str(e["data"]) for e in shown["events"])


async def test_an_escalation_is_resolved_with_who_why_and_the_saga(
    as_role: Clients, app: CommerceApp, store: Store, clock: FakeClock
) -> None:
    request = PlanRequest(text="ship it", context={"order_id": "4471"}, catalogue="fulfilment")
    credit = {"steps": [{"name": "apply_goodwill_credit", "args": {"order_id": "4471"}}]}
    catalogue = app.catalogue("fulfilment")
    run = await propose_plan(
        request, ScriptedPlanner([credit] * 3), catalogue, run_id="run-1", clock=clock
    )
    run = run.model_copy(update={"mode": PlanningMode.LIVE, "outcome": PlanningOutcome.ESCALATED})
    opened = await store.escalate(run, "nothing fits", clock.now())
    listed = (await as_role[Role.VIEWER].get("/v1/escalations")).json()
    assert [e["id"] for e in listed["items"]] == [opened.id]
    settled = {"reason": "credited by hand", "saga_id": "manual-1"}

    reply = await as_role[Role.OPERATOR].post(
        f"/v1/escalations/{opened.id}/resolve", content=as_json(settled)
    )

    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["id"] == opened.id
    assert body["status"] == "resolved"
    assert (body["resolved_by"], body["resolution"]) == ("operator", "credited by hand")
    assert body["saga_id"] == "manual-1"
    assert (await as_role[Role.VIEWER].get("/v1/escalations")).json()["items"] == []
    closed = (await as_role[Role.VIEWER].get("/v1/escalations?status=resolved")).json()
    assert [e["id"] for e in closed["items"]] == [opened.id]
    twice = await as_role[Role.OPERATOR].post(
        f"/v1/escalations/{opened.id}/resolve", content=as_json(settled)
    )
    assert twice.status_code == 409
