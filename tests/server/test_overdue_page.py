"""The saga's page marks a retry that is overdue (due, and nothing picked it up) and says
what its tries count; the dead letters page says what "4 + 0" means."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from pivotal import (
    Catalogue,
    FakeClock,
    Orchestrator,
    Permanent,
    RetryPolicy,
    StepContext,
    StepStatus,
    Transient,
    parse_plan,
)
from pivotal.engine.journal import RunOptions
from pivotal.people.principals import Role
from pivotal.store import Store

pytestmark = pytest.mark.parametrize("store", ["sqlite"], indirect=True)

Login = Callable[[Role], Awaitable[httpx.AsyncClient]]


class Item(BaseModel):
    n: int = 0


def busy() -> Catalogue:
    shop = Catalogue("busy", doubt_grace=0.0)
    minute = RetryPolicy(max_attempts=5, base_delay=60.0, multiplier=1.0, jitter=False)

    async def undo(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    @shop.compensable(undo=undo, retry=minute)
    async def reserve(args: Item, ctx: StepContext) -> None:
        raise Transient("stock service busy")

    return shop


async def test_an_overdue_retry_is_marked_on_the_saga_page(
    login: Login, store: Store, clock: FakeClock
) -> None:
    orch = Orchestrator(store, busy(), clock=clock)
    await orch.submit(
        parse_plan({"catalogue": "busy", "steps": [{"name": "reserve"}]}), saga_id="b1"
    )
    state = await orch.run("b1", options=RunOptions(max_inline_wait=1.0))  # then a worker
    assert state.steps[0].status is StepStatus.RETRY_WAIT  # due a minute from now
    viewer = await login(Role.VIEWER)

    page = html.unescape((await viewer.get("/ui/sagas/b1")).text)
    assert "retry_wait" in page
    assert "overdue" not in page.split("<h2>Steps</h2>")[1].split("</table>")[0]
    assert "Tries: attempts of the step's action so far." in page
    assert "is a worker running?" not in page

    due = state.steps[0].next_attempt_at
    assert due is not None
    clock.advance(due - clock.now() + 125)  # due 2 minutes ago, and no worker ran it
    page = html.unescape((await viewer.get("/ui/sagas/b1")).text)
    assert '<div class="error small overdue">overdue 2m 5s</div>' in page
    assert "nothing has picked it up: is a worker running?" in page


def parks() -> Catalogue:
    shop = Catalogue("parks", doubt_grace=0.0)
    once = RetryPolicy(max_attempts=1)

    async def fine(args: Item, result: Any, ctx: StepContext) -> None:
        return None

    async def stuck(args: Item, result: Any, ctx: StepContext) -> None:
        raise Transient("stock service busy: the hold stays")

    @shop.compensable(undo=stuck, retry=once, undo_retry=RetryPolicy(max_attempts=2, jitter=False))
    async def hold(args: Item, ctx: StepContext) -> dict[str, Any]:
        return {"hold": "h-1"}

    @shop.compensable(undo=fine, retry=once)
    async def charge(args: Item, ctx: StepContext) -> None:
        raise Permanent("card declined")

    return shop


async def test_the_dead_letters_page_says_what_its_tries_count_and_marks_an_overdue_retry(
    login: Login, store: Store, clock: FakeClock
) -> None:
    orch = Orchestrator(store, parks(), clock=clock)
    plan = {"catalogue": "parks", "steps": [{"name": "hold"}, {"name": "charge"}]}
    await orch.execute(parse_plan(plan), saga_id="p1")
    [letter] = await store.dead_letters("open")
    assert letter.next_retry_at is not None  # a sweep retries it then
    operator = await login(Role.OPERATOR)

    page = html.unescape((await operator.get("/ui/dead-letters")).text)
    assert f'title="{letter.attempts} tries before it was parked, 0 retries since"' in page
    assert "tried 4 times before it was parked, and retried once since" in page
    assert "overdue" not in page

    clock.advance(letter.next_retry_at - clock.now() + 61)  # no sweep ran
    page = html.unescape((await operator.get("/ui/dead-letters")).text)
    assert '<div class="error small overdue">overdue 1m 1s</div>' in page
