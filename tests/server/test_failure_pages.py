"""Why a saga failed, on its page and through the API: retries of a step folded into one
row (each attempt kept inside it), a failed call's traceback folded under its row, results
as JSON, and no secret anywhere."""

from __future__ import annotations

import asyncio
import html
import random
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from server_api import Clients, MakeClient, add_token
from typer.testing import CliRunner

from pivotal import (
    Catalogue,
    FakeClock,
    Orchestrator,
    Permanent,
    RetryPolicy,
    SagaStatus,
    StepContext,
    Transient,
    parse_plan,
)
from pivotal.cli import cli
from pivotal.people.principals import Role
from pivotal.store import Store
from secret_forms import FORMS

# the pages do not depend on the ledger: one backend is enough
pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

Login = Callable[[Role], Awaitable[httpx.AsyncClient]]
SECRET_URL = "https://ops:hunter2@stock.example/v1/hold?token=tok-123"
SECRETS = ("hunter2", "tok-123", "s3cr3t")


class Item(BaseModel):
    n: int = 0


def call_stock(url: str) -> None:
    raise Transient(f"stock service busy at {url}")


def failing() -> Catalogue:
    shop = Catalogue("failing", doubt_grace=0.0)
    tries = {"n": 0}
    spaced = RetryPolicy(max_attempts=5, base_delay=2.0, multiplier=1.0, jitter=False)

    async def undo(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    @shop.compensable(undo=undo, retry=spaced)
    async def reserve(args: Item, ctx: StepContext) -> dict[str, Any]:
        tries["n"] += 1
        if tries["n"] <= 3:
            call_stock(SECRET_URL)
        return {"reservation": "r-1", "held": True}

    @shop.compensable(undo=undo, retry=RetryPolicy(max_attempts=1))
    async def charge(args: Item, ctx: StepContext) -> None:
        raise Permanent("card declined: password=s3cr3t")

    return shop


@pytest.fixture
async def failed(store: Store, clock: FakeClock) -> str:
    """Saga "f1": reserve failed three times, then held; charge was declined; compensated."""
    orch = Orchestrator(store, failing(), clock=clock, rng=random.Random(0))
    plan = {"catalogue": "failing", "steps": [{"name": "reserve"}, {"name": "charge"}]}
    state = await orch.execute(parse_plan(plan), saga_id="f1")
    assert state.status is SagaStatus.COMPENSATED
    return "f1"


def timeline_of(page: str) -> str:
    """The page from its timeline on (the timeline is its last part)."""
    return page[page.index('id="timeline"') :]


async def test_the_retries_are_one_row_with_each_attempt_folded_inside(
    login: Login, failed: str
) -> None:
    page = (await (await login(Role.VIEWER)).get(f"/ui/sagas/{failed}")).text
    timeline = timeline_of(page)
    text = html.unescape(timeline)

    folded = re.search(
        r'<details class="attempts"><summary>(.*?)</summary>(.*?)</table>\s*</details>', text, re.S
    )
    assert folded, timeline
    summary, inside = folded.groups()
    assert summary.startswith("3 attempts, last: Transient: stock service busy at ")
    assert re.search(r"; next attempt at \d\d:\d\d:\d\d UTC \(in 2\.0s\)$", summary)
    assert inside.count('class="e-step_started"') == 3  # every attempt, inside the fold
    assert inside.count('class="e-step_retry_scheduled"') == 3
    # outside the fold: the row of the group, then the fourth attempt, which held
    outside = text.replace(inside, "")
    assert outside.count("e-step_retry_scheduled") == 1
    assert '{"held": true, "reservation": "r-1"}' in text  # JSON, never a Python repr
    assert "{'" not in text


async def test_a_failed_calls_traceback_is_folded_under_its_row(login: Login, failed: str) -> None:
    page = (await (await login(Role.VIEWER)).get(f"/ui/sagas/{failed}")).text
    text = html.unescape(timeline_of(page))

    # the declined charge: its row, then a row holding its folded traceback
    declined = re.search(
        r'<tr class="e-step_failed">.*?</tr>\s*<tr class="trace-row">.*?'
        r'<details class="trace"><summary>Traceback: (.*?)</summary><pre class="rationale">'
        r"(.*?)</pre>",
        text,
        re.S,
    )
    assert declined, text
    where, trace = declined.groups()
    assert re.fullmatch(r"test_failure_pages\.py:\d+ in charge", where)
    assert 'raise Permanent("card declined: password=s3cr3t")' not in trace  # redacted
    assert "pivotal.errors.Permanent: card declined: password=***" in trace
    assert "engine.py" not in trace
    # each retried attempt's own traceback, inside the fold
    assert text.count("in call_stock</summary>") == 4  # the group's last, and each attempt
    assert "raise Transient(f&#34;stock" in page  # the source line, escaped as text
    assert 'raise Transient(f"stock service busy at {url}")' in text


async def test_no_secret_reaches_the_timeline(login: Login, failed: str) -> None:
    page = (await (await login(Role.VIEWER)).get(f"/ui/sagas/{failed}")).text
    timeline = timeline_of(page)
    for secret in SECRETS:
        assert secret not in timeline
    assert "https://ops:***@stock.example/v1/hold?token=***" in html.unescape(timeline)
    steps = page[page.index("<h2>Steps</h2>") : page.index('id="timeline"')]
    assert "password=***" in steps  # the step's error in the steps table, redacted too
    for secret in SECRETS:
        assert secret not in steps


async def test_the_api_gives_each_failures_trace_redacted(as_role: Clients, failed: str) -> None:
    reply = await as_role[Role.VIEWER].get(f"/v1/sagas/{failed}/events")

    assert reply.status_code == 200
    for secret in SECRETS:
        assert secret not in reply.text
    events = reply.json()["events"]
    traced = {(e["type"], e["attempt"]) for e in events if "trace" in e["data"]}
    assert traced == {
        ("step_retry_scheduled", 1),
        ("step_retry_scheduled", 2),
        ("step_retry_scheduled", 3),
        ("step_failed", 1),
    }
    retry = next(e for e in events if e["type"] == "step_retry_scheduled")
    *frames, last = retry["data"]["trace"]
    assert [f["function"] for f in frames] == ["reserve", "call_stock"]
    assert last["exception"] == "pivotal.errors.Transient"
    assert "https://ops:***@stock.example/v1/hold?token=***" in last["message"]
    assert all("trace" not in e["data"] for e in events if e["type"] == "step_succeeded")


async def test_no_surface_shows_a_secret_the_errors_quote(
    login: Login, client: MakeClient, store: Store, clock: FakeClock, failed: str
) -> None:
    """The steps' errors and results, the reason, the events and the pictures: every view of
    the saga goes through one redaction."""
    viewer = await login(Role.VIEWER)
    api = client(await add_token(store, "reader", Role.VIEWER, clock))
    shown = {
        "page": (await viewer.get(f"/ui/sagas/{failed}")).text,
        "live": (await viewer.get(f"/ui/sagas/{failed}/live?part=head")).text,
        "api": (await api.get(f"/v1/sagas/{failed}")).text,
        "events": (await api.get(f"/v1/sagas/{failed}/events")).text,
    }
    for where, text in shown.items():
        for secret in SECRETS:
            assert secret not in text, (where, secret)
    assert "password=***" in shown["api"]
    assert "<svg" in shown["live"]  # the pictures' titles too


async def test_every_form_of_a_secret_is_hidden_on_every_surface(
    login: Login, client: MakeClient, store: Store, clock: FakeClock
) -> None:
    """A provider's error quoting every form a secret takes (an Authorization header, a
    bearer or Pivotal token, ``password: ...``): no surface that shows it shows one."""
    shop = Catalogue("leaky")
    told = " | ".join(text for text, _ in FORMS)

    @shop.compensable(undo=lambda args, result, ctx: None, retry=RetryPolicy(max_attempts=1))
    async def charge(args: Item, ctx: StepContext) -> None:
        raise Permanent(f"provider refused: {told}")

    orch = Orchestrator(store, shop, clock=clock)
    plan = parse_plan({"catalogue": "leaky", "steps": [{"name": "charge"}]})
    state = await orch.execute(plan, saga_id="leaky-1")
    assert state.status is SagaStatus.COMPENSATED
    viewer = await login(Role.VIEWER)
    api = client(await add_token(store, "reader", Role.VIEWER, clock))
    ledger = f"sqlite:///{store.path}"  # type: ignore[attr-defined]
    cli_args = ["--db", ledger, "sagas", "show", "leaky-1", "--verbose"]
    command = await asyncio.to_thread(CliRunner().invoke, cli, cli_args)
    assert command.exit_code == 0, command.output
    shown = {
        "page": (await viewer.get("/ui/sagas/leaky-1")).text,
        "live": (await viewer.get("/ui/sagas/leaky-1/live?part=head")).text,
        "api": (await api.get("/v1/sagas/leaky-1")).text,
        "events": (await api.get("/v1/sagas/leaky-1/events")).text,
        "sagas show": command.output,
    }
    for where, text in shown.items():
        assert "provider refused" in html.unescape(text), where
        for _, secret in FORMS:
            assert secret not in text, (where, secret)
