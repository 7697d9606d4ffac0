"""Long work as operators see it: ``GET /v1/sagas/{id}`` and the saga's page give the report
of a call in progress with its attempt, how long it ran and the worker holding the lease;
the page follows a saga that is not at rest (its live parts, ``X-Poll-Stop`` once at rest),
and none of it shows an earlier attempt's report or a finished step's."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import httpx
import pytest
from server_api import Clients, plan_body

from pivotal import FakeClock, Orchestrator, SagaStatus, parse_plan
from pivotal.examples.commerce import CommerceApp
from pivotal.hooks import Point
from pivotal.people.principals import Role
from pivotal.store import Store
from pivotal.testing.crash import CrashAt, CrashSite, SimulatedCrash

Login = Callable[[Role], Awaitable[httpx.AsyncClient]]


async def in_progress(store: Store, app: CommerceApp, clock: FakeClock, saga_id: str) -> None:
    """A saga whose first call is in progress on worker w-1 (its process went quiet after
    the intent), with a report of 40 of 100 made 5 seconds after the call began."""
    crash = CrashAt(CrashSite(Point.AFTER_INTENT, 0))
    worker = Orchestrator(
        store, app, clock=clock, owner="w-1", rng=random.Random(0), hook=crash, lease_ttl=60
    )
    began = clock.now()
    with pytest.raises(SimulatedCrash):
        await worker.execute(parse_plan(plan_body("o-1")), saga_id=saga_id)
    lease = await store.lease_of(saga_id)
    assert lease is not None
    assert lease[0] == "w-1"
    report = {"message": "asking the warehouse", "done": 40, "total": 100, "attempt": 1}
    report |= {"since": began, "at": began + 5}
    assert await store.record_progress(saga_id, 0, report, epoch=lease[1])
    clock.advance(7)


async def test_the_api_gives_the_report_of_the_call_in_progress(
    store, app, clock, as_role: Clients
) -> None:
    await in_progress(store, app, clock, "long")

    reply = await as_role[Role.VIEWER].get("/v1/sagas/long")

    assert reply.status_code == 200
    body = reply.json()
    assert body["status"] == "running"
    assert body["progress"] == {
        "0": {
            "message": "asking the warehouse",
            "done": 40,
            "total": 100,
            "attempt": 1,
            "since": pytest.approx(clock.now() - 7),
            "at": pytest.approx(clock.now() - 2),
            "fraction": 0.4,
            "state": "in_flight",
            "until": None,
            "text": "in flight · 40 of 100 (40%) · asking the warehouse · attempt 1, "
            "running 7s · reported 2s ago · held by w-1",
        }
    }


async def test_a_report_of_an_earlier_attempt_is_not_shown(
    store, app, clock, as_role: Clients
) -> None:
    await in_progress(store, app, clock, "older")
    lease = await store.lease_of("older")
    assert lease is not None
    stale = {"message": "an attempt before", "attempt": 0, "since": 0.0, "at": 0.0}
    assert await store.record_progress("older", 0, stale, epoch=lease[1])

    reply = await as_role[Role.VIEWER].get("/v1/sagas/older")

    # the call is shown in flight, without the earlier attempt's report
    assert reply.json()["progress"] == {
        "0": {
            "text": "in flight · attempt 1 · held by w-1",
            "fraction": None,
            "state": "in_flight",
            "until": None,
        }
    }


async def test_the_page_follows_a_saga_in_progress_and_stops_at_rest(
    store, app, clock, login: Login, orchestrator: Orchestrator
) -> None:
    await in_progress(store, app, clock, "follow")
    viewer = await login(Role.VIEWER)

    shown = await viewer.get("/ui/sagas/follow")
    assert shown.status_code == 200
    assert 'src="/ui/static/poll.js"' in shown.text
    assert 'data-poll="/ui/sagas/follow/live?part=body"' in shown.text
    assert 'data-poll="/ui/sagas/follow/live?part=head"' in shown.text
    assert '<progress max="100" value="40">' in shown.text
    assert "attempt 1, running 7s · reported 2s ago · held by w-1" in shown.text

    body = await viewer.get("/ui/sagas/follow/live?part=body")
    assert body.status_code == 200
    assert "X-Poll-Stop" not in body.headers
    assert "<html" not in body.text  # a part, not a page
    assert "40 of 100 (40%) · asking the warehouse" in body.text
    head = await viewer.get("/ui/sagas/follow/live?part=head")
    assert 's-running">running<' in head.text
    assert (await viewer.get("/ui/sagas/follow/live?part=nope")).status_code == 404
    assert (await viewer.get("/ui/sagas/nope/live")).status_code == 404

    clock.advance(120)  # the quiet worker's lease ran out: its call is no longer running
    body = await viewer.get("/ui/sagas/follow/live?part=body")
    assert "call-ended_unrecorded" in body.text
    assert "ended, unrecorded · attempt 1 · no live holder (w-1&#39;s lease expired" in body.text
    assert "running" not in body.text
    assert "held by" not in body.text
    assert "<progress" not in body.text
    # another worker finishes the saga
    state = await orchestrator.run("follow")
    assert state.status is SagaStatus.COMPLETED

    body = await viewer.get("/ui/sagas/follow/live?part=body")
    assert body.headers["X-Poll-Stop"] == "at rest"
    assert "progress-line" not in body.text
    shown = await viewer.get("/ui/sagas/follow")
    assert "data-poll" not in shown.text
    assert "poll.js" not in shown.text


async def test_the_live_parts_need_a_login(browser) -> None:
    reply = await browser().get("/ui/sagas/any/live?part=body")
    assert reply.status_code == 303
    assert reply.headers["location"] == "/ui/login"
