"""Slow clients are cut off, against a real uvicorn (``pivotal serve``'s configuration) on a
loopback port: a head that never ends, a body that stops or trickles, a body sent without a
token, and more connections than the server takes. Timeouts are half a second; each test
waits for the event itself (the server closing the socket) with a generous bound."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pivotal import SQLiteStore
from pivotal.cli.serve import uvicorn_config
from pivotal.examples.commerce import create_app as commerce
from pivotal.people.principals import Role, hash_token
from pivotal.server import create_app

TOKEN = "pvt_slow_agent"
WAIT = 10.0  # seconds a socket waits for the server: far past every timeout here
Serve = Callable[..., int]


def _prepare(ledger: Path) -> None:
    async def work() -> None:
        async with SQLiteStore(ledger) as store:
            await store.create_token("agent", Role.AGENT.value, hash_token(TOKEN), 0.0)

    asyncio.run(work())


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """``serve(**uvicorn_config options)``: a server in a thread; its port."""
    import uvicorn

    ledger = tmp_path / "ledger.db"
    _prepare(ledger)
    stops: list[tuple[uvicorn.Server, threading.Thread, socket.socket]] = []

    def start(**options: Any) -> int:
        options = {"header_timeout": 0.5, "keep_alive": 1, **options}
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        holder: dict[str, uvicorn.Server] = {}
        ready = threading.Event()

        async def run() -> None:
            async with SQLiteStore(ledger) as store:
                api = create_app(
                    store, commerce(tmp_path / "shop.db"), body_timeout=0.5, min_body_rate=1000
                )
                config = uvicorn_config(api, "127.0.0.1", 0, **options)
                config.log_level = "warning"
                config.lifespan = "off"
                server = uvicorn.Server(config)
                holder["server"] = server
                ready.set()
                await server.serve(sockets=[sock])

        thread = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
        thread.start()
        assert ready.wait(WAIT)
        stops.append((holder["server"], thread, sock))
        return int(sock.getsockname()[1])

    yield start
    for server, thread, sock in stops:
        server.should_exit = True
        thread.join(WAIT)
        sock.close()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=WAIT)


def until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (socket.timeout, failing
    the test, if it keeps it open past ``WAIT``)."""
    got = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return got
        if not chunk:
            return got
        got += chunk


def head(method: str, path: str, *lines: str) -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(lines)).encode()


def test_a_head_that_never_ends_is_cut_off(serve: Serve) -> None:
    port = serve()
    socks = [connect(port) for _ in range(3)]
    try:
        socks[0].sendall(head("GET", "/healthz"))  # and never the blank line
        socks[1].sendall(b"GET /hea")
        # socks[2] says nothing at all
        for sock in socks:
            assert until_closed(sock) == b""
    finally:
        for sock in socks:
            sock.close()
    with connect(port) as fine:  # the server still answers
        fine.sendall(head("GET", "/healthz", "Connection: close\r\n", "\r\n"))
        assert until_closed(fine).startswith(b"HTTP/1.1 200")


def test_a_body_that_stops_or_trickles_gets_408_and_is_closed(serve: Serve) -> None:
    port = serve()
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    kind = "Content-Type: application/json\r\n"
    socks = [connect(port) for _ in range(3)]
    stop = threading.Event()

    def trickle(sock: socket.socket) -> None:  # a byte every 50 ms: 20 bytes a second
        deadline = time.monotonic() + WAIT
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                sock.sendall(b" ")
            except OSError:
                return
            stop.wait(0.05)

    try:
        for sock in socks[:2]:
            sock.sendall(head("POST", "/v1/sagas", auth, kind, "Content-Length: 1000\r\n", "\r\n"))
            sock.sendall(b'{"catalogue"')  # and then nothing
        socks[2].sendall(head("POST", "/v1/sagas", auth, kind, "Content-Length: 100000\r\n\r\n"))
        trickler = threading.Thread(target=trickle, args=(socks[2],), daemon=True)
        trickler.start()
        for sock in socks:
            answer = until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"body_timeout" in answer
        stop.set()
        trickler.join(WAIT)
    finally:
        stop.set()
        for sock in socks:
            sock.close()


def test_a_body_without_a_token_is_refused_before_it_is_read(serve: Serve) -> None:
    port = serve()
    socks = [connect(port) for _ in range(3)]
    try:
        for n, sock in enumerate(socks):
            auth = "" if n == 0 else f"Authorization: Bearer pvt_wrong_{n}\r\n"
            sock.sendall(
                head(
                    "POST",
                    "/v1/sagas",
                    auth,
                    "Content-Type: application/json\r\n",
                    "Content-Length: 400000\r\n",
                    "\r\n",
                )
            )  # and no body: a 408 would mean the server waited for it
        for sock in socks:
            answer = until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
            assert b"connection: close" in answer.lower()
    finally:
        for sock in socks:
            sock.close()


def test_past_the_concurrency_limit_a_request_gets_503(serve: Serve) -> None:
    port = serve(header_timeout=30, limit_concurrency=3)
    idle = [connect(port) for _ in range(3)]
    try:
        for sock in idle:
            sock.sendall(head("GET", "/healthz"))  # holding a connection open
        time.sleep(0.2)  # only so that the server has accepted them (no bound relies on it)
        with connect(port) as late:
            late.sendall(head("GET", "/healthz", "Connection: close\r\n", "\r\n"))
            assert until_closed(late).startswith(b"HTTP/1.1 503")
    finally:
        for sock in idle:
            sock.close()
    deadline = time.monotonic() + WAIT
    while True:  # once the server has seen them go, it answers again
        with connect(port) as again:
            again.sendall(head("GET", "/healthz", "Connection: close\r\n", "\r\n"))
            if until_closed(again).startswith(b"HTTP/1.1 200"):
                break
        assert time.monotonic() < deadline
        time.sleep(0.05)
