"""Every listener Pivotal serves (``pivotal.cli.listeners.LISTENERS``: the API and its
pages, MCP over HTTP, a worker's metrics endpoint) stands behind the same edge, and each property of
the edge is asserted on each: the caller is checked before a byte of the body is read, a
body over the cap is refused unread, a trickling body is cut off, another Host is refused,
a request from another site is refused, bad tokens are locked out per client (however its
address is written, an IPv6 /64 being one client), and uvicorn closes a late head. A new
listener added to the list is walked here with no change to this file."""

from __future__ import annotations

import asyncio
import random
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from asgi_call import Body, call
from pivotal import FakeClock, Orchestrator, SQLiteStore
from pivotal.cli.listeners import LISTENERS, Listener, listener
from pivotal.examples.commerce import CommerceApp
from pivotal.people.principals import Role, hash_token
from pivotal.server.edge import Edge, edge_of, uvicorn_config
from pivotal.server.limits import Lockout

HOST = "pivotal.test"
LIMIT = 3
HUGE = 64 * 1024 * 1024
WAIT = 10.0  # seconds a socket waits for the server: far past every timeout here


class Ticks:
    """A monotonic clock for the lockout that moves only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def orch(tmp_path: Path, app: CommerceApp, clock: FakeClock) -> AsyncIterator[Orchestrator]:
    store = SQLiteStore(tmp_path / "ledger.db")
    await store.open()
    yield Orchestrator(store, app, clock=clock, rng=random.Random(0))
    await store.close()


def edge(ticks: Ticks | None = None, **overrides: Any) -> Edge:
    settings: dict[str, Any] = {
        "allowed_hosts": (HOST,),
        "max_body": 4096,
        "body_timeout": 0.2,
        "min_body_rate": 1000.0,
        "header_timeout": 0.3,
        "lockout": Lockout(limit=LIMIT, clock=ticks or Ticks()),
    }
    return Edge(**(settings | overrides))


async def token_of(orch: Orchestrator, serves: Listener) -> str:
    """A valid token for ``serves``: of a role it admits."""
    role = Role.AGENT if Role.AGENT in serves.roles else sorted(serves.roles)[0]
    secret = f"pvt_edge_{role.value}"
    if await orch.store.token_by_hash(hash_token(secret)) is None:
        await orch.store.create_token(f"edge-{role.value}", role.value, hash_token(secret), 0.0)
    return secret


def headers(token: str | None = None, **extra: str) -> dict[str, str]:
    found = {"host": HOST, "content-type": "application/json", **extra}
    if token is not None:
        found["authorization"] = f"Bearer {token}"
    return found


LISTENED = pytest.mark.parametrize("serves", LISTENERS, ids=[x.name for x in LISTENERS])


def test_the_listeners_are_the_ones_the_commands_serve() -> None:
    assert [x.name for x in LISTENERS] == ["api", "mcp", "worker-metrics"]
    assert listener("mcp").roles == {Role.AGENT}
    with pytest.raises(KeyError):
        listener("nothing")


@LISTENED
async def test_the_caller_is_checked_before_a_byte_of_the_body(
    serves: Listener, orch: Orchestrator
) -> None:
    app = serves.build(orch, edge())
    _, path = serves.probe
    big = headers(**{"content-length": str(HUGE)})
    body = Body([b"x" * 1024] * 4, stall=True)
    refused = await call(app, "POST", path, big, body)
    assert refused.status == 401, refused.body
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert refused.headers["connection"] == "close"
    assert (refused.reads, refused.sent) == (0, 0)  # not a byte read
    forged = await call(app, "POST", path, big | headers("pvt_forged"), Body(stall=True))
    assert (forged.status, forged.reads) == (401, 0)


@LISTENED
async def test_a_body_over_the_cap_is_refused_unread(serves: Listener, orch: Orchestrator) -> None:
    app = serves.build(orch, edge())
    token = await token_of(orch, serves)
    _, path = serves.probe
    declared = await call(
        app, "POST", path, headers(token, **{"content-length": str(HUGE)}), Body(stall=True)
    )
    assert (declared.status, declared.reads) == (413, 0)
    streamed = await call(app, "POST", path, headers(token), Body([b"x" * 3000] * 2))
    assert streamed.status == 413  # as it streams in, past the cap


@LISTENED
async def test_a_body_that_stops_coming_is_cut_off(serves: Listener, orch: Orchestrator) -> None:
    app = serves.build(orch, edge())
    token = await token_of(orch, serves)
    _, path = serves.probe
    slow = await call(app, "POST", path, headers(token), Body([b"{"], stall=True))
    assert slow.status == 408
    assert b"body_timeout" in slow.body


@LISTENED
async def test_another_host_is_refused(serves: Listener, orch: Orchestrator) -> None:
    app = serves.build(orch, edge())
    token = await token_of(orch, serves)
    method, path = serves.probe
    for host in ("evil.test", "127.0.0.1", f"{HOST}.evil.test"):
        refused = await call(app, method, path, headers(token, host=host), Body(stall=True))
        assert (refused.status, refused.reads) == (421, 0), host
        assert b"host_not_allowed" in refused.body


@LISTENED
async def test_a_request_from_another_site_is_refused(serves: Listener, orch: Orchestrator) -> None:
    app = serves.build(orch, edge())
    token = await token_of(orch, serves)
    _, path = serves.probe
    for cross in ({"origin": "https://evil.test"}, {"sec-fetch-site": "cross-site"}):
        refused = await call(app, "POST", path, headers(token, **cross), Body(stall=True))
        assert (refused.status, refused.reads) == (403, 0), cross
        assert b"origin_refused" in refused.body


@LISTENED
async def test_bad_tokens_lock_the_client_out(serves: Listener, orch: Orchestrator) -> None:
    ticks = Ticks()
    app = serves.build(orch, edge(ticks))
    method, path = serves.probe
    # one IPv4 client, written as a network or a proxy may write it
    spellings = ["198.51.100.9", "::ffff:198.51.100.9", "::FFFF:c633:6409"]
    for n, client in enumerate(spellings):
        bad = await call(app, method, path, headers(f"pvt_wrong_{n}"), client=client)
        assert bad.status == 401, client
    locked = await call(app, method, path, headers("pvt_wrong_x"), client="198.51.100.9")
    assert locked.status == 429
    assert int(locked.headers["retry-after"]) >= 1
    assert b"too_many_failures" in locked.body
    # a valid token is never locked out; another client is not locked
    token = await token_of(orch, serves)
    over = headers(token, **{"content-length": str(HUGE)})
    passed = await call(app, "POST", path, over, Body(stall=True), client=spellings[1])
    assert passed.status == 413, passed.body  # past the gate, stopped by the body cap
    other = await call(app, method, path, headers("pvt_wrong_y"), client="198.51.100.10")
    assert other.status == 401
    ticks.now += 3600  # the lock lapses
    again = await call(app, method, path, headers("pvt_wrong_z"), client="198.51.100.9")
    assert again.status == 401


@LISTENED
async def test_one_ipv6_64_is_one_client(serves: Listener, orch: Orchestrator) -> None:
    app = serves.build(orch, edge())
    method, path = serves.probe
    for client in ("2001:db8:1:2::1", "2001:DB8:1:2:ffff::9", "2001:0db8:0001:0002::3%eth0"):
        assert (await call(app, method, path, headers("pvt_wrong"), client=client)).status == 401
    locked = await call(app, method, path, headers("pvt_wrong"), client="2001:db8:1:2:a:b:c:d")
    assert locked.status == 429
    elsewhere = await call(app, method, path, headers("pvt_wrong"), client="2001:db8:1:3::1")
    assert elsewhere.status == 401  # the next /64 is another client


@LISTENED
async def test_uvicorn_closes_a_connection_whose_head_is_late(
    serves: Listener, orch: Orchestrator, tmp_path: Path
) -> None:
    """Served as the commands serve it (``edge.uvicorn_config``, the header timeout read
    from the listener's edge): a head that never ends is closed; the test waits for the
    close itself."""
    import uvicorn

    app = serves.build(orch, edge(header_timeout=0.3))
    assert edge_of(app).header_timeout == 0.3
    config = uvicorn_config(app, "127.0.0.1", 0, log_level="warning")
    assert getattr(config.http, "header_timeout", None) == 0.3
    config.lifespan = "off"
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(WAIT):
            while not server.started:
                assert not serving.done()
                await asyncio.sleep(0.01)
        closed = threading.Event()

        def late_head() -> None:
            with socket.create_connection(sock.getsockname(), timeout=WAIT) as conn:
                conn.sendall(b"GET / HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\n")
                if conn.recv(1024) == b"":  # the server closed: no answer, no wait
                    closed.set()

        await asyncio.to_thread(late_head)
        assert closed.is_set()
    finally:
        server.should_exit = True
        await serving
        sock.close()
