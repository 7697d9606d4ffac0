"""Validating a plan calls the app's code (its facts, the steps' preconditions): on every
surface that validates (a submission, the API's and MCP's validate, a planner's attempt)
that code runs on a facts thread, bounded by the catalogue's default_timeout. A callback
that hangs refuses the plan in its time and never stalls the event loop; one that raises is
contained at once; many plans validated together all get a thread in their turn."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from pivotal import (
    App,
    Catalogue,
    ErrorCode,
    Orchestrator,
    PlanRejected,
    SagaStatus,
    StepContext,
    parse_plan,
)
from pivotal.admission.validation import on_facts_thread, validate_bounded
from pivotal.declarations.rules import Check
from pivotal.people.principals import Role, hash_token
from pivotal.server import create_app

LIMIT = 0.2  # seconds the catalogue allows a call of the app's code; what hangs waits that


class Order(BaseModel):
    order_id: str


@pytest.fixture
def stuck() -> Iterator[threading.Event]:
    """Released when the test ends: what hangs until then lets its thread go."""
    event = threading.Event()
    yield event
    event.set()


class Shop(App):
    """The app, its facts answered by ``answer`` (which may hang or raise)."""

    def __init__(self, catalogue: Catalogue, answer: Any = None) -> None:
        super().__init__([catalogue])
        self.answer = answer

    def facts(self, context: Mapping[str, object]) -> dict[str, object]:
        return {} if self.answer is None else dict(self.answer(context))


def shop(precondition: Any = None, limit: float = LIMIT) -> Catalogue:
    """A catalogue whose rule reads the app's facts (so validating asks them)."""
    catalogue = Catalogue(
        "shop",
        default_timeout=limit,
        rules=[Check(lambda plan, facts: None, "the order is known to the shop")],
    )

    @catalogue.pivot(precondition=precondition)
    async def charge(args: Order, ctx: StepContext) -> dict[str, str]:
        return {"charged": args.order_id}

    return catalogue


def plan(order_id: str = "o-1") -> Any:
    return parse_plan(
        {"catalogue": "shop", "steps": [{"name": "charge", "args": {"order_id": order_id}}]}
    )


def hanging(stuck: threading.Event) -> Any:
    def facts(context: Mapping[str, object]) -> dict[str, object]:
        stuck.wait(30)
        return {}

    return facts


async def test_a_submission_whose_facts_hang_is_refused_in_its_time(store, clock, stuck) -> None:
    app = Shop(shop(), hanging(stuck))
    orchestrator = Orchestrator(store, app, clock=clock)

    with pytest.raises(PlanRejected) as refused:
        await orchestrator.submit(plan(), saga_id="hangs")

    [error] = refused.value.errors
    assert error.code is ErrorCode.FACTS_ERROR
    assert f"the trusted facts did not answer within {LIMIT:g}s" in error.message
    assert await store.load("hangs") is None  # nothing recorded


async def test_a_precondition_that_hangs_is_bounded_too(store, clock, stuck) -> None:
    def precondition(args: Order) -> str | None:
        stuck.wait(30)
        return None

    orchestrator = Orchestrator(store, shop(precondition), clock=clock)
    with pytest.raises(PlanRejected, match="did not answer within"):
        await orchestrator.execute(plan(), saga_id="slow")


async def test_the_loop_goes_on_while_the_facts_hang(stuck) -> None:
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(ticking())
    errors = await validate_bounded(plan(), shop(), facts=Shop(shop(), hanging(stuck)).facts)
    other.cancel()
    assert [e.code for e in errors] == [ErrorCode.FACTS_ERROR]
    assert ticks > 10  # the loop ran other work while the facts were asked


async def test_what_the_app_raises_comes_back_at_once() -> None:
    def broken() -> None:
        raise KeyError("no such order")

    with pytest.raises(KeyError, match="no such order"):
        await on_facts_thread(broken, 3600)  # not left waiting for the hour


async def test_many_plans_validated_together_each_get_a_thread_in_turn(store, clock) -> None:
    asked = 0

    def facts(context: Mapping[str, object]) -> dict[str, object]:
        nonlocal asked
        asked += 1
        return {}

    app = Shop(shop(limit=60), facts)  # a minute: the turn of every one comes well within
    orchestrator = Orchestrator(store, app, clock=clock)
    done = await asyncio.gather(
        *(orchestrator.submit(plan(f"o-{n}"), saga_id=f"s-{n}") for n in range(40))
    )
    assert [s.status for s in done] == [SagaStatus.SUBMITTED] * 40
    assert asked == 40


async def test_the_api_answers_other_requests_while_a_validation_hangs(store, clock, stuck) -> None:
    # the facts answer only once the test lets them (well within the bound of an hour)
    api = create_app(store, Shop(shop(limit=3600), hanging(stuck)), clock=clock)
    token = "pvt_test_agent"
    await store.create_token("agent", Role.AGENT.value, hash_token(token), clock.now())
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://pivotal") as c:
        body = plan().model_dump_json()
        validating = asyncio.create_task(
            c.post("/v1/plans/validate", content=body, headers=headers)
        )
        health = await c.get("/healthz")
        assert health.status_code == 200
        assert not validating.done()  # still asking the facts, and the server went on
        stuck.set()  # the facts answer now
        reply = await validating
    assert reply.status_code == 200
    assert reply.json() == {"valid": True, "errors": []}
