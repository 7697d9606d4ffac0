"""Run the real `pivotal` console script in a temporary folder with its own ledger."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cli_harness import ONE_WORKER_PROCESS, PIVOTAL, InProcess, make_ledger

from pivotal import SagaState, replay
from pivotal.store import open_store


class Cli:
    """``cli(*args)`` runs one command against ``tmp/ledger.db`` and returns the result."""

    def __init__(self, tmp: Path, url: str | None = None) -> None:
        self.tmp = tmp
        self.ledger = tmp / "ledger.db"
        self.url = url or f"sqlite:///{self.ledger}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
        # the app's folder first; then whatever PYTHONPATH the tests run with (a source tree)
        path = os.pathsep.join(p for p in (str(tmp), os.environ.get("PYTHONPATH")) if p)
        self.env |= {"COLUMNS": "250", "PYTHONPATH": path, "NO_COLOR": "1"}
        self.env |= ONE_WORKER_PROCESS
        self.procs: list[subprocess.Popen[str]] = []

    def prefix(self, app: str | None) -> list[str]:
        """Without ``app``, the bundled example, chosen on purpose (``--example-app``)."""
        chosen = ["--app", app] if app else ["--example-app"]
        return [str(PIVOTAL), "--db", self.url, *chosen]

    @property
    def postgres(self) -> bool:
        return self.url.startswith("postgresql://")

    def __call__(self, *args: str, app: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix(app), *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.tmp,
            timeout=60,
            check=False,
        )

    def ok(self, *args: str, app: str | None = None) -> str:
        done = self(*args, app=app)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        return done.stdout

    def json(self, *args: str, app: str | None = None) -> Any:
        return json.loads(self.ok(*args, "--json", app=app))

    def plan(self, name: str, plan: dict[str, Any]) -> str:
        path = self.tmp / name
        path.write_text(json.dumps(plan))
        return str(path)

    def start(self, *args: str, name: str, app: str | None = None) -> subprocess.Popen[str]:
        """A long-running command; its stdout and stderr go to ``{name}.out``/``.err``."""
        with (
            (self.tmp / f"{name}.out").open("w") as out,
            (self.tmp / f"{name}.err").open("w") as err,
        ):
            proc = subprocess.Popen(
                [*self.prefix(app), *args],
                stdout=out,
                stderr=err,
                text=True,
                env=self.env,
                cwd=self.tmp,
            )
        self.procs.append(proc)
        return proc

    def output(self, name: str) -> tuple[str, str]:
        return (self.tmp / f"{name}.out").read_text(), (self.tmp / f"{name}.err").read_text()

    def sql(self, query: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of ``query`` (``?`` placeholders) on the ledger, whichever backend it is."""
        if self.postgres:
            with psycopg.connect(self.url, autocommit=True) as pg:
                return pg.execute(query.replace("?", "%s"), params).fetchall()
        with closing(sqlite3.connect(self.ledger, timeout=10)) as conn:
            return conn.execute(query, params).fetchall()

    def audit(self) -> dict[str, SagaState]:
        """Every saga's stored state, after checking that its events replay into it."""

        async def read() -> dict[str, SagaState]:
            async with open_store(self.url) as store:
                states = {}
                for summary in await store.list_sagas(limit=10_000):
                    stored = await store.load(summary.saga_id)
                    assert stored is not None
                    assert replay(await store.events(summary.saga_id)) == stored.state
                    states[summary.saga_id] = stored.state
                return states

        return asyncio.run(read())

    def events(self, saga_id: str) -> list[dict[str, Any]]:
        rows = self.sql(
            "SELECT type, step, attempt, data FROM events WHERE saga_id = ? ORDER BY seq", saga_id
        )
        return [{"type": t, "step": s, "attempt": a, **json.loads(d)} for t, s, a, d in rows]

    @staticmethod
    def wait_for(condition: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
        """Until ``condition()`` holds; ``timeout`` only turns a hang into a failure."""
        deadline = time.monotonic() + timeout
        while not (result := condition()):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or condition}")
            time.sleep(0.02)
        return result

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def inproc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InProcess:
    """The command line in this process, in ``tmp_path`` (also its working folder), over
    the ledger ``tmp_path/ledger.db``, made."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = InProcess(tmp_path)
    make_ledger(runner.url)
    return runner


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """The console script over the ledger ``tmp_path/ledger.db``, made."""
    runner = Cli(tmp_path)
    make_ledger(runner.url)
    yield runner
    runner.stop_all()


@pytest.fixture(params=["sqlite", "postgres"])
def any_cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cli]:
    """The same commands against a SQLite file, then against a fresh PostgreSQL database."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    runner = Cli(tmp_path, url)
    make_ledger(runner.url)
    yield runner
    runner.stop_all()
