"""The step API: an undo declared below its action, typed against the action's arguments,
and a compensable step without one refused wherever it could be used."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    App,
    Catalogue,
    CatalogueError,
    Orchestrator,
    SQLiteStore,
    StepContext,
    parse_plan,
    validate,
)
from pivotal.declarations.catalogue import Compensable
from pivotal.examples.commerce import CommerceServices, checkout_catalogue, fulfilment_catalogue

ROOT = Path(__file__).parents[2]


class Charge(BaseModel):
    order_id: str
    amount: int


class Ship(BaseModel):
    order_id: str


def ctx(step: str = "charge") -> StepContext:
    return StepContext("s", 0, step, "s:0", "s:0", 1)


def charge_plan(*names: str) -> dict[str, Any]:
    return {
        "catalogue": "payments",
        "steps": [{"name": n, "args": {"order_id": "1", "amount": 5}} for n in names],
    }


async def test_the_undo_is_declared_below_its_action() -> None:
    payments = Catalogue("payments")

    @payments.compensable(timeout=2.0)
    async def charge(args: Charge, ctx: StepContext) -> dict[str, Any]:
        """Charge the card."""
        return {"charged": args.amount}

    @charge.undo
    async def refund(args: Charge, result: Any, ctx: StepContext) -> str:
        return "refunded"

    assert isinstance(charge, Compensable)
    assert charge.__name__ == "charge"
    assert charge.__doc__ == "Charge the card."
    assert await charge(Charge(order_id="1", amount=5), ctx()) == {"charged": 5}  # still callable
    assert await refund(Charge(order_id="1", amount=5), None, ctx()) == "refunded"  # unchanged
    step = payments["charge"]
    assert step is charge.step
    assert step.undo is refund
    assert step.action.__name__ == "charge"
    assert step.timeout == 2.0
    assert step.description == "Charge the card."
    App([payments])  # complete: accepted


def test_a_late_undo_keeps_the_step_in_its_place() -> None:
    payments = Catalogue("payments")

    @payments.compensable()
    async def charge(args: Charge, ctx: StepContext) -> None: ...

    @payments.pivot()
    async def ship(args: Ship, ctx: StepContext) -> None: ...

    @charge.undo
    async def refund(args: Charge, result: Any, ctx: StepContext) -> None: ...

    assert [s.name for s in payments] == ["charge", "ship"]


def incomplete() -> Catalogue:
    payments = Catalogue("payments")

    @payments.compensable()
    async def charge(args: Charge, ctx: StepContext) -> None: ...

    return payments


def test_an_app_refuses_a_compensable_step_without_its_undo() -> None:
    with pytest.raises(CatalogueError, match=r"'charge' has no undo.*@charge\.undo"):
        App([incomplete()])


def test_validating_a_plan_on_such_a_catalogue_is_refused() -> None:
    with pytest.raises(CatalogueError, match="has no undo"):
        validate(parse_plan(charge_plan("charge")), incomplete())


async def test_submitting_to_such_a_catalogue_is_refused_and_records_nothing(
    tmp_path: Path,
) -> None:
    payments = Catalogue("payments")

    @payments.compensable()
    async def charge(args: Charge, ctx: StepContext) -> None: ...

    @charge.undo
    async def refund(args: Charge, result: Any, ctx: StepContext) -> None: ...

    app = App([payments])  # checked while complete; a step added later has no undo

    @payments.compensable()
    async def hold(args: Charge, ctx: StepContext) -> None: ...

    async with SQLiteStore(tmp_path / "ledger.db") as store:
        with pytest.raises(CatalogueError, match="'hold' has no undo"):
            await Orchestrator(store, app).submit(parse_plan(charge_plan("charge")), saga_id="x")
        assert await store.load("x") is None


def test_an_undo_is_declared_once() -> None:
    payments = Catalogue("payments")

    @payments.compensable()
    async def charge(args: Charge, ctx: StepContext) -> None: ...

    @charge.undo
    async def refund(args: Charge, result: Any, ctx: StepContext) -> None: ...

    with pytest.raises(CatalogueError, match="already has an undo"):
        charge.undo(refund)


def test_names_stay_unique_while_an_undo_is_missing() -> None:
    payments = incomplete()

    async def charge(args: Charge, ctx: StepContext) -> None: ...

    with pytest.raises(CatalogueError, match="already has a step 'charge'"):
        payments.pivot()(charge)


@pytest.mark.parametrize("kind", ["pivot", "retriable"])
def test_only_a_compensable_step_takes_an_undo(kind: str) -> None:
    async def refund(args: Charge, result: Any, ctx: StepContext) -> None: ...

    async def charge(args: Charge, ctx: StepContext) -> None: ...

    declare = getattr(Catalogue("payments"), kind)
    with pytest.raises(CatalogueError, match="cannot have an undo"):
        declare(undo=refund)(charge)


def test_the_one_call_form_still_declares_both() -> None:
    payments = Catalogue("payments")

    async def refund(args: Charge, result: Any, ctx: StepContext) -> None: ...

    async def charge(args: Charge, ctx: StepContext) -> None: ...

    assert payments.compensable(undo=refund)(charge) is charge
    assert payments["charge"].undo is refund
    App([payments])


def test_the_bundled_catalogues_pair_each_action_with_its_undo() -> None:
    services = CommerceServices(":memory:")
    try:
        pairs = {
            (c.name, s.name): getattr(s.undo, "__name__", None)
            for c in (checkout_catalogue(services), fulfilment_catalogue(services))
            for s in c
        }
    finally:
        services.close()
    assert pairs == {
        ("checkout", "reserve_stock"): "release_stock",
        ("checkout", "charge_payment"): "refund_payment",
        ("checkout", "create_shipment"): "cancel_shipment",
        ("checkout", "send_confirmation"): None,
        ("fulfilment", "reserve_stock"): "release_stock",
        ("fulfilment", "authorize_payment"): "void_authorization",
        ("fulfilment", "capture_payment"): None,
        ("fulfilment", "create_shipment"): None,
        ("fulfilment", "send_confirmation"): None,
    }


TYPED = """
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pivotal import Catalogue, StepContext


class Charge(BaseModel):
    amount: int


class Other(BaseModel):
    name: str


payments = Catalogue("payments")


@payments.compensable(timeout=5.0, retryable=False)
async def charge(args: Charge, ctx: StepContext) -> dict[str, Any]:
    return {}


@charge.undo
async def refund(args: Charge, result: Any, ctx: StepContext) -> str:
    return "refunded"


@charge.undo
async def broad(args: BaseModel, result: Any, ctx: StepContext) -> None:
    return None


@charge.undo  # error: another model
async def wrong(args: Other, result: Any, ctx: StepContext) -> None:
    return None


payments.compensable(retyr=None)  # error: no such option
payments.pivot(timeout="5")  # error: not a number
payments.retriable(undo=refund)  # error: a retriable step has no undo
"""


@pytest.mark.timeout(300)
def test_a_type_checker_checks_the_undo_and_every_option(tmp_path: Path) -> None:
    source = tmp_path / "steps.py"
    source.write_text(TYPED)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            str(source),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    errors = re.finditer(r"^(?:.*/)?steps\.py:(\d+): error", done.stdout, re.M)
    flagged = sorted(int(m.group(1)) for m in errors)
    expected = [n for n, line in enumerate(TYPED.splitlines(), 1) if "# error" in line]
    assert flagged == expected, done.stdout
