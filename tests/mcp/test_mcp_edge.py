"""MCP over HTTP stands behind the edge the API has (issue 34, findings 1 to 4): a caller
without a token is refused before its body is read, a trickling body is cut off, bad tokens
are locked out per client (an address however written, an IPv6 /64), and another Host or a
request from another site is refused on any address, ``--allowed-host`` included."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp_support import INITIALIZE

from asgi_call import Body, call
from pivotal import Orchestrator
from pivotal.mcp import PATH, http_app
from pivotal.people.principals import hash_token
from pivotal.server.limits import Lockout

PIVOTAL = Path(sys.executable).parent / "pivotal"
HOST = "127.0.0.1:8765"
JSON = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def asked(token: str | None = None, host: str = HOST, **extra: str) -> dict[str, str]:
    found = {"host": host, **JSON, **extra}
    if token is not None:
        found["authorization"] = f"Bearer {token}"
    return found


async def agent_token(orch: Orchestrator) -> str:
    secret = "pvt_edge_agent"
    await orch.store.create_token("edge-agent", "agent", hash_token(secret), 0.0)
    return secret


async def test_a_caller_without_a_token_is_refused_before_the_body(orch: Orchestrator) -> None:
    """Finding 1: the whole body (up to 4 MiB) was read before the token was checked."""
    _, app = http_app(orch, host="127.0.0.1", port=8765)
    big = asked(**{"content-length": str(4 * 1024 * 1024)})
    for token in (None, "pvt_forged"):
        headers = big | ({"authorization": f"Bearer {token}"} if token else {})
        refused = await call(app, "POST", PATH, headers, Body([b"x" * 65536] * 8, stall=True))
        assert refused.status == 401, refused.body
        assert (refused.reads, refused.sent) == (0, 0)  # not drained: not a byte read
        assert refused.headers["www-authenticate"].startswith("Bearer")


async def test_a_trickling_body_is_cut_off(orch: Orchestrator) -> None:
    """Finding 1: a body sent a byte at a time had no deadline."""
    from pivotal.server.edge import Edge

    token = await agent_token(orch)
    edge = Edge(allowed_hosts=("127.0.0.1",), body_timeout=0.2, min_body_rate=1000.0)
    _, app = http_app(orch, host="127.0.0.1", port=8765, edge=edge)
    trickle = Body([b"{", b'"', b"j"], stall=True)
    slow = await call(app, "POST", PATH, asked(token), trickle)
    assert slow.status == 408
    assert json.loads(slow.body)["error"]["code"] == "body_timeout"
    assert slow.headers["connection"] == "close"


async def test_bad_tokens_are_locked_out_after_twenty(orch: Orchestrator) -> None:
    """Finding 3: 40 wrong tokens were 40 answers of 401; ``serve`` answers 429 after 20."""
    _, app = http_app(orch, host="127.0.0.1", port=8765)
    statuses = [
        (await call(app, "POST", PATH, asked(f"pvt_wrong_{n}"), Body([b"{}"]))).status
        for n in range(40)
    ]
    assert statuses[:20] == [401] * 20
    assert set(statuses[20:]) == {429}
    locked = await call(app, "POST", PATH, asked("pvt_wrong"), Body([b"{}"]))
    assert int(locked.headers["retry-after"]) >= 1
    # a valid token still passes the gate (stopped here by the body cap, unread)
    token = await agent_token(orch)
    huge = asked(token, **{"content-length": str(64 * 1024 * 1024)})
    assert (await call(app, "POST", PATH, huge, Body(stall=True))).status == 413


@pytest.mark.parametrize(
    "spellings",
    [
        # one IPv4 client written five ways
        [
            "203.0.113.5",
            "::ffff:203.0.113.5",
            "::FFFF:CB00:7105",
            "[::ffff:203.0.113.5]",
            "203.0.113.5 ",
        ],
        # one IPv6 address written five ways
        [
            "2001:db8::1",
            "2001:0db8:0:0::1",
            "2001:DB8::1",
            "2001:db8::1%eth0",
            "[2001:db8:0:0:0:0:0:1]",
        ],
        # five addresses of one IPv6 /64
        [
            "2001:db8:5:6::1",
            "2001:db8:5:6::2",
            "2001:db8:5:6:ffff::",
            "2001:db8:5:6:1:2:3:4",
            "2001:db8:5:6::abcd",
        ],
    ],
    ids=["ipv4-five-ways", "ipv6-five-ways", "ipv6-one-64"],
)
async def test_one_client_however_written_is_one_lockout(
    orch: Orchestrator, spellings: list[str]
) -> None:
    """Finding 4: the lockout counted each exact address string."""
    _, app = http_app(orch, host="127.0.0.1", port=8765)
    statuses = [
        (await call(app, "GET", PATH, asked(f"pvt_wrong_{n}"), client=spellings[n % 5])).status
        for n in range(21)
    ]
    assert statuses[:20] == [401] * 20
    assert statuses[20] == 429


@pytest.mark.parametrize(
    "bad",
    [
        {"host": "evil.test"},
        {"host": "evil.test:8765"},
        {"origin": "http://evil.test"},
        {"sec-fetch-site": "cross-site"},
    ],
)
async def test_another_host_or_site_is_refused_on_any_address(
    orch: Orchestrator, bad: dict[str, str]
) -> None:
    """Finding 2: bound to another address than loopback, Host and Origin went unchecked."""
    token = await agent_token(orch)
    _, app = http_app(orch, host="0.0.0.0", port=8765)
    refused = await call(app, "POST", PATH, asked(token, **bad), Body([b"{}"], stall=True))
    assert refused.status in (403, 421), refused.body
    assert refused.reads == 0


def test_the_command_takes_allowed_hosts_on_any_address(tmp_path: Path) -> None:
    """Finding 2: ``pivotal mcp --host 0.0.0.0 --allowed-host NAME`` answers for NAME only,
    and refuses a request from another site."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    ledger = ["--db", f"sqlite:///{tmp_path / 'ledger.db'}"]
    create = ["tokens", "create", "--name", "cli-bot", "--role", "agent", "--json", "--create"]
    made = subprocess.run(
        [str(PIVOTAL), *ledger, *create], env=env, capture_output=True, text=True, check=True
    )
    secret = json.loads(made.stdout)["token"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(PIVOTAL), *ledger, "--example-app", "mcp", "--transport", "http"]
    served = subprocess.Popen(
        [*command, "--host", "0.0.0.0", "--port", str(port), "--allowed-host", "mcp.test"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert served.stderr is not None
        seen = []
        for line in served.stderr:  # the per-test timeout bounds this wait
            seen.append(line)
            if "Application startup complete" in line:
                break
        else:
            pytest.fail(f"the server ended before it was ready: {''.join(seen)}")
        url = f"http://127.0.0.1:{port}{PATH}"
        auth = JSON | {"authorization": f"Bearer {secret}"}
        with httpx.Client(timeout=20) as http:
            named = {"host": f"mcp.test:{port}"}
            assert http.post(url, json=INITIALIZE, headers=auth | named).status_code == 200
            foreign = http.post(url, json=INITIALIZE, headers=auth | {"host": "evil.test"})
            assert foreign.status_code == 421
            loopback = http.post(url, json=INITIALIZE, headers=auth)  # not in the list given
            assert loopback.status_code == 421
            cross = auth | named | {"origin": "http://evil.test"}
            assert http.post(url, json=INITIALIZE, headers=cross).status_code == 403
    finally:
        served.terminate()
        served.wait(timeout=30)
        if served.stderr is not None:
            served.stderr.close()


def test_a_lockout_of_its_own_is_given_to_each_app(orch: Orchestrator) -> None:
    _, one = http_app(orch)
    _, two = http_app(orch)
    assert isinstance(one.state.pivotal_lockout, Lockout)
    assert one.state.pivotal_lockout is not two.state.pivotal_lockout
