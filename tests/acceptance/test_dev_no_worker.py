"""`pivotal dev`'s console, when its worker exits by itself: it says whether a worker is
still alive over the ledger (by heartbeats, on the ledger's clock), else that none is and
what to run."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

from pivotal.cli.dev import _snapshot, _wait_for_change, worker_gone
from pivotal.store import SQLiteStore

PID = 4242  # the worker process of dev that exited
OURS = f"{socket.gethostname()}-{PID}"


def heard(base: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
    said: list[tuple[str, str, dict[str, Any]]] = []
    worker_gone(lambda event, message, **fields: said.append((event, message, fields)), base, PID)
    return said


async def beat(ledger: Path, *names: str) -> None:
    async with SQLiteStore(ledger) as store:
        now = await store.ledger_time()
        for name in names:
            await store.start_worker(name, now, version="1", catalogues=["shop"], beat_every=5)


def test_with_no_worker_alive_dev_says_what_to_run(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    base = ["--db", f"sqlite:///{ledger}", "--app", "shop:create_app"]
    asyncio.run(beat(ledger, OURS))  # its own worker beat a moment ago: it does not count

    [(event, message, fields)] = heard(base)

    run = f"pivotal --db sqlite:///{ledger} --app shop:create_app worker"
    assert event == "dev_no_worker"
    assert message.startswith("no worker is alive over this ledger: submitted and approved")
    assert message.endswith(f"save a file of the app, or run `{run}`")
    assert fields == {"run": run}


def test_a_worker_alive_elsewhere_is_named(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    asyncio.run(beat(ledger, OURS, "w-9"))

    said = heard(["--db", f"sqlite:///{ledger}", "--example-app"])

    assert said == [("dev_worker_elsewhere", "a worker still runs over this ledger: w-9", {})]


def test_a_ledger_url_keeps_its_password_to_itself(tmp_path: Path) -> None:
    base = ["--db", "postgresql://dev:s3cret@127.0.0.1:1/none", "--example-app"]

    [(_, message, _)] = heard(base)  # no ledger there: no worker alive

    assert "s3cret" not in message
    assert "--example-app worker`" in message


class ExitedWorker:
    """dev's worker child, which exited by itself; asking about it edits the app (so that
    dev's wait for a change ends on its own, without a clock)."""

    def __init__(self, app: Path) -> None:
        self.app = app
        self.args = ["python", "-c", "...", "--db", "x", "worker"]
        self.pid = PID
        self.returncode = 1

    def poll(self) -> int:
        self.app.write_text("# edited\n")
        return self.returncode


def test_dev_says_it_when_its_worker_exits(tmp_path: Path) -> None:
    app = tmp_path / "shop.py"
    app.write_text("# the app\n")
    ledger = tmp_path / "ledger.db"
    base = ["--db", f"sqlite:///{ledger}", "--app", "shop:create_app"]
    said: list[str] = []
    files = [tmp_path / "*.py"]

    child: Any = ExitedWorker(app)
    _wait_for_change(lambda e, m, **f: said.append(e), files, _snapshot(files), [child], base)

    assert said == ["dev_child_exited", "dev_no_worker"]
