"""Who is on the other end of the socket, and which peers are trusted proxies.

``trust_proxies(api, ["127.0.0.1", "10.0.0.0/8"])`` (``pivotal serve --trusted-proxy``)
names the addresses and networks of the reverse proxies in front of the server. Only a
request whose TCP peer is one of them may name its principal in the trusted proxy header
(``auth.trust_proxy_header``), say it arrived over https (``X-Forwarded-Proto``, for the
session cookie's ``Secure``) or name the client's address (``X-Forwarded-For``, for the
failure lockout). From any other peer those headers are ignored.

``client_key(scope)`` is the client as a network sees it, which is what the lockout counts:
an IPv4 address, or the /64 an IPv6 address is in (a client is given a whole /64 and may
use any address of it), however it is written (``network_key``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.types import Scope

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class TrustedProxies:
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, values: Iterable[str]) -> TrustedProxies:
        """Addresses (``127.0.0.1``, ``::1``) and networks (``10.0.0.0/8``); ValueError
        naming the first that is neither."""
        found: list[Network] = []
        for value in values:
            try:
                found.append(ipaddress.ip_network(value.strip(), strict=False))
            except ValueError:
                raise ValueError(f"{value!r} is not an IP address or network") from None
        return cls(tuple(found))

    def trusts(self, address: str | None) -> bool:
        if not address or not self.networks:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip.version == n.version and ip in n for n in self.networks)


def trust_proxies(api: Any, proxies: Iterable[str]) -> TrustedProxies:
    """Trust these proxy addresses and networks (kept on ``api.state``)."""
    trusted = TrustedProxies.parse(proxies)
    api.state.pivotal_proxies = trusted
    return trusted


def trusted_of(scope: Scope) -> TrustedProxies:
    app = scope.get("app")
    found = getattr(getattr(app, "state", None), "pivotal_proxies", None)
    return found if isinstance(found, TrustedProxies) else TrustedProxies()


def peer(scope: Scope) -> str | None:
    """The TCP peer's address (the proxy's, behind one)."""
    client = scope.get("client")
    return str(client[0]) if client else None


def from_trusted_proxy(scope: Scope) -> bool:
    return trusted_of(scope).trusts(peer(scope))


def client_address(scope: Scope) -> str:
    """The client's address: the peer's, or behind a trusted proxy the right-most address
    in ``X-Forwarded-For`` that is not itself a trusted proxy."""
    address = peer(scope) or "unknown"
    trusted = trusted_of(scope)
    if not trusted.trusts(address):
        return address
    hops = [
        hop.strip()
        for value in Headers(scope=scope).getlist("x-forwarded-for")
        for hop in value.split(",")
    ]
    for hop in reversed(hops):
        if hop and not trusted.trusts(hop):
            return hop[:64]
    return address


def network_key(address: str) -> str:
    """The client an address belongs to, one spelling for all its forms: an IPv4 address
    (``::ffff:1.2.3.4`` is ``1.2.3.4``), or its IPv6 /64 (``2001:db8::1``,
    ``2001:0DB8:0:0::7`` and ``[2001:db8::1%eth0]`` are all ``2001:db8::/64``). Anything
    that is no address is kept, lower case and bounded (``unknown``, a proxy's odd hop)."""
    text = address.strip().lower()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]
    text = text.partition("%")[0]  # a zone id names the interface, not the client
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return address.strip().lower()[:64] or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


def client_key(scope: Scope) -> str:
    """The lockout's key for the request's client (``client_address``, ``network_key``)."""
    return network_key(client_address(scope))


def arrived_over_https(scope: Scope) -> bool:
    """The request came over TLS: to this server, or to a trusted proxy that says so in
    ``X-Forwarded-Proto``."""
    if scope.get("scheme") in ("https", "wss"):
        return True
    if not from_trusted_proxy(scope):
        return False
    protos = Headers(scope=scope).getlist("x-forwarded-proto")
    return bool(protos) and protos[-1].split(",")[-1].strip().lower() == "https"
