"""The saga page's pictures: the timeline of attempts and waits, and the plan as a line.
Real sagas run through the commerce example; hostile and odd logs built by hand."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable

import httpx
import pytest
from fastapi import FastAPI
from server_api import add_token, plan_body

from pivotal import FakeClock, Orchestrator, Plan, SagaStatus, parse_plan
from pivotal.examples.commerce import CommerceApp, Fault, Faults
from pivotal.hooks import Point
from pivotal.moments import moment
from pivotal.people.principals import Role
from pivotal.sagas.call_state import CallState, Lease
from pivotal.sagas.progress import Shown, describe, summary
from pivotal.sagas.state import Event, EventType, SagaState, replay
from pivotal.server.pages import pictures
from pivotal.server.pages.pictures import plan_svg, timeline_svg
from pivotal.store import Store
from pivotal.testing.crash import CrashAt, CrashSite, SimulatedCrash

PlanBuilder = Callable[..., Plan]
SVG = "{http://www.w3.org/2000/svg}"
CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HOSTILE = "<script>alert(1)</script>\"'&amp; \x00\x07\x1b\ud800 <img src=x onerror=alert(2)>"


def parsed(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def classes(el: ET.Element) -> set[str]:
    return set(el.get("class", "").split())


def lanes(root: ET.Element) -> dict[int, ET.Element]:
    return {
        int(g.get("data-step", "-1")): g
        for g in root.iter(f"{SVG}g")
        if "lane" in classes(g) and g.get("data-step") is not None
    }


def bars(lane: ET.Element, kind: str) -> list[ET.Element]:
    return [r for r in lane.iter(f"{SVG}rect") if {"bar", kind} <= classes(r)]


def nodes(root: ET.Element) -> dict[int, ET.Element]:
    return {int(g.get("data-step", "-1")): g for g in root.iter(f"{SVG}g") if "node" in classes(g)}


def captions(node: ET.Element) -> str:
    return " ".join(t.text or "" for t in node.iter(f"{SVG}text") if "caption" in classes(t))


def tip(el: ET.Element) -> str:
    found = el.find(f"{SVG}title")
    return found.text or "" if found is not None else ""


def started(events: list[Event], kind: EventType) -> Counter[int]:
    return Counter(e.step for e in events if e.type is kind and e.step is not None)


# -- real sagas through the commerce example -----------------------------------------------


async def test_checkout_failed_at_the_shipment(
    orchestrator: Orchestrator, checkout_plan: PlanBuilder, faults: Faults
) -> None:
    faults.next("reserve", Fault.TRANSIENT).next("ship", Fault.PERMANENT)
    await orchestrator.submit(checkout_plan("o-ship"), saga_id="ship")
    state = await orchestrator.run("ship")
    assert state.status is SagaStatus.COMPENSATED
    events = await orchestrator.store.events("ship")

    root = parsed(timeline_svg(state, events))
    found = lanes(root)
    assert sorted(found) == [0, 1, 2]  # one lane per step
    forward, undone = (
        started(events, EventType.STEP_STARTED),
        started(events, EventType.UNDO_STARTED),
    )
    for i, lane in found.items():
        assert len(bars(lane, "attempt")) == forward[i] == state.steps[i].attempts
        assert len(bars(lane, "undo")) == undone[i]
    assert forward[0] == 2  # the transient refusal was retried
    assert undone[0] == undone[1] == 1
    assert undone[2] == 0
    backoff = [r for r in found[0].iter(f"{SVG}rect") if "w-backoff" in classes(r)]
    assert len(backoff) == 1
    assert "retry backoff" in tip(backoff[0])
    assert "Permanent" in tip(bars(found[2], "attempt")[0])  # the error, in its tooltip
    assert "a-failed" in classes(bars(found[2], "attempt")[0])

    catalogue = orchestrator.app.catalogue("checkout")
    plan = parsed(plan_svg(state, catalogue))
    by_step = nodes(plan)
    assert sorted(by_step) == [0, 1, 2]
    assert captions(by_step[2]) == "a failure here undoes: charge_payment, reserve_stock"
    assert captions(by_step[1]) == "a failure here undoes: reserve_stock"
    assert captions(by_step[0]) == "a failure here undoes nothing"
    assert "refund_payment" in tip(by_step[2])  # the undo's own name, in the tooltip
    assert "n-failed" in classes(by_step[2])
    assert "n-succeeded" in classes(by_step[0])
    assert "undone" in tip(by_step[0])
    assert "undone" in tip(by_step[1])
    assert not [el for el in plan.iter() if "pivot" in classes(el)]  # checkout has none


async def test_fulfilment_marks_the_pivot_and_the_approval_wait(
    orchestrator: Orchestrator, fulfilment_plan: PlanBuilder, clock: FakeClock
) -> None:
    await orchestrator.submit(fulfilment_plan("4471", amount="180"), saga_id="f")
    state = await orchestrator.run("f")
    assert state.status is SagaStatus.AWAITING_APPROVAL
    clock.advance(3 * 3600)  # a person decides three hours later
    await orchestrator.approve("f", "ops-lead", "checked the stock", run=False)
    clock.advance(90)  # and a worker takes it up a minute and a half after that
    state = await orchestrator.run("f")
    assert state.status is SagaStatus.COMPLETED
    events = await orchestrator.store.events("f")

    svg = str(timeline_svg(state, events))
    root = parsed(svg)
    gated = lanes(root)[2]
    approval = [r for r in gated.iter(f"{SVG}rect") if "w-approval" in classes(r)]
    assert len(approval) == 1
    assert "3 h 00 min" in tip(approval[0])
    assert "approved by ops-lead" in tip(approval[0])
    worker = [r for r in gated.iter(f"{SVG}rect") if "w-worker" in classes(r)]
    assert worker
    assert "90.000 s" in tip(worker[-1])
    assert "+1 h" in svg
    assert " min<" not in svg

    plan = parsed(plan_svg(state, orchestrator.app.catalogue("fulfilment")))
    by_step = nodes(plan)
    assert "k-pivot" in classes(by_step[2])
    assert by_step[2].find(f"{SVG}path[@class='pivot']") is not None
    assert [g for g in plan.iter(f"{SVG}g") if "no-return" in classes(g)]
    assert captions(by_step[2]) == ("a failure here undoes: authorize_payment, reserve_stock")
    assert "a person is asked" in tip(by_step[2])  # if its outcome is unknown
    for after in (3, 4):
        assert captions(by_step[after]) == "nothing is undone: a person is asked"


# -- logs built by hand --------------------------------------------------------------------

T0 = 1_800_000_000.0


def submitted(*steps: tuple[str, str, int | None], at: float = T0) -> Event:
    return Event(
        EventType.SAGA_SUBMITTED,
        at,
        data={
            "saga_id": "s-1",
            "catalogue": "checkout",
            "plan_digest": "d",
            "provenance_ref": "p",
            "steps": [{"name": n, "kind": k, "group": g} for n, k, g in steps],
        },
    )


def numbered(events: list[Event]) -> list[Event]:
    return [Event(e.type, e.at, e.step, e.attempt, e.data, seq=n) for n, e in enumerate(events, 1)]


def drawn(events: list[Event]) -> tuple[SagaState, ET.Element, ET.Element, str]:
    events = numbered(events)
    state = replay(events)
    timeline = str(timeline_svg(state, events))
    plan = str(plan_svg(state, None))
    return state, parsed(timeline), parsed(plan), timeline + plan


def test_one_event_and_zero_length_spans() -> None:
    _, timeline, plan, _ = drawn([submitted(("a", "compensable", None))])
    assert sorted(lanes(timeline)) == [0]
    assert sorted(nodes(plan)) == [0]
    _, timeline, _, _ = drawn(
        [
            submitted(("a", "compensable", None)),
            Event(EventType.STEP_STARTED, T0, 0, 1),
            Event(EventType.STEP_SUCCEEDED, T0, 0),
            Event(EventType.SAGA_COMPLETED, T0),
        ]
    )
    (bar,) = bars(lanes(timeline)[0], "attempt")
    assert float(bar.get("width", "0")) >= 3  # still visible


def test_five_hundred_events_are_grouped_per_lane() -> None:
    events = [submitted(("flaky", "compensable", None), ("b", "pivot", None))]
    for n in range(1, 250):
        at = T0 + n * 10
        events.append(Event(EventType.STEP_STARTED, at, 0, n))
        events.append(
            Event(
                EventType.STEP_RETRY_SCHEDULED,
                at + 1,
                0,
                n,
                {"error": f"try {n} failed", "next_attempt_at": at + 5},
            )
        )
    events.append(Event(EventType.STEP_STARTED, T0 + 2500, 0, 250))
    assert len(events) == 500
    state, timeline, _, text = drawn(events)
    lane = lanes(timeline)[0]
    assert len(bars(lane, "attempt")) == pictures.CAP  # 20, a group, 19
    (group,) = [r for r in bars(lane, "attempt") if "group" in classes(r)]
    assert "211 attempts grouped" in tip(group)
    assert "a-open" in classes(bars(lane, "attempt")[-1])  # the last one has no outcome yet
    waits = [r for r in lane.iter(f"{SVG}rect") if "wait" in classes(r)]
    assert len(waits) <= pictures.CAP
    assert len(text) < 120_000
    assert state.steps[0].attempts == 250


def test_events_out_of_order_and_a_span_of_thirty_days() -> None:
    day = 86400.0
    state, timeline, _, text = drawn(
        [
            submitted(("a", "compensable", None), ("b", "pivot", None)),
            Event(EventType.STEP_STARTED, T0 + 5, 0, 1),
            Event(EventType.STEP_SUCCEEDED, T0 + 2, 0),  # a clock behind the other's
            Event(EventType.APPROVAL_REQUESTED, T0 + 6, 1, data={"reason": "big", "expires_at": 0}),
            Event(EventType.APPROVAL_GRANTED, T0 + 30 * day, 1, data={"approver": "ann"}),
            Event(EventType.STEP_STARTED, T0 + 30 * day + 1, 1, 1),
        ]
    )
    assert state.status is SagaStatus.RUNNING
    (bar,) = bars(lanes(timeline)[0], "attempt")
    assert "clock went backwards" in tip(bar)
    assert "+10 d" in text
    assert "+30 d" in text
    (open_bar,) = bars(lanes(timeline)[1], "attempt")
    assert "no outcome recorded" in tip(open_bar)
    approval = lanes(timeline)[1].find(f"{SVG}rect[@class='wait w-approval']")
    assert approval is not None
    assert "30 d 0 h" in tip(approval)


def test_hostile_text_is_escaped_and_cut_short() -> None:
    long = "&" * 10_000
    state, timeline, plan, text = drawn(
        [
            submitted((HOSTILE, "compensable", None), (long, "pivot", None)),
            Event(EventType.STEP_STARTED, T0, 0, 1, {"key": HOSTILE}),
            Event(EventType.STEP_FAILED, T0 + 1, 0, 1, {"error": HOSTILE + long}),
            Event(EventType.COMPENSATION_STARTED, T0 + 1, data={"reason": HOSTILE}),
            Event(EventType.SAGA_COMPENSATED, T0 + 2, data={"reason": long}),
        ]
    )
    assert "<script" not in text
    assert "<img" not in text
    assert "\x00" not in text
    assert "&lt;script&gt;" in text
    assert len(text) < 20_000  # 10 KB strings are cut short
    label = next(t for t in lanes(timeline)[0].iter(f"{SVG}text") if "lane-label" in classes(t))
    assert "<script>" in "".join(label.itertext())  # the parsed text reads as written
    assert state.steps[1].name == long
    assert all(len(t.text or "") <= 6 * pictures.NOTE for t in plan.iter(f"{SVG}title"))


def test_a_parallel_group_is_drawn_in_one_column() -> None:
    _, _, plan, _ = drawn(
        [
            submitted(
                ("hold_a", "compensable", None),
                ("hold_b", "compensable", 1),
                ("hold_c", "compensable", 1),
                ("capture", "pivot", None),
                ("email", "retriable", None),
            )
        ]
    )
    by_step = nodes(plan)
    assert captions(by_step[1]) == "a failure here undoes: hold_c, hold_a"
    assert captions(by_step[2]) == "a failure here undoes: hold_b, hold_a"
    assert captions(by_step[3]) == "a failure here undoes: hold_c, hold_b, hold_a"
    assert captions(by_step[4]) == "nothing is undone: a person is asked"
    circles = [by_step[i].find(f"{SVG}circle") for i in (1, 2)]
    x = [c.get("cx") if c is not None else None for c in circles]
    assert x[0] == x[1]  # side by side in one column, one above the other


# -- the page ------------------------------------------------------------------------------


@pytest.fixture
async def viewer(api: FastAPI, store: Store, clock: FakeClock) -> httpx.AsyncClient:
    c = httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://pivotal")
    token = await add_token(store, "vera", Role.VIEWER, clock)
    form = await c.get("/ui/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf
    reply = await c.post("/ui/login", data={"token": token, "csrf": csrf.group(1)})
    assert reply.status_code == 303
    return c


async def test_the_saga_page_shows_both_pictures_under_its_csp(
    orchestrator: Orchestrator,
    checkout_plan: PlanBuilder,
    faults: Faults,
    viewer: httpx.AsyncClient,
    app: CommerceApp,
) -> None:
    faults.next("ship", Fault.PERMANENT)
    await orchestrator.submit(checkout_plan("o-page"), saga_id="page")
    await orchestrator.run("page")
    reply = await viewer.get("/ui/sagas/page")
    assert reply.status_code == 200
    assert reply.headers["content-security-policy"] == CSP
    html = reply.text
    found = re.findall(r"<svg.*?</svg>", html, re.S)
    assert len(found) == 2
    for svg in found:
        parsed(svg)
        assert " style=" not in svg
        assert "<style" not in svg
        assert "<script" not in svg
    assert 'class="pic plan"' in found[0]
    assert 'class="pic timeline"' in found[1]
    head, steps = html.index('id="rationale"'), html.index("<h2>Steps</h2>")
    assert head < html.index("<svg") < steps  # after the head, before the steps table
    await viewer.aclose()


def test_a_catalogue_the_server_does_not_load_still_draws() -> None:
    events = numbered([submitted(("a", "compensable", None), ("b", "pivot", None))])
    drawn = pictures.for_page(replay(events), events, object())  # no .catalogue(): None
    assert sorted(drawn) == ["plan", "timeline"]
    for svg in drawn.values():
        parsed(svg)


def test_a_call_in_progress_runs_on_until_now() -> None:
    """A saga not at rest: its open attempt is drawn until the time the page is made, so
    a long call grows on a page that follows it; at rest, ``now`` changes nothing."""
    events = [
        submitted(("copy", "pivot", None), ("mail", "retriable", None)),
        Event(EventType.STEP_STARTED, T0 + 1, 0, 1),
    ]
    state = replay(events)
    then = parsed(str(timeline_svg(state, events)))
    later = parsed(str(timeline_svg(state, events, T0 + 600)))
    (short,) = bars(lanes(then)[0], "a-open")
    (long,) = bars(lanes(later)[0], "a-open")
    assert float(long.get("width", "0")) > float(short.get("width", "0"))
    assert "span 10 min 00 s" in ET.tostring(later, encoding="unicode")

    done = [
        *events,
        Event(EventType.STEP_SUCCEEDED, T0 + 2, 0),
        Event(EventType.SAGA_COMPLETED, T0 + 2),
    ]
    at_rest = replay(done)
    assert str(timeline_svg(at_rest, done, T0 + 600)) == str(timeline_svg(at_rest, done))


def test_a_step_settled_by_hand_is_marked_and_a_fork_noted() -> None:
    """Resumed from step 2: step 1, whose shipment failed, was settled by a person (a mark
    on its lane, saying who); the saga's fork is noted on its own lane."""
    state, timeline, _, _ = drawn(
        [
            submitted(
                ("pay", "pivot", None), ("ship", "retriable", None), ("mail", "retriable", None)
            ),
            Event(EventType.STEP_STARTED, T0, 0, 1),
            Event(EventType.STEP_SUCCEEDED, T0 + 1, 0),
            Event(EventType.STEP_STARTED, T0 + 1, 1, 1),
            Event(EventType.STEP_FAILED, T0 + 2, 1, 1, {"error": "carrier refused"}),
            Event(EventType.SAGA_NEEDS_HUMAN, T0 + 2, data={"reason": "ship failed"}),
            Event(
                EventType.SAGA_RESUMED,
                T0 + 60,
                data={
                    "by": "<b>ann</b>",
                    "why": "shipped",
                    "status": "running",
                    "from": 2,
                    "settled": [1],
                    "steps": [],
                },
            ),
            Event(EventType.STEP_STARTED, T0 + 61, 2, 1),
            Event(EventType.STEP_SUCCEEDED, T0 + 62, 2),
            Event(EventType.SAGA_COMPLETED, T0 + 62),
            Event(EventType.SAGA_FORKED, T0 + 90, data={"fork": "fk_1", "by": "ann", "why": "x"}),
        ]
    )
    assert state.status is SagaStatus.COMPLETED
    assert state.steps[1].result == {"settled_by": "<b>ann</b>", "why": "shipped"}
    marks = [p for p in lanes(timeline)[1].iter(f"{SVG}path") if "m-settled" in classes(p)]
    assert len(marks) == 1
    assert "settled by hand by <b>ann</b>" in tip(marks[0])  # escaped in the SVG's text
    assert "forked" in ET.tostring(timeline, encoding="unicode")


