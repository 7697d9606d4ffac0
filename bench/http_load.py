"""The HTTP API under load: agents submitting plans over ``pivotal serve`` while a worker
drains them, on a fresh SQLite ledger.

    python bench/http_load.py [--agents 64] [--seconds 20] [--baseline-seconds 5]

Runs ``pivotal serve`` and ``pivotal worker`` as processes of their own over one ledger
(the app: ``bench/http_app.py``, 3 no-op steps), then ``--agents`` clients, each on a
keep-alive connection of its own, submit plans (``POST /v1/sagas`` with an agent's token,
a new saga id each) for ``--seconds``. Prints submissions/s, latency p50/p90/p99/max,
connection errors and error replies, and then waits for the worker: every saga the API
said it created must be in the ledger and at rest. The baseline, measured in the same run
with the same clients: ``GET /healthz`` requests/s (the HTTP stack and the client, no
ledger), so the ratio says what a submission costs beyond them.

The client is a lean HTTP/1.1 client on asyncio streams (a general client library would
be the bottleneck, and the measure would be of it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pivotal.views.saga_scope import namespace

HERE = Path(__file__).resolve().parent
PIVOTAL = Path(sys.executable).parent / "pivotal"
PLAN = json.dumps(
    {
        "catalogue": "bench",
        "steps": [{"name": "noop", "args": {"n": i}} for i in range(3)],
        "rationale": "load",
    }
).encode()
AGENT = "agent-1"
MINE = namespace(AGENT)  # where the ledger keeps the agent's saga ids
AT_REST = ("completed", "compensated", "compensation_failed", "needs_human", "resolved")


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    connection_errors: int = 0
    error_replies: dict[int, int] = field(default_factory=dict)


class Connection:
    """One keep-alive HTTP/1.1 connection, one request at a time."""

    def __init__(self, port: int, token: str | None) -> None:
        self.port = port
        self.auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n{self.auth}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split()[1])
        length, close = 0, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and value.strip().lower() == "close":
                close = True
        data = await self.reader.readexactly(length)
        if close:
            self.close()
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def load(
    port: int, token: str | None, agents: int, seconds: float, submit: bool
) -> tuple[Tally, float]:
    """``agents`` clients for ``seconds``: plans submitted, or /healthz asked."""
    tally = Tally()
    stop = time.perf_counter() + seconds

    async def agent() -> None:
        conn = Connection(port, token)
        while time.perf_counter() < stop:
            saga = uuid.uuid4().hex
            began = time.perf_counter()
            try:
                if submit:
                    status, data = await conn.request("POST", f"/v1/sagas?saga_id={saga}", PLAN)
                else:
                    status, data = await conn.request("GET", "/healthz")
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
                tally.connection_errors += 1
                conn.close()
                continue
            tally.latencies.append(time.perf_counter() - began)
            if status >= 400:
                tally.error_replies[status] = tally.error_replies.get(status, 0) + 1
            elif submit and json.loads(data).get("created"):
                tally.created.append(MINE + saga)  # an agent's ids are its own
        conn.close()

    began = time.perf_counter()
    await asyncio.gather(*(agent() for _ in range(agents)))
    return tally, time.perf_counter() - began


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pivotal(db: str, *args: str, **popen: object) -> subprocess.Popen[bytes]:
    paths = [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    command = [str(PIVOTAL), "--db", db, "--app", "http_app:app", *args]
    return subprocess.Popen(command, env=env, **popen)  # type: ignore[call-overload]


def token(db: str) -> str:
    made = pivotal(
        db,
        "tokens",
        "create",
        "--name",
        AGENT,
        "--role",
        "agent",
        "--json",
        stdout=subprocess.PIPE,
    )
    out, _ = made.communicate(timeout=60)
    return str(json.loads(out)["token"])


async def wait_until_up(port: int) -> None:
    for _ in range(600):
        try:
            status, _ = await Connection(port, None).request("GET", "/healthz")
            if status == 200:
                return
        except OSError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("the server did not come up")


def at_rest(ledger: Path, sagas: list[str]) -> tuple[int, int]:
    """(how many of ``sagas`` the ledger has, how many of those are at rest)."""
    with sqlite3.connect(ledger) as db:
        rows = dict(db.execute("SELECT saga_id, status FROM sagas").fetchall())
    found = [rows[s] for s in sagas if s in rows]
    return len(found), sum(1 for status in found if status in AT_REST)


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def report(name: str, tally: Tally, took: float) -> float:
    rate = len(tally.latencies) / took
    ms = [v * 1000 for v in tally.latencies]
    print(
        f"{name}: {rate:,.0f}/s over {took:.1f}s; latency p50 {quantile(ms, 50):.1f} ms, "
        f"p90 {quantile(ms, 90):.1f} ms, p99 {quantile(ms, 99):.1f} ms, max {max(ms):.1f} ms; "
        f"connection errors {tally.connection_errors}; error replies {tally.error_replies or 0}"
    )
    return rate


async def main(args: argparse.Namespace) -> int:
    folder = Path(tempfile.mkdtemp(prefix="pivotal-http-load-"))
    ledger = folder / "ledger.db"
    db = f"sqlite:///{ledger}"
    pivotal(db, "migrate", stdout=subprocess.DEVNULL).wait(60)
    secret = token(db)
    port = free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    server = pivotal(db, "serve", "--port", str(port), **quiet)
    worker = None
    try:
        await wait_until_up(port)
        baseline, took = await load(port, None, args.agents, args.baseline_seconds, submit=False)
        floor = report("baseline GET /healthz", baseline, took)
        worker = pivotal(db, "worker", "--name", "bench-worker", **quiet)
        tally, took = await load(port, secret, args.agents, args.seconds, submit=True)
        rate = report(f"POST /v1/sagas, {args.agents} agents", tally, took)
        print(f"  ratio to the baseline: {rate / floor:.3f}")
        began = time.perf_counter()
        found, rested = at_rest(ledger, tally.created)
        while rested < len(tally.created) and time.perf_counter() - began < args.drain_timeout:
            await asyncio.sleep(0.5)
            found, rested = at_rest(ledger, tally.created)
        print(
            f"  created {len(tally.created):,}; in the ledger {found:,}; at rest {rested:,} "
            f"({time.perf_counter() - began:.1f}s after the load ended)"
        )
        return 0 if found == rested == len(tally.created) else 1
    finally:
        for proc in (worker, server):
            if proc is not None:
                proc.send_signal(signal.SIGINT)
        for proc in (worker, server):
            if proc is not None:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--baseline-seconds", type=float, default=5.0)
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    sys.exit(asyncio.run(main(parser.parse_args())))
