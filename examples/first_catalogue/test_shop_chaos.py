# examples/first_catalogue/test_shop_chaos.py
"""Crash the shop's sagas at every point they reach and check that nothing was lost or done
twice. Run `pytest` in this folder, with pivotal[testing] installed."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest
from fakeshop import FakeServices
from shop import create_app

from pivotal import App, parse_plan
from pivotal.testing import Chaos, ChaosScenario, trace

HERE = Path(__file__).parent
PAID = parse_plan((HERE / "order-4471.json").read_text())
DECLINED = parse_plan(  # order 9's card issuer declines the capture
    {
        "catalogue": "payments",
        "steps": [
            {"name": "hold_payment", "args": {"order_id": "9", "amount": "120.00"}},
            {"name": "capture_payment", "args": {"order_id": "9", "amount": "120.00"}},
        ],
    }
)


class ShopProbe:
    """What the services themselves say happened: the other half of every invariant."""

    def __init__(self, services: FakeServices) -> None:
        self.db = services.db

    def effects(self) -> Mapping[str, int]:
        """For each action key, how many effects it made (more than one is a bug)."""
        counts: dict[str, int] = {}
        for table in ("holds", "captures", "emails"):
            for (key,) in self.db.execute(f"SELECT key FROM {table}"):
                counts[key] = counts.get(key, 0) + 1
        return counts

    def in_place(self, key: str) -> bool:
        """Whether the effect made with action key ``key`` exists and was not undone."""
        queries = (
            "SELECT 1 FROM holds WHERE key = ? AND status != 'released'",
            "SELECT 1 FROM captures WHERE key = ?",
            "SELECT 1 FROM emails WHERE key = ?",
        )
        return any(self.db.execute(q, (key,)).fetchone() for q in queries)


class ShopWorld:
    """Fresh services for one run: in memory, or in ``folder`` when a worker process that
    is killed must share them."""

    def __init__(self, folder: Path | None = None) -> None:
        self.services = FakeServices(":memory:" if folder is None else str(folder / "shop.db"))
        self.app: App = create_app(self.services)
        self.probe = ShopProbe(self.services)

    def close(self) -> None:
        self.services.db.close()


SCENARIOS = [
    ChaosScenario[ShopWorld]("paid", PAID),  # approved, captured, receipt sent
    ChaosScenario[ShopWorld]("capture declined", DECLINED),  # the hold is released
]


@pytest.mark.asyncio
async def test_every_crash_site(pivotal_chaos: Chaos) -> None:
    results = await pivotal_chaos.explore(ShopWorld, SCENARIOS)
    assert {r.status.value for r in results} == {"completed", "compensated"}


def test_a_killed_worker(pivotal_chaos: Chaos, tmp_path: Path) -> None:
    scenario = SCENARIOS[0]
    sites = asyncio.run(trace(ShopWorld, scenario))
    results = pivotal_chaos.explore_killed(
        tmp_path,
        ShopWorld,
        scenario,
        sites,
        "shop:create_app",
        env=lambda run: {"SHOP_STATE": str(run / "shop.db"), "PYTHONPATH": str(HERE)},
    )
    assert [r.fired for r in results] == [1] * len(sites)
