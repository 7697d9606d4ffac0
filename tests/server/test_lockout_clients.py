"""The API's lockout counts a client as a network sees it (issue 34, finding 4): an IPv4
address, or an IPv6 /64, however the address is written; behind a trusted proxy, the
client ``X-Forwarded-For`` names, written any way."""

from __future__ import annotations

import pytest

from asgi_call import Body, call
from pivotal.examples.commerce import CommerceApp
from pivotal.server import create_app
from pivotal.server.limits import Lockout
from pivotal.store import Store

LIMIT = 5
FIVE_WAYS = {
    "ipv4": [
        "192.0.2.44",
        "::ffff:192.0.2.44",
        "::FFFF:C000:022C",
        "[::ffff:192.0.2.44]",
        " 192.0.2.44",
    ],
    "ipv6": [
        "2001:db8:a::44",
        "2001:0DB8:000A:0000::44",
        "2001:db8:a:0:0:0:0:44",
        "2001:db8:a::44%en0",
        "[2001:db8:a::44]",
    ],
    "ipv6-64": [
        "2001:db8:a::1",
        "2001:db8:a::2",
        "2001:db8:a:0:8000::",
        "2001:db8:a:0:ffff:ffff:ffff:ffff",
        "2001:db8:a:0:1::1",
    ],
}


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_network_key_is_one_spelling_per_client() -> None:
    from pivotal.server.peers import network_key

    for spellings in FIVE_WAYS.values():
        assert len({network_key(s) for s in spellings}) == 1, spellings
    assert network_key("::ffff:192.0.2.44") == "192.0.2.44"
    assert network_key("2001:db8:a::44") == "2001:db8:a::/64"
    assert network_key("2001:db8:a:1::44") != network_key("2001:db8:a::44")
    assert network_key("192.0.2.45") != network_key("192.0.2.44")
    assert network_key("unknown") == "unknown"


@pytest.mark.parametrize("spellings", FIVE_WAYS.values(), ids=FIVE_WAYS.keys())
async def test_one_client_written_five_ways_is_locked_out_once(
    store: Store, app: CommerceApp, spellings: list[str]
) -> None:
    api = create_app(store, app, lockout=Lockout(limit=LIMIT, clock=Ticks()))
    headers = {"host": "pivotal", "authorization": "Bearer pvt_wrong"}
    statuses = [
        (await call(api, "GET", "/v1/sagas", headers, client=spellings[n % 5])).status
        for n in range(LIMIT + 1)
    ]
    assert statuses == [401] * LIMIT + [429]
    other = await call(api, "GET", "/v1/sagas", headers, client="198.51.100.200")
    assert other.status == 401  # another client is not locked


async def test_the_client_behind_a_trusted_proxy_is_keyed_the_same_way(
    store: Store, app: CommerceApp
) -> None:
    api = create_app(
        store, app, lockout=Lockout(limit=LIMIT, clock=Ticks()), trusted_proxies=["10.0.0.1"]
    )
    spellings = FIVE_WAYS["ipv6-64"]
    for n in range(LIMIT):
        headers = {
            "host": "pivotal",
            "authorization": "Bearer pvt_wrong",
            "x-forwarded-for": spellings[n],
        }
        assert (await call(api, "GET", "/v1/sagas", headers, client="10.0.0.1")).status == 401
    locked = await call(
        api,
        "POST",
        "/v1/plans/validate",
        {"host": "pivotal", "authorization": "Bearer pvt_x", "x-forwarded-for": "2001:db8:a::9"},
        Body([b"{}"], stall=True),
        client="10.0.0.1",
    )
    assert (locked.status, locked.reads) == (429, 0)
