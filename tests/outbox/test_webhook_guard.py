"""The webhook SSRF guard: the address classifier (IPv6 forms that carry an IPv4 address
are judged by that address), and DNS rebinding (one lookup, every address checked, the
connection made to a checked address). No real DNS and no real network: the resolver
``webhooks.py`` uses is replaced, ``socket.getaddrinfo`` refuses, and connections go to a
recording httpcore backend."""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterable, Sequence
from typing import Any

import httpcore
import pytest

from pivotal.operations import webhooks
from pivotal.operations.relay import DeliveryError
from pivotal.operations.webhooks import (
    UnsafeWebhookURL,
    WebhookSink,
    _literal,
    _unsafe_address,
    new_secret,
)
from pivotal.sagas.outbox import Message

SECRET = new_secret()
URL = "https://hooks.example.com/pivotal"
PUBLIC_V4 = "93.184.216.34"

INTERNAL = {
    "127.0.0.1": "loopback",
    "10.1.2.3": "private",
    "169.254.169.254": "link-local",
    "192.168.7.9": "private",
}
PUBLIC = ["93.184.216.34", "8.8.8.8"]


def message() -> Message:
    return Message(
        id="s-1:7",
        saga_id="s-1",
        type="saga.completed",
        payload={"status": "completed"},
        created_at=1_800_000_000.5,
    )


# -- the classifier --------------------------------------------------------------------------


def v4(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def v6(value: int) -> str:
    return str(ipaddress.IPv6Address(value))


def mapped(a: str) -> str:
    return f"::ffff:{a}"


def translated(a: str) -> str:
    return f"::ffff:0:{a}"


def compatible(a: str) -> str:
    return f"::{a}"


def nat64(a: str) -> str:
    return f"64:ff9b::{a}"


def sixtofour(a: str) -> str:  # 2002:WWXX:YYZZ::/48, the IPv4 address in bits 16..48
    return v6((0x2002 << 112) | (v4(a) << 80) | 1)


def teredo_server(a: str) -> str:  # 2001:0:SERVER:flags:port:~CLIENT
    return v6(
        (0x20010000 << 96)
        | (v4(a) << 64)
        | (0x8000 << 48)
        | (0x63BF << 32)
        | (~v4(PUBLIC_V4) & 0xFFFFFFFF)
    )


def teredo_client(a: str) -> str:
    return v6(
        (0x20010000 << 96)
        | (v4(PUBLIC_V4) << 64)
        | (0x8000 << 48)
        | (0x63BF << 32)
        | (~v4(a) & 0xFFFFFFFF)
    )


FORMS = [mapped, translated, compatible, nat64, sixtofour, teredo_server, teredo_client]


def test_the_forms_are_built_right() -> None:
    """The helpers spell what the standard library reads back (where it reads them)."""
    assert ipaddress.IPv6Address(mapped("10.1.2.3")).ipv4_mapped == ipaddress.IPv4Address(
        "10.1.2.3"
    )
    assert ipaddress.IPv6Address(sixtofour("10.1.2.3")).sixtofour == ipaddress.IPv4Address(
        "10.1.2.3"
    )
    server, client = ipaddress.IPv6Address(teredo_client("10.1.2.3")).teredo  # type: ignore[misc]
    assert (str(server), str(client)) == (PUBLIC_V4, "10.1.2.3")


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("internal", sorted(INTERNAL))
def test_an_ipv6_form_that_leads_to_an_internal_ipv4_address_is_refused(
    form: Any, internal: str
) -> None:
    address = form(internal)
    why = _unsafe_address(address)
    assert why is not None, address
    assert internal in why
    assert INTERNAL[internal] in why


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("public", PUBLIC)
def test_an_ipv6_form_that_leads_to_a_public_ipv4_address_passes(form: Any, public: str) -> None:
    assert _unsafe_address(form(public)) is None


def nat64_local(a: str) -> str:  # 64:ff9b:1::/48, RFC 6052's /48 layout (u octet skipped)
    bits = v4(a)
    return v6((0x0064FF9B0001 << 80) | ((bits >> 16) << 64) | ((bits & 0xFFFF) << 40))


@pytest.mark.parametrize("embedded", [*sorted(INTERNAL), *PUBLIC])
def test_the_local_use_nat64_prefix_is_refused_outright(embedded: str) -> None:
    for address in (nat64_local(embedded), f"64:ff9b:1::{embedded}"):
        why = _unsafe_address(address)
        assert why is not None
        assert "64:ff9b:1::/48" in why


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        *[(a, r) for a, r in INTERNAL.items()],
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "not a public"),
        ("224.0.0.1", "multicast"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "private"),
        ("not-an-address", "not an IP address"),
    ],
)
def test_internal_addresses_are_refused(address: str, reason: str) -> None:
    why = _unsafe_address(address)
    assert why is not None
    assert reason in why


@pytest.mark.parametrize("address", [*PUBLIC, "2606:4700:4700::1111", "2001:4860:4860::8888"])
def test_public_addresses_pass(address: str) -> None:
    assert _unsafe_address(address) is None


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("hooks.example.com", None),
    ],
)
def test_literals_are_read_as_the_resolver_would(host: str, address: str | None) -> None:
    assert _literal(host) == address


