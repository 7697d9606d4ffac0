"""``pivotal worker --metrics-port``: the real console script serves its counters and the
ledger gauges over HTTP, to a token of the ledger, while it runs a saga, and closes the
endpoint when it stops."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

PIVOTAL = Path(sys.executable).parent / "pivotal"
# The seeded order order-1 of the example app: two of sku-1 for 49.90.
PLAN = {
    "catalogue": "checkout",
    "steps": [
        {
            "name": "reserve_stock",
            "args": {"order_id": "order-1", "sku": "sku-1", "quantity": 2, "warehouse": "A"},
        },
        {"name": "charge_payment", "args": {"order_id": "order-1", "amount": "49.90"}},
    ],
    "rationale": "customer checkout",
}

# `pivotal worker` runs one process here (its default is one per core): a test of
# --processes N says so
ONE_WORKER_PROCESS = {"PIVOTAL_WORKER_PROCESSES": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 45.0) -> Any:
    """Until ``condition()`` holds; the timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return result


def scrape(url: str, token: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
    try:
        text = httpx.get(url, timeout=5, headers={"Authorization": f"Bearer {token}"}).text
    except httpx.TransportError:
        return None
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
def env() -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    return clean | {"COLUMNS": "250", "NO_COLOR": "1"} | ONE_WORKER_PROCESS


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_the_worker_serves_its_metrics_while_it_runs(
    tmp_path: Path, env: dict[str, str], procs: list[subprocess.Popen[bytes]]
) -> None:
    base = [str(PIVOTAL), "--db", f"sqlite:///{tmp_path / 'ledger.db'}", "--example-app"]
    made = subprocess.run(
        [
            *base,
            "tokens",
            "create",
            "--name",
            "prometheus",
            "--role",
            "viewer",
            "--json",
            "--create",
        ],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    token = json.loads(made.stdout)["token"]
    port = free_port()
    err = tmp_path / "worker.err"
    with err.open("wb") as stderr, (tmp_path / "worker.out").open("wb") as stdout:
        worker = subprocess.Popen(
            [*base, "worker", "--name", "w-metrics", "--poll", "0.05", "--metrics-port", str(port)],
            stdout=stdout,
            stderr=stderr,
            env=env,
            cwd=tmp_path,
        )
    procs.append(worker)
    url = f"http://127.0.0.1:{port}/metrics"
    wait_for(lambda: f"metrics: {url}" in err.read_text() or worker.poll() is not None, "start")
    assert worker.poll() is None, err.read_text()
    assert httpx.get(url, timeout=5).status_code == 401  # a scrape needs a token

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    done = subprocess.run(
        [*base, "submit", str(plan), "--saga-id", "m-1"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    completed = frozenset({("catalogue", "checkout"), ("status", "completed")})

    def settled() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        found = scrape(url, token)
        if (
            found is not None
            and found.get(("pivotal_sagas_finished_total", completed)) == 1
            and found.get(("pivotal_sagas", frozenset({("status", "completed")}))) == 1
            and found.get(("pivotal_workers_alive", frozenset())) == 1
        ):
            return found
        return None

    metrics = wait_for(settled, "the saga counted and the ledger gauges refreshed")
    steps = {
        dict(labels)["step"]: v
        for (name, labels), v in metrics.items()
        if name == "pivotal_steps_total" and dict(labels).get("outcome") == "succeeded"
    }
    assert steps == {"reserve_stock": 1, "charge_payment": 1}
    assert metrics[("pivotal_ledger_scrape_error", frozenset())] == 0
    # the other catalogues' counters start at zero, so a first failure is an increase
    failed = frozenset({("catalogue", "fulfilment"), ("status", "compensation_failed")})
    assert metrics[("pivotal_sagas_finished_total", failed)] == 0

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, err.read_text()
    assert "Traceback" not in err.read_text()
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=2)


def test_a_metrics_port_in_use_is_a_clear_error(tmp_path: Path, env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                str(PIVOTAL),
                "--db",
                f"sqlite:///{tmp_path / 'ledger.db'}",
                "--example-app",
                "worker",
                "--create",
                "--metrics-port",
                str(port),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
    assert done.returncode != 0
    assert done.returncode == 2
    assert f"error [port_in_use]: 127.0.0.1:{port} is in use" in done.stderr
    assert "Traceback" not in done.stderr