# -- a call with no outcome recorded: where it stands, by the ledger (``call_state``) ------


def _left_open(deadline: float | None) -> tuple[SagaState, list[Event]]:
    """A saga whose first call began at T0 + 1 and has no outcome recorded (its deadline:
    when it can no longer land)."""
    events = numbered(
        [
            submitted(("copy", "compensable", None), ("mail", "pivot", None)),
            Event(
                EventType.STEP_STARTED,
                T0 + 1,
                0,
                1,
                {"key": "s-1:0", **({"deadline": deadline} if deadline is not None else {})},
            ),
        ]
    )
    return replay(events), events


def _drawn_at(
    now: float, lease: Lease, expired_at: float | None, deadline: float | None = T0 + 61
) -> tuple[ET.Element, Shown]:
    """The timeline at ``now`` with where the call stands as the page's steps table says it
    (``progress.describe``), and that saying."""
    state, events = _left_open(deadline)
    shown = describe(state.steps[0], None, now, "w-1", lease, expired_at)
    assert shown is not None
    svg = timeline_svg(state, events, now, {0: shown})
    return parsed(str(svg)), shown


def still(lane: ET.Element) -> str:
    found = [t for t in lane.iter(f"{SVG}text") if "still" in classes(t)]
    assert len(found) == 1
    return found[0].text or ""