# -- URLs ---------------------------------------------------------------------------------------


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every lookup the guard makes goes to a fake resolver (public unless told otherwise);
    any other lookup fails the test."""
    lookups: list[str] = []

    def fake(host: str) -> list[str]:
        lookups.append(host)
        return [PUBLIC_V4]

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a real DNS lookup: {args}")

    monkeypatch.setattr(webhooks, "system_resolver", fake)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    return lookups


@pytest.mark.parametrize(
    "host",
    [
        "127.1",
        "2130706433",
        "0x7f.0.0.1",
        "[::ffff:127.0.0.1]",
        "[::127.0.0.1]",
        "[::ffff:0:a01:203]",
        "[64:ff9b::a9fe:a9fe]",
        "[2002:c0a8:709::1]",
        "[64:ff9b:1::808:808]",
    ],
)
def test_urls_to_internal_literals_are_refused_without_a_lookup(
    host: str, no_dns: list[str]
) -> None:
    with pytest.raises(UnsafeWebhookURL):
        WebhookSink(f"https://{host}/x", SECRET)
    assert no_dns == []


def test_refusals_do_not_show_the_urls_secrets(
    no_dns: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhooks, "system_resolver", lambda host: ["10.0.0.1"])
    url = "https://hook-user:hunter2@hooks.example.com/x?token=sesame"
    with pytest.raises(UnsafeWebhookURL) as raised:
        WebhookSink(url, SECRET)
    shown = raised.value.message
    assert "hooks.example.com" in shown
    assert "10.0.0.1" in shown
    assert "hunter2" not in shown
    assert "sesame" not in shown
    with pytest.raises(UnsafeWebhookURL) as raised:
        WebhookSink(url.replace("https", "http"), SECRET)
    assert "hunter2" not in raised.value.message
    assert "sesame" not in raised.value.message


# -- DNS rebinding ----------------------------------------------------------------------------


class Stream(httpcore.AsyncMockStream):
    """A connection that answers 204 and keeps what was sent and the TLS server name."""

    def __init__(self, backend: Backend) -> None:
        super().__init__([b"HTTP/1.1 204 No Content\r\n\r\n"])
        self.backend = backend

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self.backend.sent += buffer

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore.AsyncNetworkStream:
        self.backend.sni.append(server_hostname)
        return self


class Backend(httpcore.AsyncNetworkBackend):
    """Where the guard's connections go: records each address; refuses those in ``down``."""

    def __init__(self, down: Sequence[str] = ()) -> None:
        self.connected: list[tuple[str, int]] = []
        self.sni: list[str | None] = []
        self.sent = b""
        self.down = set(down)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connected.append((host, port))
        if host in self.down:
            raise httpcore.ConnectError(f"{host} refused the connection")
        return Stream(self)


async def test_a_rebinding_name_is_resolved_once_and_connected_at_the_checked_address(
    no_dns: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    answers: list[str] = []

    def rebinding(host: str) -> list[str]:  # public the first time, loopback after
        answers.append(host)
        return [PUBLIC_V4] if len(answers) == 1 else ["127.0.0.1"]

    backend = Backend()
    async with WebhookSink(URL, SECRET, network_backend=backend) as sink:
        # the sink checked the name when it was made; the delivery is what rebinding targets
        assert no_dns == ["hooks.example.com"]
        monkeypatch.setattr(webhooks, "system_resolver", rebinding)
        await sink.deliver(message())
        assert answers == ["hooks.example.com"]  # one lookup: the check and the connection
        assert backend.connected == [(PUBLIC_V4, 443)]  # to the address that was checked
        assert backend.sni == ["hooks.example.com"]  # TLS still names the host
        request = backend.sent.decode("latin-1")
        assert request.startswith("POST /pivotal HTTP/1.1\r\n")
        assert "\r\nHost: hooks.example.com\r\n" in request

        # a new connection makes its own lookup and check, which now answer loopback
        await sink.aclose()
        with pytest.raises(DeliveryError, match=r"127\.0\.0\.1 is a loopback address"):
            await sink.deliver(message())
    assert answers == ["hooks.example.com"] * 2
    assert backend.connected == [(PUBLIC_V4, 443)]


async def test_every_address_is_checked_and_a_checked_one_is_connected(no_dns: list[str]) -> None:
    backend = Backend(down=["2606:4700:4700::1111"])
    answer = ["2606:4700:4700::1111", "8.8.8.8"]
    async with WebhookSink(URL, SECRET, network_backend=backend, resolver=lambda h: answer) as sink:
        await sink.deliver(message())
        assert backend.connected == [("2606:4700:4700::1111", 443), ("8.8.8.8", 443)]
        answer.append("::ffff:10.0.0.1")
        backend.connected.clear()
        await sink.aclose()  # a new connection: looked up and checked again
        with pytest.raises(DeliveryError, match=r"10\.0\.0\.1"):
            await sink.deliver(message())
    assert backend.connected == []


async def test_a_name_that_stops_resolving_is_retried(no_dns: list[str]) -> None:
    state = {"resolves": True}

    def flaky(host: str) -> list[str]:
        if not state["resolves"]:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [PUBLIC_V4]

    backend = Backend()
    async with WebhookSink(URL, SECRET, network_backend=backend, resolver=flaky) as sink:
        state["resolves"] = False
        with pytest.raises(DeliveryError, match="does not resolve"):
            await sink.deliver(message())
    assert backend.connected == []
