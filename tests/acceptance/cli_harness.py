"""What the command-line tests share: the console script, the command line run in this
process, every command of the app, and apps that cannot be loaded."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from typer.main import get_command
from typer.testing import CliRunner, Result

from pivotal.cli import cli as pivotal_cli
from pivotal.examples.commerce import CommerceServices
from pivotal.store import migrate_ledger, sqlite_path

PIVOTAL = Path(sys.executable).parent / "pivotal"

BAD_APPS = {
    "hostile_syntax.py": "def broken(:\n",
    "hostile_raises.py": "raise RuntimeError('the module refuses to load')\n",
    "hostile_step.py": (
        "from pivotal import Catalogue\n"
        "from pydantic import BaseModel\n"
        "class A(BaseModel):\n    n: int = 1\n"
        "app = Catalogue('h')\n"
        "async def forget(args, result, ctx):\n    return None\n"
        "@app.compensable(undo=forget)\n"
        "async def step(args: A, ctx):\n    return {}\n"
        "async def no_args():\n    return None\n"
        "value = 42\n"
    ),
}


def make_ledger(url: str) -> None:
    """Make the SQLite ledger at ``url`` when its file does not exist, as ``pivotal
    migrate`` does (a command makes none without ``--create``). In a thread of its own,
    so that a test already inside an event loop may call it."""
    path = sqlite_path(url)
    if path is None or Path(path).exists():
        return
    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: asyncio.run(migrate_ledger(url))).result()


def open_order(
    services: CommerceServices,
    order_id: str,
    *,
    amount: str,
    sku: str,
    quantity: int,
    warehouse: str = "A",
    recipient: str | None = None,
    customer: str | None = None,
) -> None:
    """An open order in the example's order system, with the facts a plan for it must
    match (the shipped catalogues bind every plan to its order): its amount, its one line
    ``sku`` x ``quantity``, the warehouse and the confirmation's recipient (by default
    ``customer-{order_id}@example.com``, like the seeded orders)."""
    services.order(
        order_id,
        customer=customer or f"c-{order_id}",
        amount=amount,
        lines=[{"sku": sku, "quantity": quantity}],
        warehouse=warehouse,
        recipient=recipient or f"customer-{order_id}@example.com",
    )


def commands() -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf command of the app, with its path (``("sagas", "show")``)."""

    def walk(group: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from walk(command, (*path, name))
            else:
                yield (*path, name), command

    yield from walk(get_command(pivotal_cli), ())


# `pivotal worker` runs one process here (its default is one per core): a test of
# --processes N says so
ONE_WORKER_PROCESS = {"PIVOTAL_WORKER_PROCESSES": "1"}


class InProcess:
    """The same command line run in this process (much faster than a new process):
    ``run(*args)`` against ``tmp/ledger.db`` with the bundled example chosen on purpose,
    ``raw(*args)`` with exactly the arguments given."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ledger = tmp / "ledger.db"
        self.url = f"sqlite:///{self.ledger}"
        self.runner = CliRunner()
        self.env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PIVOTAL_")}
        self.env |= ONE_WORKER_PROCESS

    def raw(self, *args: str, input: bytes | str | None = None) -> Result:
        return self.runner.invoke(pivotal_cli, list(args), input=input, env=self.env)

    def __call__(self, *args: str, app: str | None = None, input: bytes | None = None) -> Result:
        chosen = ["--app", app] if app else ["--example-app"]
        return self.raw("--db", self.url, *chosen, *args, input=input)

    def ok(self, *args: str, app: str | None = None) -> str:
        done = self(*args, app=app)
        assert done.exit_code == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def json(self, *args: str, app: str | None = None) -> Any:
        return json.loads(self.ok(*args, "--json", app=app))

    def plan(self, name: str, plan: dict[str, Any]) -> str:
        path = self.tmp / name
        path.write_text(json.dumps(plan))
        return str(path)
