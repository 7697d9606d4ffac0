"""Where a person waits on a saga, the pages say when no worker is alive to move it (on the
ledger's clock), with what to run: the saga's page (its live head too) and the approver's
landing page after an approval."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from server_api import Clients, approval_plan, csrf_of, plan_body

from pivotal import FakeClock, Orchestrator, SagaStatus, parse_plan
from pivotal.people.principals import Role
from pivotal.store import Store

Login = Callable[[Role], Awaitable[httpx.AsyncClient]]
NO_WORKER = "No worker is alive to run this saga</strong> ("
RUN = "<code>pivotal --db URL worker</code>"


async def a_worker(store: Store, clock: FakeClock, name: str = "w-1") -> None:
    await store.start_worker(name, clock.now(), version="1", catalogues=["x"], beat_every=5.0)


async def test_after_approving_with_no_worker_alive_the_approver_is_told(
    login: Login, orchestrator: Orchestrator, store: Store, clock: FakeClock
) -> None:
    await orchestrator.submit(parse_plan(approval_plan()), saga_id="big")
    waiting = await orchestrator.run("big")
    assert waiting.status is SagaStatus.AWAITING_APPROVAL
    await a_worker(store, clock)
    clock.advance(16)  # it beat every 5 s and went quiet: no longer alive
    c = await login(Role.APPROVER)
    detail = await c.get("/ui/approvals/big")
    data = {"reason": "checked", "version": str(waiting.version), "csrf": csrf_of(detail.text)}
    reply = await c.post("/ui/approvals/big/approve", data=data)
    assert reply.headers["location"] == "/ui/sagas/big?notice=approved"

    landing = (await c.get(reply.headers["location"])).text
    assert '<p class="notice" role="status">Approved.</p>' in landing
    assert "a worker runs the saga on" not in landing
    assert NO_WORKER + "it is ready to go on, and no worker holds it)" in landing
    assert RUN in landing

    await a_worker(store, clock, "w-2")  # a worker alive: it carries the saga on
    landing = (await c.get(reply.headers["location"])).text
    assert "Approved: a worker runs the saga on." in landing
    assert NO_WORKER not in landing


async def test_the_saga_page_of_a_saga_never_claimed_says_no_worker_is_alive(
    login: Login, orchestrator: Orchestrator, store: Store, clock: FakeClock
) -> None:
    await orchestrator.submit(parse_plan(plan_body("o-1")), saga_id="new")
    viewer = await login(Role.VIEWER)

    shown = (await viewer.get("/ui/sagas/new")).text
    assert NO_WORKER + "submitted at " in shown
    assert "UTC, it was never claimed)" in shown
    head = (await viewer.get("/ui/sagas/new/live?part=head")).text
    assert NO_WORKER in head  # the page, following the saga, keeps saying it

    await a_worker(store, clock)
    assert NO_WORKER not in (await viewer.get("/ui/sagas/new/live?part=head")).text
    assert (await orchestrator.run("new")).status is SagaStatus.COMPLETED
    assert NO_WORKER not in (await viewer.get("/ui/sagas/new")).text


async def test_the_api_gives_why_a_saga_waits_for_a_worker_none_is_alive_to_be(
    as_role: Clients, orchestrator: Orchestrator, store: Store, clock: FakeClock
) -> None:
    await orchestrator.submit(parse_plan(plan_body("o-1")), saga_id="new")

    body = (await as_role[Role.VIEWER].get("/v1/sagas/new")).json()
    assert body["no_worker"].startswith("submitted at ")
    assert body["no_worker"].endswith(" UTC, it was never claimed")

    await a_worker(store, clock)
    assert (await as_role[Role.VIEWER].get("/v1/sagas/new")).json()["no_worker"] is None