def right_edge(bar: ET.Element) -> float:
    return float(bar.get("x", "0")) + float(bar.get("width", "0"))


def test_a_call_in_flight_runs_on_until_now_and_says_so() -> None:
    timeline, shown = _drawn_at(T0 + 30, Lease.LIVE, None)
    assert shown.state is CallState.IN_FLIGHT
    lane = lanes(timeline)[0]
    (bar,) = bars(lane, "attempt")
    assert "a-open" in classes(bar)
    assert still(lane).startswith("attempt 1: in flight")
    assert "no outcome yet" not in ET.tostring(timeline, encoding="unicode")
    assert right_edge(bar) == pytest.approx(pictures.WIDTH - pictures.RIGHT, abs=0.2)
    assert "in flight" in tip(bar)


def test_a_call_in_doubt_says_until_when_as_the_page_does() -> None:
    # its holder's lease expired at T0 + 40; its deadline (T0 + 61) is still ahead
    timeline, shown = _drawn_at(T0 + 50, Lease.EXPIRED, T0 + 40)
    assert shown.state is CallState.IN_DOUBT
    lane = lanes(timeline)[0]
    (bar,) = bars(lane, "attempt")
    assert "a-indoubt" in classes(bar)
    assert "a-open" not in classes(bar)
    assert still(lane).startswith(f"attempt 1: in doubt until {moment(T0 + 61)}")
    assert still(lane).startswith("attempt 1: " + summary(shown))
    assert right_edge(bar) == pytest.approx(pictures.WIDTH - pictures.RIGHT, abs=0.2)
    assert "it may still take effect" in tip(bar)


