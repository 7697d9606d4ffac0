"""Restate's workload: a service handler of 3 no-op ``ctx.run`` steps with compensations.

Runs with ``.bench/restate``'s python (``restate-sdk``, served by hypercorn in this
process) against ``restate-server`` from npm (``.bench/restate/node_modules``). The script
puts itself in a loopback-only network namespace (``common.isolate_network``), starts the
server there with a fresh base directory (the folder of ``--db``) and its default
configuration, registers the handler through the admin API, and calls it through the
ingress with a lean HTTP/1.1 client (asyncio streams, one keep-alive connection per saga
in flight). Each ``ctx.run`` result is appended to the invocation's journal in Restate's
log (a RocksDB write-ahead log, fsync'd by default) and acknowledged before the handler
goes on. The server's CPU time is counted with this process's.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import restate
from common import (
    STEPS,
    die_with_parent,
    emit,
    isolate_network,
    parse,
    provider,
    timed,
    watch_server,
)
from hypercorn.asyncio import serve
from hypercorn.config import Config

SERVER = (
    Path(__file__).resolve().parents[2]
    / ".bench/restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server"
)
INGRESS, ADMIN, SERVICE_PORT = 8080, 9070, 9080  # a fresh network namespace: all free

bench = restate.Service("bench")


async def noop(n: int) -> int:
    await provider()
    return n


async def undo(n: int) -> None:
    return None


@bench.handler()
async def saga(ctx: restate.Context) -> int:
    done: list[int] = []  # what to compensate, newest last
    try:
        for s in range(STEPS):
            await ctx.run_typed("noop", noop, n=s)
            done.append(s)
    except restate.TerminalError:
        for s in reversed(done):
            await ctx.run_typed("undo", undo, n=s)
        raise
    return len(done)


class Http:
    """HTTP/1.1 over raw asyncio streams: keep-alive connections reused from a pool."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.idle:
            reader, writer = self.idle.pop()
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        kind = "Content-Type: application/json\r\n" if body else ""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{kind}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        status = int((await reader.readline()).split()[1])
        length, chunked, close = 0, False, False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                chunked = "chunked" in value
            elif name == "connection":
                close = value == "close"
        if chunked:
            data = b""
            while size := int((await reader.readline()).strip(), 16):
                data += (await reader.readexactly(size + 2))[:-2]
            await reader.readline()
        else:
            data = await reader.readexactly(length)
        if close:
            writer.close()
        else:
            self.idle.append((reader, writer))
        return status, data


def start_server(base: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RESTATE_LOG_FILTER": "error",
        "RESTATE_DISABLE_TELEMETRY": "true",
    }
    log = open(base / "restate.log", "wb")  # noqa: SIM115  (the server's, until it exits)
    cmd = [str(SERVER), "--no-logo", "--node-name", "bench", "--base-dir", str(base)]
    server = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent
    )
    watch_server(server.pid)
    return server


async def until(what: str, server: subprocess.Popen[bytes], ok: object) -> None:
    """Retry ``ok()`` (an awaitable factory returning a truth) for up to 90 s."""
    deadline = time.monotonic() + 90
    while True:
        try:
            if await ok():  # type: ignore[operator]
                return
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"not run: Restate {what} (see its log)")
        await asyncio.sleep(0.2)


async def main() -> None:
    opts = parse(__doc__ or "")
    isolate_network()
    base = Path(opts.db).parent
    server = start_server(base)
    config = Config()
    config.bind = [f"127.0.0.1:{SERVICE_PORT}"]
    config.accesslog = config.errorlog = None
    stop = asyncio.Event()
    serving = asyncio.create_task(
        serve(restate.app(services=[bench]), config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]
    )
    admin, ingress = Http(ADMIN), Http(INGRESS)
    try:

        async def healthy() -> bool:
            return (await admin.request("GET", "/health"))[0] == 200

        async def registered() -> bool:
            body = json.dumps({"uri": f"http://127.0.0.1:{SERVICE_PORT}"}).encode()
            return (await admin.request("POST", "/deployments", body))[0] in (200, 201)

        async def callable_() -> bool:
            return (await ingress.request("POST", "/bench/saga"))[0] == 200

        await until("did not start", server, healthy)
        await until("did not register the handler", server, registered)
        await until("did not route to the handler", server, callable_)

        async def one(name: str) -> None:
            status, data = await ingress.request("POST", "/bench/saga")
            if status != 200 or json.loads(data) != STEPS:
                raise SystemExit(f"saga answered {status} {data[:200]!r}")

        start, end = await timed(opts, one)
    finally:
        stop.set()
        await serving
        server.terminate()
        server.wait(60)
    emit("restate", opts, start, end, durability="rocksdb log (fsync)")


if __name__ == "__main__":
    asyncio.run(main())
