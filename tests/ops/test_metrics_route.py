"""``GET /metrics`` of the HTTP API (both backends): a token of any role, the ledger gauges
read at scrape time, the API's own counters, and a scrape that survives a broken ledger."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from pivotal import FakeClock, Orchestrator
from pivotal.examples.commerce import CommerceApp
from pivotal.observability.metrics import PivotalMetrics
from pivotal.people.principals import Role, hash_token
from pivotal.server import create_app
from pivotal.store import Store

# The seeded order order-1 of the example app: two of sku-1 for 49.90.
PLAN = {
    "catalogue": "checkout",
    "steps": [
        {
            "name": "reserve_stock",
            "args": {"order_id": "order-1", "sku": "sku-1", "quantity": 2, "warehouse": "A"},
        },
        {"name": "charge_payment", "args": {"order_id": "order-1", "amount": "49.90"}},
    ],
    "rationale": "customer checkout",
}


@pytest.fixture
def metrics() -> PivotalMetrics:
    return PivotalMetrics()


@pytest.fixture
def api(store: Store, app: CommerceApp, clock: FakeClock, metrics: PivotalMetrics) -> FastAPI:
    return create_app(store, app, clock=clock, metrics=metrics)


@pytest.fixture
async def http(api: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api), base_url="http://pivotal"
    ) as client:
        yield client


async def token(store: Store, role: Role, clock: FakeClock) -> dict[str, str]:
    secret = f"pvt_test_metrics_{role.value}"
    await store.create_token(f"m-{role.value}", role.value, hash_token(secret), clock.now())
    return {"Authorization": f"Bearer {secret}"}


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, frozenset(labels.items())))


async def test_metrics_need_a_token(http: httpx.AsyncClient) -> None:
    assert (await http.get("/metrics")).status_code == 401
    wrong = await http.get("/metrics", headers={"Authorization": "Bearer pvt_nope"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "unauthorized"


async def test_every_role_may_read_them(
    http: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    for role in Role:
        reply = await http.get("/metrics", headers=await token(store, role, clock))
        assert reply.status_code == 200, (role, reply.text)
        assert reply.headers["content-type"].startswith("text/plain")
        assert sample(reply.text, "pivotal_ledger_scrape_error") == 0


async def test_gauges_come_from_the_ledger_and_counters_from_this_process(
    http: httpx.AsyncClient,
    store: Store,
    app: CommerceApp,
    clock: FakeClock,
    checkout_plan,
) -> None:
    agent = await token(store, Role.AGENT, clock)
    viewer = await token(store, Role.VIEWER, clock)
    submitted = await http.post(
        "/v1/sagas?saga_id=s-1", content=json.dumps(PLAN).encode(), headers=agent
    )
    assert submitted.status_code == 201, submitted.text
    # another process (a worker) runs a saga in the same ledger
    other = Orchestrator(store, app, clock=clock, rng=random.Random(0))
    await other.execute(checkout_plan("o-9"), saga_id="elsewhere")
    await store.beat_worker("w1", clock.now() - 5)
    clock.advance(1)

    text = (await http.get("/metrics", headers=viewer)).text

    assert sample(text, "pivotal_sagas", status="submitted") == 1
    assert sample(text, "pivotal_sagas", status="completed") == 1
    assert sample(text, "pivotal_sagas", status="compensating") == 0
    assert sample(text, "pivotal_workers_alive") == 1
    assert sample(text, "pivotal_worker_heartbeat_age_seconds") == 6
    assert (
        sample(
            text,
            "pivotal_outbox_pending",
        )
        >= 1
    )  # saga.completed, not relayed
    # the API counted the submission it committed, not the other process's saga
    assert sample(text, "pivotal_sagas_submitted_total", catalogue="checkout") == 1
    # (started at zero for every catalogue of the app, so a first one is an increase)
    completed = {"catalogue": "checkout", "status": "completed"}
    assert sample(text, "pivotal_sagas_finished_total", **completed) == 0


async def test_a_broken_ledger_read_does_not_break_the_scrape(
    http: httpx.AsyncClient, store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    viewer = await token(store, Role.VIEWER, clock)
    assert sample((await http.get("/metrics", headers=viewer)).text, "pivotal_workers_alive") == 0

    async def broken(now: float, alive_within: float = 60.0) -> None:
        raise ConnectionError("the ledger went away")

    monkeypatch.setattr(store, "ops_snapshot", broken)
    reply = await http.get("/metrics", headers=viewer)

    assert reply.status_code == 200
    assert sample(reply.text, "pivotal_ledger_scrape_error") == 1
    assert sample(reply.text, "pivotal_workers_alive") is None
    assert sample(reply.text, "pivotal_lease_takeovers_total") == 0
