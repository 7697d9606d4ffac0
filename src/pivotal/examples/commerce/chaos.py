"""The commerce scenarios as fault-injection runs: the demo's eight plus a parallel group."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pivotal.declarations.plan import Plan
from pivotal.examples.commerce import CommerceApp, create_app
from pivotal.examples.commerce.demo import Scenario, call, checkout_plan, scenarios
from pivotal.examples.commerce.faults import Fault
from pivotal.examples.commerce.services import CommerceServices
from pivotal.testing.chaos import ChaosScenario
from pivotal.testing.probe import CallSpan


class CommerceProbe:
    """The probe for the bundled commerce services."""

    _IN_PLACE = (
        ("reservations", "status = 'active'"),
        ("payments", "status IN ('charged', 'authorized', 'captured')"),
        ("shipments", "status = 'created'"),
        ("emails", "1 = 1"),
    )

    def __init__(self, services: CommerceServices) -> None:
        self.services = services

    def effects(self) -> Mapping[str, int]:
        return self.services.effects_per_key()

    def call_spans(self) -> list[CallSpan]:
        """The providers' own record of every call (ticks: call ids)."""
        return [CallSpan(key, start, end) for key, start, end in self.services.call_spans()]

    def in_place(self, key: str) -> bool:
        db = self.services.db
        return any(
            db.execute(f"SELECT 1 FROM {table} WHERE key = ? AND {cond}", (key,)).fetchone()
            for table, cond in self._IN_PLACE
        )


@dataclass
class CommerceWorld:
    """Fresh simulated services (in memory, or in ``folder``) and their probe."""

    app: CommerceApp
    probe: CommerceProbe

    @classmethod
    def create(cls, folder: Path | None = None) -> CommerceWorld:
        app = create_app(":memory:" if folder is None else folder / "commerce.db")
        # the orders the scenarios beyond the demo's name (the demo's are seeded)
        app.services.order(
            "par-1",
            customer="c-par-1",
            amount="20.00",
            lines=[{"sku": "sku-1", "quantity": 1}, {"sku": "sku-2", "quantity": 1}],
            recipient="par-1@example.com",
        )
        app.services.order(
            "flaky-1",
            customer="c-flaky-1",
            amount="49.90",
            lines=[{"sku": "sku-1", "quantity": 2}],
            recipient="flaky-1@example.com",
        )
        return cls(app, CommerceProbe(app.services))

    def expire_keys(self) -> None:
        self.app.services.expire_keys()

    def close(self) -> None:
        self.app.services.close()


def _parallel_plan() -> Plan:
    return Plan.model_validate(
        {
            "catalogue": "checkout",
            "steps": [
                {
                    "parallel": [
                        call("reserve_stock", order_id="par-1", sku="sku-1", quantity=1),
                        call("reserve_stock", order_id="par-1", sku="sku-2", quantity=1),
                    ]
                },
                call("charge_payment", order_id="par-1", amount="20.00"),
                call("create_shipment", order_id="par-1"),
            ],
            "rationale": "both lines of the order reserved at once",
        }
    )


def _preparer(scenario: Scenario) -> Callable[[CommerceWorld], None]:
    def prepare(world: CommerceWorld) -> None:
        services = world.app.services
        for order in ("4471", "4472"):
            services.order(order, customer=f"c-{order}")
        scenario.faults(services.faults)

    return prepare


def chaos_scenarios() -> list[ChaosScenario[CommerceWorld]]:
    """Every demo scenario, then a parallel group that ships and one that is refused."""
    out: list[ChaosScenario[CommerceWorld]] = []
    for n, s in enumerate(scenarios(), 1):
        out.append(ChaosScenario(f"demo-{n}", s.plan, _preparer(s), approve=s.approve))
    out.append(ChaosScenario("parallel-ok", _parallel_plan()))
    out.append(
        ChaosScenario(
            "parallel-refused",
            _parallel_plan(),
            lambda world: world.app.services.faults.always("ship", Fault.PERMANENT),
        )
    )
    out.append(
        ChaosScenario(
            "checkout-flaky",
            checkout_plan("flaky-1"),
            lambda world: world.app.services.faults.next(
                "charge", Fault.TIMEOUT_AFTER_EFFECT, Fault.TRANSIENT
            ).next("release", Fault.TIMEOUT_AFTER_EFFECT),
        )
    )
    return out
