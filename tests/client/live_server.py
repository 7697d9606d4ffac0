"""What the client's tests share: a real ``pivotal serve`` over a temporary SQLite ledger
(the bundled commerce example) with a token per role, a way to run a saga as a worker
would, in this process, over the same ledger, and plans of the example's orders."""

from __future__ import annotations

import inspect
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any, TypeVar

import httpx
from typer.testing import CliRunner

from pivotal import Orchestrator, SagaState, SQLiteStore
from pivotal.cli import cli
from pivotal.client import AsyncClient, Client
from pivotal.examples.commerce import create_app
from pivotal.views.saga_scope import namespace

PIVOTAL = Path(sys.executable).parent / "pivotal"
ROLES = {"bot": "agent", "alice": "approver", "olga": "operator", "vera": "viewer"}
T = TypeVar("T")
AnyClient = Client | AsyncClient
Connect = Callable[..., AnyClient]  # conftest.connect: a client of a principal of ROLES


async def done(value: T | Awaitable[T]) -> T:
    """The answer of a call of either client (the synchronous one's has come already)."""
    if inspect.isawaitable(value):
        return await value
    return value


async def every(rows: Iterator[T] | AsyncIterator[T]) -> list[T]:
    if isinstance(rows, Iterator):
        return list(rows)
    return [row async for row in rows]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Served:
    """``pivotal --example-app serve`` on ``port`` over ``ledger``: ``start`` it (it answers
    ``/healthz`` when it returns), ``stop`` it (SIGTERM, or SIGKILL), start it again on the
    same port. ``tokens``: a token per principal of ``ROLES``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ledger = folder / "ledger.db"
        self.commerce = folder / "commerce.db"  # where serve keeps the example's services
        self.db = f"sqlite:///{self.ledger}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tokens = {name: self._token(name, role) for name, role in ROLES.items()}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def _token(self, name: str, role: str) -> str:
        args = ["--db", self.db, "tokens", "create", "--name", name, "--role", role, "--json"]
        done = CliRunner().invoke(cli, [*args, *(["--create"] if not self.ledger.exists() else [])])
        assert done.exit_code == 0, done.stderr
        token: str = json.loads(done.stdout)["token"]
        return token

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
        command = [str(PIVOTAL), "--db", self.db, "--example-app", "serve"]
        self.starts += 1
        with (self.folder / f"serve-{self.starts}.err").open("wb") as err:
            self.proc = subprocess.Popen(
                [*command, "--port", str(self.port)],
                cwd=self.folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + 60  # only turns a hang into a failure
        while True:  # until it answers: the event itself
            assert self.proc.poll() is None, self.log()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)

    def log(self) -> str:
        return (self.folder / f"serve-{self.starts}.err").read_text(errors="replace")

    def stored_id(self, agent_id: str, agent: str = "bot") -> str:
        """The ledger's id of the saga an agent knows as ``agent_id`` (``saga_scope``)."""
        return namespace(agent) + agent_id

    def count(self, saga_id: str) -> int:
        """How many sagas the ledger holds under this (stored) id."""
        with closing(sqlite3.connect(self.ledger, timeout=10)) as db:
            [(n,)] = db.execute("SELECT count(*) FROM sagas WHERE saga_id = ?", (saga_id,))
        return int(n)

    def open_order(self, order_id: str) -> None:
        """Open an order in the example's order system, as ``checkout(order_id)`` buys it."""
        app = create_app(self.commerce)
        try:
            app.services.order(
                order_id,
                customer=f"c-{order_id}",
                amount="49.90",
                lines=[{"sku": "sku-1", "quantity": 2}],
                recipient=f"{order_id}@example.com",
            )
        finally:
            app.services.close()

    async def run(self, saga_id: str) -> SagaState:
        """Run the saga (a stored id) here as a worker would, until it ends or waits."""
        app = create_app(self.commerce)
        try:
            async with SQLiteStore(self.ledger) as store:
                return await Orchestrator(store, app).run(saga_id)
        finally:
            app.services.close()


def checkout(order: str = "order-1") -> dict[str, Any]:
    """A valid checkout of one of the example's seeded orders (order-1 .. order-5)."""
    return {
        "catalogue": "checkout",
        "steps": [
            {"name": "reserve_stock", "args": {"order_id": order, "sku": "sku-1", "quantity": 2}},
            {"name": "charge_payment", "args": {"order_id": order, "amount": "49.90"}},
            {"name": "create_shipment", "args": {"order_id": order}},
        ],
        "rationale": f"place order {order}",
    }