@pytest.mark.parametrize(
    ("lease", "expired_at", "deadline", "ended"),
    [
        (Lease.EXPIRED, T0 + 90, T0 + 61, T0 + 90),  # its lease expired after its deadline
        (Lease.EXPIRED, T0 + 40, T0 + 61, T0 + 61),  # its deadline passed after the expiry
        (Lease.NONE, None, T0 + 61, T0 + 61),  # released: its deadline bounds it
        (Lease.EXPIRED, T0 + 40, None, T0 + 40),  # no deadline recorded: its lease's expiry
    ],
)
def test_a_call_ended_unrecorded_stops_where_the_ledger_proves_it_over(
    lease: Lease, expired_at: float | None, deadline: float | None, ended: float
) -> None:
    now = T0 + 600
    timeline, shown = _drawn_at(now, lease, expired_at, deadline)
    assert shown.state is CallState.UNRECORDED
    lane = lanes(timeline)[0]
    (bar,) = bars(lane, "attempt")
    assert "a-unrecorded" in classes(bar)
    assert "a-open" not in classes(bar)
    assert still(lane).startswith("attempt 1: ended, unrecorded")
    scale = pictures.Scale.of(T0, now - T0)
    assert right_edge(bar) == pytest.approx(scale.x(ended), abs=0.2)  # not at now
    assert f"ended by {pictures.stamp(ended)} UTC" in tip(bar)
    # from then on the saga waits for a worker to settle the call
    waits = [r for r in lane.iter(f"{SVG}rect") if "w-worker" in classes(r)]
    (wait,) = [w for w in waits if "settles it" in tip(w)]
    assert float(wait.get("x", "0")) == pytest.approx(scale.x(ended), abs=0.2)
    assert right_edge(wait) == pytest.approx(scale.x(now), abs=0.2)


