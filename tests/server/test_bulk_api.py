"""An operator acts on every saga a search selects through the API (``POST
/v1/sagas/bulk``): a dry run, the act with each saga's outcome, the bound, bad input, and
the roles. Each act only records; a worker (here the test's orchestrator) runs the undos."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from server_api import Clients

from pivotal import Orchestrator, Plan, SagaStatus
from pivotal.examples.commerce import CommerceServices, Fault
from pivotal.operations.worker import Sweeper
from pivotal.orchestration.rerun import rerun_id
from pivotal.people.principals import Role
from pivotal.sagas.state import EventType

PlanBuilder = Callable[..., Plan]
SUBMITTED = {"status": "submitted", "order": "asc"}


async def three(orchestrator: Orchestrator, checkout_plan: PlanBuilder) -> None:
    for n in range(3):
        await orchestrator.submit(checkout_plan(f"k-{n}"), saga_id=f"b{n}")
    assert (await orchestrator.execute(checkout_plan("k-9"), saga_id="done")).status is (
        SagaStatus.COMPLETED
    )


async def statuses(orchestrator: Orchestrator) -> dict[str, SagaStatus]:
    return {s.saga_id: s.status for s in await orchestrator.store.list_sagas(None, 100)}


async def test_a_dry_run_gives_the_count_and_ids_and_changes_nothing(
    as_role: Clients, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    await three(orchestrator, checkout_plan)
    before = await statuses(orchestrator)
    ask = {"act": "abort", "filter": SUBMITTED, "dry_run": True}
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/bulk", json=ask)
    assert reply.status_code == 200, reply.text
    assert reply.json() == {
        "act": "abort",
        "dry_run": True,
        "count": 3,
        "saga_ids": ["b0", "b1", "b2"],
        "counts": {},
        "sagas": [],
    }
    assert await statuses(orchestrator) == before


async def test_abort_by_filter_records_each_saga_with_who_and_why(
    as_role: Clients, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    await three(orchestrator, checkout_plan)
    ask = {"act": "abort", "filter": {"catalogue": "checkout", "order": "asc"}, "reason": "dup"}
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/bulk", json=ask)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["counts"] == {"acted": 3, "already": 0, "refused": 1, "not_found": 0}
    assert [(r["saga_id"], r["outcome"], r["code"]) for r in body["sagas"]] == [
        ("b0", "acted", None),
        ("b1", "acted", None),
        ("b2", "acted", None),
        ("done", "refused", "saga_not_abortable"),
    ]
    for n in range(3):
        state = (await orchestrator.get(f"b{n}")).state
        assert (state.status, state.reason) == (SagaStatus.COMPENSATING, "aborted by operator: dup")
        events = await orchestrator.store.events(f"b{n}")
        [started] = [e for e in events if e.type is EventType.COMPENSATION_STARTED]
        assert started.data["search"] == "catalogue=checkout&order=asc"  # what selected it
    again = await as_role[Role.OPERATOR].post("/v1/sagas/bulk", json=ask)
    assert again.json()["counts"] == {"acted": 0, "already": 3, "refused": 1, "not_found": 0}
    for n in range(3):
        events = await orchestrator.store.events(f"b{n}")
        assert sum(e.type is EventType.COMPENSATION_STARTED for e in events) == 1


async def test_more_sagas_than_the_bound_are_refused_with_how_many(
    as_role: Clients,
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pivotal.operations import bulk

    await three(orchestrator, checkout_plan)
    monkeypatch.setattr(bulk, "MAX_SAGAS", 2)
    ask = {"act": "abort", "filter": SUBMITTED, "reason": "dup"}
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/bulk", json=ask)
    assert reply.status_code == 422, reply.text
    error = reply.json()["error"]
    assert error["code"] == "too_many_sagas"
    assert "selects 3 sagas; one bulk act takes at most 2" in error["message"]
    assert set((await statuses(orchestrator)).values()) == {
        SagaStatus.SUBMITTED,
        SagaStatus.COMPLETED,
    }


@pytest.mark.parametrize(
    ("ask", "code"),
    [
        ({"act": "abort", "filter": SUBMITTED}, "invalid_input"),  # no reason
        ({"act": "abort", "filter": SUBMITTED, "reason": "bell \x07"}, "invalid_input"),
        ({"act": "abort", "filter": {"colour": "red"}, "reason": "x"}, "invalid_filter"),
        ({"act": "abort", "filter": {"status": "over"}, "reason": "x"}, "invalid_filter"),
        ({"act": "cancel", "filter": SUBMITTED, "reason": "x"}, "invalid_input"),
        ({"act": "abort", "reason": "x", "run": True}, "invalid_input"),
    ],
)
async def test_bad_input_is_422_and_changes_nothing(
    as_role: Clients,
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    ask: dict[str, object],
    code: str,
) -> None:
    await three(orchestrator, checkout_plan)
    before = await statuses(orchestrator)
    reply = await as_role[Role.OPERATOR].post("/v1/sagas/bulk", json=ask)
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["code"] == code
    assert await statuses(orchestrator) == before


async def test_only_operators_act_by_filter(
    as_role: Clients, orchestrator: Orchestrator, checkout_plan: PlanBuilder
) -> None:
    await three(orchestrator, checkout_plan)
    ask = {"act": "abort", "filter": SUBMITTED, "reason": "mine"}
    for role in (Role.AGENT, Role.APPROVER, Role.VIEWER):
        reply = await as_role[role].post("/v1/sagas/bulk", json=ask)
        assert reply.status_code == 403, role
    assert SagaStatus.COMPENSATING not in (await statuses(orchestrator)).values()


async def test_rerun_and_retry_dead_letters_by_filter(
    as_role: Clients,
    orchestrator: Orchestrator,
    services: CommerceServices,
    checkout_plan: PlanBuilder,
) -> None:
    services.faults.next("charge", Fault.PERMANENT)
    await orchestrator.execute(checkout_plan("k-1"), saga_id="declined")
    services.faults.next("charge", Fault.PERMANENT).always("release", Fault.PERMANENT)
    await orchestrator.execute(checkout_plan("k-2"), saga_id="stuck")
    services.faults.clear()
    operator = as_role[Role.OPERATOR]

    rerun = {"act": "rerun", "filter": {"status": "compensated"}}
    reply = await operator.post("/v1/sagas/bulk", json=rerun)
    assert reply.status_code == 200, reply.text
    [row] = reply.json()["sagas"]
    assert (row["saga_id"], row["outcome"], row["rerun"]) == (
        "declined",
        "acted",
        rerun_id("declined"),
    )
    again = await operator.post("/v1/sagas/bulk", json=rerun)
    assert again.json()["sagas"][0]["outcome"] == "already"  # one rerun per saga

    retry = {"act": "retry-dead-letters", "filter": {"status": "compensation_failed"}}
    reply = await operator.post("/v1/sagas/bulk", json=retry)
    assert reply.json()["counts"] == {"acted": 1, "already": 0, "refused": 0, "not_found": 0}
    again = await operator.post("/v1/sagas/bulk", json=retry)  # due already: nothing more
    assert again.json()["counts"] == {"acted": 0, "already": 1, "refused": 0, "not_found": 0}
    await Sweeper(orchestrator).sweep()  # a worker's sweep retries what is due
    assert await orchestrator.store.dead_letters("open") == []
