"""`pivotal dev` as a developer runs it: one process serving the API and the pages with a
worker beside them, over its own ledger, with the first catalogue's app. A plan that needs a
person is approved over the HTTP API with the printed approver token and the worker in the
same `dev` runs the saga to its end; an edit of the app reloads it, a syntax error keeps the
last good app running, and Ctrl-C stops everything with exit 0. Every wait is for an event
(a printed line, a saga's status); BOUND only turns a hang into a failure."""

from __future__ import annotations

import json
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import PIVOTAL

pytestmark = pytest.mark.timeout(240)
BOUND = 60.0
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "first_catalogue"
APP = "shop:create_app"


class Dev:
    """A running `pivotal dev`: its stdout read line by line on a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.said: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The first line from now on that matches ``pattern``."""
        deadline = time.monotonic() + BOUND
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            assert line is not None, f"pivotal dev ended before {pattern!r}: {self.said}"
            self.said.append(line)
            if found := re.search(pattern, line):
                return found
        raise AssertionError(f"no line matched {pattern!r} in {BOUND}s: {self.said}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def dev(cli: Any) -> Iterator[tuple[Dev, str]]:
    for name in ("shop.py", "fakeshop.py", "order-4471.json"):
        shutil.copy(EXAMPLE / name, cli.tmp / name)
    port = free_port()
    env = cli.env | {"SHOP_STATE": str(cli.tmp / "shop.db")}
    cli.ledger.unlink()  # dev makes it: --create
    with (cli.tmp / "dev.err").open("w") as err:
        proc = subprocess.Popen(
            [str(PIVOTAL), "dev", "--db", cli.url, "--app", APP, "--port", str(port), "--create"],
            cwd=cli.tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    running = Dev(proc)
    try:
        yield running, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(BOUND)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        running.reader.join(BOUND)
        assert proc.stdout is not None
        proc.stdout.close()


def call(url: str, token: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def wait_for_status(url: str, token: str, saga_id: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + BOUND
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        seen = call(f"{url}/v1/sagas/{saga_id}", token)
        if seen["status"] == status:
            return seen
        time.sleep(0.05)  # polling the ledger over the API until the worker gets there
    raise AssertionError(f"{saga_id} is {seen.get('status')}, not {status}: {seen}")


def test_dev_serves_runs_the_approved_saga_reloads_and_stops(
    cli: Any, dev: tuple[Dev, str]
) -> None:
    running, url = dev
    running.wait_for(re.escape(f"made the ledger {cli.url}"))
    approver = running.wait_for(r"approver token \(dev-approver\): (pvt_\S+)")[1]
    operator = running.wait_for(r"operator token \(dev-operator\): (pvt_\S+)")[1]
    running.wait_for(re.escape(f"Open {url}/ui/login"))
    assert approver != operator

    cli.ok("submit", "order-4471.json", "--saga-id", "order-4471", app=APP)
    waiting = wait_for_status(url, approver, "order-4471", "awaiting_approval")
    queued = call(f"{url}/v1/approvals", approver)["items"]
    assert [row["saga_id"] for row in queued] == ["order-4471"]
    decided = call(
        f"{url}/v1/approvals/order-4471/approve",
        approver,
        {"version": waiting["version"], "reason": "the order was paid"},
    )
    assert decided["status"] != "awaiting_approval"
    done = wait_for_status(url, operator, "order-4471", "completed")
    assert [s["status"] for s in done["steps"]] == ["succeeded"] * 3

    shop = cli.tmp / "shop.py"
    good = shop.read_text()
    shop.write_text(good + "\n# an edit\n")
    running.wait_for(r"reloaded")
    assert call(f"{url}/v1/sagas/order-4471", approver)["status"] == "completed"  # served again

    shop.write_text(good + "\ndef broken(:\n")
    assert "syntax error" in running.wait_for(r".*keeps the last good app")[0]
    assert call(f"{url}/v1/sagas/order-4471", approver)["status"] == "completed"  # still served

    running.proc.send_signal(signal.SIGINT)
    running.wait_for(r"the tokens it printed \(dev-approver, dev-operator\) are revoked")
    running.wait_for(r"pivotal dev stopped")
    assert running.proc.wait(BOUND) == 0
    err = (cli.tmp / "dev.err").read_text()
    assert "Traceback" not in err, err
    # the printed tokens no longer open anything
    dev_tokens = [t for t in cli.json("tokens", "list") if t["name"].startswith("dev-")]
    assert len(dev_tokens) == 2
    assert all(t["revoked_at"] is not None for t in dev_tokens)


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="this system has no process table to read (/proc)"
)
def test_no_server_or_worker_outlives_a_dev_killed_with_sigkill(dev: tuple[Dev, str]) -> None:
    running_dev, url = dev
    running_dev.wait_for(re.escape(f"Open {url}/ui/login"))
    children = children_of(running_dev.proc.pid)
    assert len(children) == 2  # the server and the worker

    running_dev.proc.kill()  # no chance to stop them itself
    running_dev.proc.wait()

    deadline = time.monotonic() + BOUND
    while any(running(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)  # waiting for the children to stop on their parent-death signal
    assert not [pid for pid in children if running(pid)]
