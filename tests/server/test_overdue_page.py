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
    RetryPolicy,
    StepContext,
    StepStatus,
    Transient,
    parse_plan,
)
from pivotal.engine.journal import RunOptions
from pivotal.principals import Role
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
    assert "Tries: attempts of the step's action so far" in page

    due = state.steps[0].next_attempt_at
    assert due is not None
    clock.advance(due - clock.now() + 125)  # due 2 minutes ago, and no worker ran it
    page = html.unescape((await viewer.get("/ui/sagas/b1")).text)
    assert '<div class="error small overdue">overdue 2m 5s</div>' in page


async def test_the_dead_letters_page_says_what_its_tries_count(login: Login) -> None:
    page = html.unescape((await (await login(Role.OPERATOR)).get("/ui/dead-letters")).text)
    assert "tried 4 times before it was parked, and retried once since" in page