def test_a_call_ended_unrecorded_whose_end_the_ledger_does_not_tell_says_so() -> None:
    # released, and no deadline recorded: nothing on the ledger says when it ended
    now = T0 + 600
    timeline, shown = _drawn_at(now, Lease.NONE, None, None)
    assert shown.state is CallState.UNRECORDED
    lane = lanes(timeline)[0]
    (bar,) = bars(lane, "attempt")
    assert "a-unrecorded" in classes(bar)
    assert still(lane).startswith("attempt 1: ended, unrecorded")
    assert "when it ended is not on the ledger" in tip(bar)
    assert right_edge(bar) < pictures.Scale.of(T0, now - T0).x(now) - 100  # not at now


async def test_the_page_picture_says_what_the_steps_table_says(
    store: Store, app: CommerceApp, clock: FakeClock, viewer: httpx.AsyncClient
) -> None:
    """A worker went quiet after its intent; once its lease and the call's deadline are
    past, the page's steps table and its timeline both say "ended, unrecorded", and the
    bar stops where the ledger proves the call over, not at the time the page is made."""
    crash = CrashAt(CrashSite(Point.AFTER_INTENT, 0))
    worker = Orchestrator(
        store, app, clock=clock, owner="w-1", rng=random.Random(0), hook=crash, lease_ttl=60
    )
    with pytest.raises(SimulatedCrash):
        await worker.execute(parse_plan(plan_body("o-1")), saga_id="quiet")
    clock.advance(5)
    html = (await viewer.get("/ui/sagas/quiet")).text
    (timeline,) = [parsed(svg) for svg in re.findall(r"<svg.*?</svg>", html, re.S)][1:]
    assert still(lanes(timeline)[0]).startswith("attempt 1: in flight")
    assert "no outcome yet" not in html

    lease = await store.lease_of("quiet")
    assert lease is not None
    expired, deadline = lease[2], (await store.load("quiet")).state.steps[0].doubt_until
    assert expired is not None
    assert deadline is not None
    clock.advance(600)
    html = (await viewer.get("/ui/sagas/quiet")).text
    assert "ended, unrecorded · attempt 1" in html  # the steps table
    (timeline,) = [parsed(svg) for svg in re.findall(r"<svg.*?</svg>", html, re.S)][1:]
    lane = lanes(timeline)[0]
    assert still(lane).startswith("attempt 1: ended, unrecorded")
    (bar,) = bars(lane, "attempt")
    assert f"ended by {pictures.stamp(max(expired, deadline))} UTC" in tip(bar)
    assert "no outcome yet" not in html
    await viewer.aclose()
