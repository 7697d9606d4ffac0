# examples/provider_check/test_sandbox_promises.py
"""The commerce example's payment provider keeps the promises its checkout relies on.
A team runs the same test against its own app, built over its providers' sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

from pivotal.examples.commerce import create_app
from pivotal.provider_check import Options
from pivotal.testing.providers import assert_promises_kept

HERE = Path(__file__).parent


def test_the_payment_sandbox_keeps_its_promises(tmp_path: Path) -> None:
    app = create_app(tmp_path / "commerce.db")  # its services are simulations: a sandbox
    sandbox = json.loads((HERE / "checkout-sandbox.json").read_text())
    report = assert_promises_kept(
        app,
        "checkout",
        steps=["charge_payment"],
        sandbox=sandbox,
        options=Options(budget=50, wait=5.0, window=1.0),
    )
    assert report.spent <= 50
    assert report.steps[0].left == []  # every charge it made was refunded
