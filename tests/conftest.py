"""Shared fixtures: a fake clock, a temporary ledger, the commerce app and plan builders."""

from __future__ import annotations

import asyncio
import json
import os
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pivotal import Catalogue, FakeClock, Orchestrator, Plan, SagaState, SQLiteStore, parse_plan
from pivotal.examples.commerce import CommerceApp, CommerceServices, Faults, create_app
from pivotal.store import Store
from pivotal.store.postgres import PostgresStore

# `pivotal worker` runs one process in the tests (its default is one per core), in this
# process and in those it starts; a test of --processes N says so
os.environ["PIVOTAL_WORKER_PROCESSES"] = "1"

PlanBuilder = Callable[..., Plan]
SMALL_ORDER = "4490"  # an open order of 120.00 in the test app
Checker = Callable[[str], Awaitable[SagaState]]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _admin_url() -> str:
    return os.environ.get("PIVOTAL_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


def _database_url(name: str) -> str:
    return _admin_url().rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    """A migrated database built once per session; each test clones it."""
    try:
        admin = psycopg.connect(_admin_url(), autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL is required in CI and is not reachable: {exc}")
        pytest.skip("PostgreSQL is not reachable")
    name = f"pivotal_template_{os.getpid()}"
    with admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")

        async def migrate() -> None:
            async with PostgresStore(_database_url(name), migrate=True):
                pass

        with ThreadPoolExecutor(1) as pool:  # fixtures may be set up inside a running loop
            pool.submit(asyncio.run, migrate()).result()
        yield name
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database for one test, cloned from the session's template."""
    template = request.getfixturevalue("postgres_template")
    name = f"pivotal_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_admin_url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
        yield _database_url(name)
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def postgres_empty_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database with no schema at all."""
    request.getfixturevalue("postgres_template")  # skips or fails without a server
    name = f"pivotal_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_admin_url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        yield _database_url(name)
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Every test that uses the ledger runs once per backend."""
    ledger: SQLiteStore | PostgresStore
    if request.param == "sqlite":
        ledger = SQLiteStore(tmp_path / "ledger.db")
    else:
        ledger = PostgresStore(request.getfixturevalue("postgres_url"))
    await ledger.open()
    yield ledger
    await ledger.close()


@pytest.fixture
def faults() -> Faults:
    return Faults()


@pytest.fixture
def app(tmp_path: Path, faults: Faults) -> Iterator[CommerceApp]:
    commerce = create_app(tmp_path / "commerce.db", faults)
    # Beside the seeded order 4471 (180, over the approval threshold), an order of 120.
    commerce.services.order(
        SMALL_ORDER,
        customer="c-4490",
        amount="120.00",
        sku="sku-1",
        quantity=1,
        recipient="ana@example.com",
    )
    yield commerce
    commerce.services.close()


@pytest.fixture
def services(app: CommerceApp) -> CommerceServices:
    return app.services


@pytest.fixture
def orchestrator(store: Store, app: CommerceApp, clock: FakeClock) -> Orchestrator:
    return Orchestrator(store, app, clock=clock, rng=random.Random(0))


@pytest.fixture
def make_orchestrator(store: Store, clock: FakeClock) -> Callable[[Catalogue], Orchestrator]:
    """An orchestrator over a custom catalogue, sharing the ledger and the clock."""

    def make(catalogue: Catalogue) -> Orchestrator:
        return Orchestrator(store, catalogue, clock=clock, rng=random.Random(0))

    return make


def reserve(
    order_id: str, sku: str = "sku-1", quantity: int = 2, warehouse: str = "A"
) -> dict[str, Any]:
    return {
        "name": "reserve_stock",
        "args": {"order_id": order_id, "sku": sku, "quantity": quantity, "warehouse": warehouse},
    }


def open_order(
    services: CommerceServices,
    order_id: str,
    *,
    amount: str,
    sku: str,
    quantity: int,
    warehouse: str = "A",
) -> None:
    """An open order in the order system for a plan a test builds (the shipped catalogues
    bind every plan to its order's facts): made when it is new; an order a test made
    without all its details gets the missing ones."""
    wanted: dict[str, Any] = {
        "amount": amount,
        "lines": [{"sku": sku, "quantity": quantity}],
        "warehouse": warehouse,
        "recipient": f"{order_id}@example.com",
    }
    if services.order_status(order_id) is None:
        services.order(order_id, customer=f"c-{order_id}", **wanted)
        return
    row = services.db.execute(
        "SELECT details FROM orders WHERE order_id = ?", (order_id,)
    ).fetchone()
    details = json.loads(row[0] or "{}")
    if "sku" in details and "lines" not in details:
        del wanted["lines"]  # its one line is named by sku and quantity
    missing = {k: v for k, v in wanted.items() if k not in details}
    if missing:
        services.db.execute(
            "UPDATE orders SET details = ? WHERE order_id = ?",
            (json.dumps(details | missing), order_id),
        )


@pytest.fixture
def checkout_plan(app: CommerceApp) -> PlanBuilder:
    """checkout: reserve_stock, charge_payment, create_shipment (``order`` reorders them),
    for an open order of the test app with these lines and amount (made if it is new)."""

    def build(
        order_id: str = "o-1",
        *,
        sku: str = "sku-1",
        quantity: int = 2,
        amount: str = "49.90",
        warehouse: str = "A",
        order: tuple[str, ...] = ("reserve_stock", "charge_payment", "create_shipment"),
        rationale: str = "customer checkout",
    ) -> Plan:
        open_order(
            app.services, order_id, amount=amount, sku=sku, quantity=quantity, warehouse=warehouse
        )
        calls: dict[str, dict[str, Any]] = {
            "reserve_stock": reserve(order_id, sku, quantity, warehouse),
            "charge_payment": {
                "name": "charge_payment",
                "args": {"order_id": order_id, "amount": amount},
            },
            "create_shipment": {
                "name": "create_shipment",
                "args": {"order_id": order_id, "warehouse": warehouse},
            },
        }
        return parse_plan(
            {
                "catalogue": "checkout",
                "steps": [calls[name] for name in order],
                "rationale": rationale,
            }
        )

    return build


@pytest.fixture
def fulfilment_plan(app: CommerceApp) -> PlanBuilder:
    """fulfilment: reserve, authorize, capture (pivot), ship, confirm; what is not given
    comes from the order's facts in the test app (an order it lacks is made)."""

    def build(
        order_id: str = SMALL_ORDER,
        *,
        amount: str | None = None,
        sku: str | None = None,
        quantity: int | None = None,
        rationale: str = "ship order to the customer",
    ) -> Plan:
        facts = app.services.order_facts(order_id)
        line = (facts.get("lines") or [{}])[0]
        amount = amount or str(facts.get("amount", "120.00"))
        sku = sku or str(line.get("sku", "sku-1"))
        quantity = quantity or int(line.get("quantity", 1))
        open_order(app.services, order_id, amount=amount, sku=sku, quantity=quantity)
        recipient = app.services.order_facts(order_id)["recipient"]  # made if it was missing
        payment = {"order_id": order_id, "amount": amount}
        return parse_plan(
            {
                "catalogue": "fulfilment",
                "steps": [
                    reserve(order_id, sku, quantity),
                    {"name": "authorize_payment", "args": payment},
                    {"name": "capture_payment", "args": payment},
                    {"name": "create_shipment", "args": {"order_id": order_id}},
                    {
                        "name": "send_confirmation",
                        "args": {"order_id": order_id, "recipient": recipient},
                    },
                ],
                "rationale": rationale,
            }
        )

    return build


async def assert_replay_matches(orchestrator: Orchestrator, saga_id: str) -> SagaState:
    """The event log folds into exactly the stored state."""
    stored = (await orchestrator.get(saga_id)).state
    assert await orchestrator.replayed(saga_id) == stored
    return stored


def assert_effects_once(services: CommerceServices) -> None:
    """Every idempotency key made at most one effect; no undo was applied twice."""
    per_key = services.effects_per_key()
    assert all(n == 1 for n in per_key.values()), per_key
    for op in ("refund", "release", "void", "cancel_shipment"):
        keys = Counter(row["key"] for row in services.rows("effects", op=op))
        assert all(n == 1 for n in keys.values()), (op, keys)
        assert all(key.endswith(":undo") for key in keys), (op, keys)
    # each reversal that found something changed exactly one record, and vice versa
    for op, table, field, status in (
        ("refund", "payments", "refunded", "refunded"),
        ("void", "payments", "voided", "voided"),
        ("release", "reservations", "released", "released"),
        ("cancel_shipment", "shipments", "cancelled", "cancelled"),
    ):
        applied = [
            json.loads(r["result"])[field]
            for r in services.rows("effects", op=op)
            if json.loads(r["result"])[field] is not None
        ]
        changed = [r["id"] for r in services.rows(table, status=status)]
        assert len(applied) == len(set(applied)), (op, applied)
        assert sorted(applied) == sorted(changed), (op, applied, changed)


Audit = Callable[[Orchestrator, CommerceServices, str], Awaitable[SagaState]]


async def _audit(orchestrator: Orchestrator, services: CommerceServices, saga_id: str) -> SagaState:
    state = await assert_replay_matches(orchestrator, saga_id)
    assert_effects_once(services)
    return state


@pytest.fixture
def audit() -> Audit:
    """The end-of-scenario audit for any orchestrator and services (stateless)."""
    return _audit


@pytest.fixture
def check(orchestrator: Orchestrator, services: CommerceServices) -> Checker:
    """End-of-scenario audit: replay equals state and every effect happened once."""

    async def run(saga_id: str) -> SagaState:
        return await _audit(orchestrator, services, saga_id)

    return run
