"""``pivotal worker --relay-…``: the worker delivers the outbox beside its sagas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from pivotal.cli import cli

HANDLER = """
async def handle(message):
    with open({path!r}, "a") as f:
        f.write(message.id + "\\n")
"""


def checkout(order_id: str) -> dict[str, object]:
    """A checkout of a seeded order of the example app (order-1 .. order-5: two of sku-1
    for 49.90); one order is charged once, so each saga has its own."""
    return {
        "catalogue": "checkout",
        "steps": [
            {
                "name": "reserve_stock",
                "args": {"order_id": order_id, "sku": "sku-1", "quantity": 2, "warehouse": "A"},
            },
            {"name": "charge_payment", "args": {"order_id": order_id, "amount": "49.90"}},
        ],
    }


def pivotal(ledger: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", ledger, *args])


@pytest.fixture
def handler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module ``worker_relay_handler`` whose ``handle`` writes each message id to a file."""
    received = tmp_path / "received.txt"
    (tmp_path / "worker_relay_handler.py").write_text(HANDLER.format(path=str(received)))
    monkeypatch.syspath_prepend(str(tmp_path))
    return received


def test_a_worker_run_until_idle_relays_what_its_sagas_announced(
    tmp_path: Path, handler: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIVOTAL_COMMERCE_STATE", str(tmp_path / "commerce.db"))
    ledger = f"sqlite:///{tmp_path / 'pivotal.db'}"
    for n in (1, 2):
        plan = tmp_path / f"plan-{n}.json"
        plan.write_text(json.dumps(checkout(f"order-{n}")))
        done = pivotal(
            ledger, "--example-app", "submit", str(plan), "--saga-id", f"w-{n}", "--create"
        )
        assert done.exit_code == 0, done.output
    done = pivotal(
        ledger,
        "--example-app",
        "worker",
        "--until-idle",
        "--relay-callable",
        "worker_relay_handler:handle",
        "--json",
    )
    assert done.exit_code == 0, done.output
    delivered = json.loads(pivotal(ledger, "outbox", "list", "--json").stdout)
    assert {m["status"] for m in delivered} == {"delivered"}
    assert [m["type"] for m in delivered] == ["saga.completed", "saga.completed"]
    assert sorted(handler.read_text().split()) == sorted(m["id"] for m in delivered)


def test_a_relay_webhook_without_its_secret_is_refused_before_the_worker_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_SECRET", raising=False)
    ledger = f"sqlite:///{tmp_path / 'pivotal.db'}"
    done = pivotal(
        ledger,
        "--example-app",
        "worker",
        "--until-idle",
        "--relay-webhook",
        "https://hooks.example.com/pivotal",
        "--relay-secret-env",
        "NO_SUCH_SECRET",
    )
    assert done.exit_code != 0
    assert "NO_SUCH_SECRET is not set" in done.output
