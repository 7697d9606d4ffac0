"""Signed webhooks (Standard Webhooks): a relay sink that POSTs each message, and the
receiver's check.

Each request carries ``webhook-id`` (the message id: stable across retries, the key to
dedupe on), ``webhook-timestamp`` (unix seconds) and ``webhook-signature``: ``v1,`` and the
base64 HMAC-SHA256 of ``"{id}.{timestamp}.{body}"`` under the endpoint's secret (``whsec_``
and base64 key bytes), computed by the specification's own ``standardwebhooks`` package.
A 2xx answer is a delivery; 410 Gone rejects the message for good (dead at once); anything
else (429, 5xx, other 4xx, a redirect, a transport error) is retried by the relay, after
``Retry-After`` when the receiver sent one.

**SSRF guard.** Only ``https://`` URLs whose host resolves to public addresses are
accepted, unless ``allow_insecure=True`` (tests, a receiver on this machine). The host is
checked when the sink is made (to refuse a bad URL at once) and whenever the sink's client
opens a connection: the name is resolved once, every address is checked, and the connection
goes to an address that was checked, so a name whose records change between check and
connection (DNS rebinding) cannot reach an internal address; TLS (SNI and the certificate)
and the ``Host`` header still name the URL's host. IPv6 forms that carry an IPv4 address
(IPv4-mapped, -translated and -compatible, NAT64, 6to4, Teredo) are judged by that IPv4
address. Redirects are never followed and no proxy from the environment is used (it would
resolve the name itself). A client passed in (``client=``) is checked before each delivery
only: its own lookup is outside the guard.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import anyio
import anyio.to_thread
import httpcore
import httpx
import standardwebhooks

from pivotal.clock import Clock, SystemClock
from pivotal.errors import InvalidInput, PivotalError
from pivotal.operations.relay import DeliveryError, DeliveryRejected
from pivotal.redaction import redact, redact_url
from pivotal.sagas.outbox import Message

__all__ = [
    "Resolver",
    "UnsafeWebhookURL",
    "WebhookConfigError",
    "WebhookSink",
    "WebhookVerificationError",
    "new_secret",
    "sign",
    "verify",
]

log = logging.getLogger("pivotal.webhooks")

PREFIX = "whsec_"
MIN_KEY, MAX_KEY = 24, 64  # bytes of a secret's key (Standard Webhooks)

# A host's addresses, as text (raise OSError when it cannot be resolved).
Resolver = Callable[[str], Sequence[str]]


class WebhookConfigError(InvalidInput):
    """The webhook's URL or secret is not usable."""

    code = "webhook_invalid"


class UnsafeWebhookURL(WebhookConfigError):
    """The webhook URL is not https, or its host is a private, loopback or link-local
    address (pass allow_insecure=True for a receiver you run yourself).

    ``refusal`` is the reason without the way around it, and ``OVERRIDE`` names that way
    in Python; a caller that spells it otherwise (a command line's flag) says its own with
    ``with_override``, so this module names no flag."""

    code = "webhook_unsafe"
    OVERRIDE = "allow_insecure=True"

    def __init__(self, refusal: str, override: str = OVERRIDE) -> None:
        self.refusal = refusal
        super().__init__(f"{refusal}; {override} allows it for a receiver you run yourself")

    def with_override(self, override: str) -> UnsafeWebhookURL:
        """The same refusal, naming ``override`` (a command line's flag, say) as the way
        around it."""
        return UnsafeWebhookURL(self.refusal, override)


class WebhookVerificationError(PivotalError):
    """The webhook request is not signed by this secret, or is too old."""

    code = "webhook_unverified"


# -- signatures ----------------------------------------------------------------------------


def new_secret() -> str:
    """A new endpoint secret: ``whsec_`` and the base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    """The key bytes of a ``whsec_`` secret.

    Checked here rather than left to ``standardwebhooks.Webhook``, which takes the prefix as
    optional, skips characters that are not base64 and takes a key of any length: a secret
    mistyped or cut short in a deployment is refused when the sink is made, instead of
    signing every delivery with a key the receiver does not have."""
    if not isinstance(secret, str) or not secret.startswith(PREFIX):
        raise WebhookConfigError(f"a webhook secret starts with {PREFIX!r} (see new_secret())")
    try:
        key = base64.b64decode(secret[len(PREFIX) :], validate=True)
    except ValueError as exc:
        raise WebhookConfigError(f"a webhook secret is {PREFIX} and base64: {exc}") from None
    if not MIN_KEY <= len(key) <= MAX_KEY:
        raise WebhookConfigError(
            f"a webhook secret's key is {MIN_KEY}-{MAX_KEY} bytes (this one has {len(key)})"
        )
    return key


def _signer(secret: str) -> standardwebhooks.Webhook:
    """The Standard Webhooks signer for a checked ``whsec_`` secret."""
    return standardwebhooks.Webhook(_key(secret))


def _sign(signer: standardwebhooks.Webhook, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,`` and the signature of ``body``, by the Standard Webhooks library."""
    when = datetime.fromtimestamp(timestamp, tz=UTC)
    return signer.sign(message_id, when, body)


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` entry for a body: ``v1,<base64 HMAC-SHA256>``."""
    return _sign(_signer(secret), message_id, timestamp, body)


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: float = 300,
    now: float | None = None,
) -> None:
    """Check a received webhook: one of the ``v1`` signatures (space-separated, for secret
    rotation) matches the raw ``body`` (compared in constant time), and the timestamp is
    within ``tolerance`` seconds of ``now``. Raise ``WebhookVerificationError`` if not.
    Verify the raw bytes before parsing them.

    The signature is the library's (``Webhook.sign``); the headers and the time are checked
    here. ``Webhook.verify`` reads the wall clock itself, with a fixed five-minute window,
    and refuses on it before looking at the signature, so it can honour neither ``now`` (a
    test's clock, a replay of stored requests) nor ``tolerance``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    message_id = lowered.get("webhook-id")
    stamp = lowered.get("webhook-timestamp")
    signatures = lowered.get("webhook-signature")
    if not message_id or not stamp or not signatures:
        raise WebhookVerificationError(
            "missing webhook-id, webhook-timestamp or webhook-signature header"
        )
    try:
        timestamp = int(stamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not unix seconds") from None
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError(
            f"webhook-timestamp is {current - timestamp:+.0f} s from now (tolerance "
            f"{tolerance:g} s): too old, or a clock is wrong"
        )
    try:
        signer = _signer(secret)
    except WebhookConfigError as exc:
        raise WebhookVerificationError(exc.message) from None
    expected = _sign(signer, message_id, timestamp, body).encode()
    if not any(hmac.compare_digest(entry.encode(), expected) for entry in signatures.split()):
        raise WebhookVerificationError("no webhook-signature matches the body and secret")


# -- the SSRF guard ------------------------------------------------------------------------


def system_resolver(host: str) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order (``OSError`` when it does
    not resolve)."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_COMPATIBLE = ipaddress.IPv6Network("::/96")  # ::a.b.c.d (deprecated, RFC 4291)
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # ::ffff:0:a.b.c.d (RFC 2765)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # the well-known NAT64 prefix (RFC 6052)
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # local-use NAT64 (RFC 8215)
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")  # deprecated, still routed internally


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address leads to, each with the name of its form."""
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        return [("IPv4-mapped", ip.ipv4_mapped)]
    if ip in _TRANSLATED:
        return [("IPv4-translated", low)]
    if ip in _COMPATIBLE:
        return [("IPv4-compatible", low)]
    if ip in _NAT64:
        return [("NAT64", low)]
    if ip.sixtofour is not None:
        return [("6to4", ip.sixtofour)]
    if ip.teredo is not None:
        server, client = ip.teredo
        return [("Teredo server", server), ("Teredo client", client)]
    return []


def _unsafe_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why ``ip`` itself is not a public address (None: it is)."""
    if ip.is_unspecified:
        return f"{ip} is the unspecified address"
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_private:
        return f"{ip} is a private address"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if isinstance(ip, ipaddress.IPv6Address) and ip in _SITE_LOCAL:
        return f"{ip} is a site-local address"
    if ip.is_reserved or not ip.is_global:
        return f"{ip} is not a public address"
    return None


def _unsafe_address(address: str) -> str | None:
    """Why a webhook must not go to ``address`` (None: it is public).

    An IPv6 address that carries an IPv4 address (IPv4-mapped, IPv4-translated,
    IPv4-compatible, NAT64 ``64:ff9b::/96``, 6to4, Teredo) is judged by the IPv4 address it
    leads to. The local-use NAT64 prefix ``64:ff9b:1::/48`` is refused outright: where its
    IPv4 address sits is the operator's choice, so what it reaches cannot be told."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv4Address) or ip.is_loopback or ip.is_unspecified:
        return _unsafe_ip(ip)
    if ip in _NAT64_LOCAL:
        return f"{ip} is in the local-use NAT64 prefix {_NAT64_LOCAL}"
    embedded = _embedded_ipv4(ip)
    for form, ipv4 in embedded:
        why = _unsafe_ip(ipv4)
        if why is not None:
            return f"{ip} ({form}) leads to {why}"
    if embedded:
        return None
    return _unsafe_ip(ip)


def _literal(host: str) -> str | None:
    """The address ``host`` spells when it is an IP literal, in any form the system's
    resolver reads as one (``127.1``, ``2130706433``, ``0x7f.0.0.1``); else None."""
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


def _check_addresses(url: str, host: str, addresses: Sequence[str]) -> None:
    """Refuse (``UnsafeWebhookURL``) unless every one of ``addresses`` is public."""
    for address in addresses:
        why = _unsafe_address(address)
        if why is not None:
            raise UnsafeWebhookURL(
                f"refusing webhook {redact_url(url)}: {host} resolves to {why} (SSRF guard)"
            )


def _parse(url: str, allow_insecure: bool) -> httpx.URL:
    """The URL, checked: http(s), a host, and (unless insecure) https to a public host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise WebhookConfigError(f"not a webhook URL: {_shown(url)} ({exc})") from None
    if parsed.scheme not in ("https", "http") or not parsed.host:
        raise WebhookConfigError(f"a webhook URL is https://host/path, not {_shown(url)}")
    if allow_insecure:
        return parsed
    if parsed.scheme != "https":
        raise UnsafeWebhookURL(f"refusing webhook {redact_url(url)}: only https is allowed")
    host = parsed.host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        raise UnsafeWebhookURL(
            f"refusing webhook {redact_url(url)}: {host} is this machine (SSRF guard)"
        )
    return parsed


def _shown(url: object) -> str:
    """``url`` as it may appear in a message: its secrets hidden, quoted."""
    return repr(redact_url(url)) if isinstance(url, str) else repr(url)


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Opens the sink's connections: resolves the host once, refuses unless every address
    is public, then connects to one of the addresses it checked, so a name whose records
    change between check and connection (DNS rebinding) cannot reach an internal address.
    TLS (SNI, certificate) and the ``Host`` header still use the URL's host name: httpcore
    takes them from the request's origin, not from the address connected to."""

    def __init__(
        self,
        url: str,
        resolve: Callable[[str], Sequence[str]],
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._url = url
        self._resolve = resolve
        self._inner = inner or httpcore.AnyIOBackend()

    async def addresses(self, host: str, wait: float | None) -> list[str]:
        """``host``'s addresses, every one of them checked (``UnsafeWebhookURL`` if not)."""
        literal = _literal(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                with anyio.fail_after(wait):
                    addresses = list(
                        await anyio.to_thread.run_sync(self._resolve, host, abandon_on_cancel=True)
                    )
            except TimeoutError:
                raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
            except OSError as exc:
                raise httpcore.ConnectError(f"{host} does not resolve: {exc}") from exc
            if not addresses:
                raise httpcore.ConnectError(f"{host} resolves to no address")
        _check_addresses(self._url, host, addresses)
        return addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        deadline = None if timeout is None else time.monotonic() + timeout
        addresses = await self.addresses(host, timeout)
        failure: Exception | None = None
        for address in addresses:  # in the resolver's order, until one answers
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await self._inner.connect_tcp(
                    address.split("%", 1)[0],
                    port,
                    timeout=left,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("a webhook is not delivered over a unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (request mapping, errors, TLS verification), its connection
    pool opening connections through a ``_GuardedBackend``. No proxy: a proxy would resolve
    the host itself, after the check."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        # AsyncHTTPTransport.__init__ only builds ``_pool``; build it with our backend.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=10,
            max_keepalive_connections=10,
            keepalive_expiry=5.0,
            network_backend=backend,
        )


# -- the sink ------------------------------------------------------------------------------


def _retry_after(response: httpx.Response, now: float) -> float | None:
    """Seconds the receiver asked to wait (``Retry-After``: seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - now)
    except (TypeError, ValueError):
        return None


class WebhookSink:
    """A relay sink that POSTs each message's envelope as JSON, signed per Standard
    Webhooks. Close it (``aclose``, or ``async with``) when it made its own HTTP client."""

    def __init__(
        self,
        url: str,
        secret: str,
        *,
        allow_insecure: bool = False,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
        name: str | None = None,
        resolver: Resolver | None = None,
        clock: Clock | None = None,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._url = _parse(url, allow_insecure)
        self.url = url
        self._signer = _signer(secret)
        self.secret = secret
        self.allow_insecure = allow_insecure
        self.timeout = timeout
        self.name = name or f"webhook {self._url.host}"
        self._resolver = resolver
        self._clock: Clock = clock or SystemClock()
        self._client = client
        self._own_client = client is None
        # the sink's own client connects through the guard: one lookup, every address
        # checked, the connection made to a checked address (network_backend: for tests)
        self._backend = _GuardedBackend(url, self._resolve, network_backend)
        if not allow_insecure:
            self._check_now()

    def _resolve(self, host: str) -> Sequence[str]:
        return (self._resolver or system_resolver)(host)

    def _check_now(self) -> None:
        """Check the host's addresses now, to refuse a bad URL at once; a name that does not
        resolve yet is checked when a connection is opened."""
        host = self._url.host
        literal = _literal(host)
        if literal is not None:
            _check_addresses(self.url, host, [literal])
            return
        try:
            addresses = self._resolve(host)
        except OSError as exc:
            log.warning("webhook host %s does not resolve yet: %s", host, exc)
            return
        _check_addresses(self.url, host, addresses)

    async def _check_given_client(self) -> None:
        """With a client the caller gave, the guard cannot pick the address connected to:
        check the host's addresses before each delivery (a best effort: that client looks
        the name up again when it connects)."""
        host = self._url.host
        if self.allow_insecure or self._own_client or _literal(host) is not None:
            return
        try:
            addresses = await asyncio.to_thread(self._resolve, host)
        except OSError as exc:
            raise DeliveryError(f"{host} does not resolve: {exc}") from exc
        _check_addresses(self.url, host, addresses)

    def _new_client(self) -> httpx.AsyncClient:
        # never a proxy (or anything else) from the environment, insecure or not: a signed
        # delivery goes straight to its receiver; a deployment behind an egress proxy gives
        # its own client
        if self.allow_insecure:
            return httpx.AsyncClient(follow_redirects=False, trust_env=False)
        guarded = _GuardedTransport(self._backend)
        return httpx.AsyncClient(transport=guarded, follow_redirects=False, trust_env=False)

    def body(self, message: Message) -> bytes:
        """The request body: the message's envelope as compact JSON."""
        return json.dumps(
            message.envelope(), separators=(",", ":"), sort_keys=True, default=str
        ).encode()

    def headers(self, message: Message, body: bytes, timestamp: int) -> dict[str, str]:
        """The request's headers, signature included."""
        headers = {
            "content-type": "application/json",
            "user-agent": "pivotal-webhooks",
            "webhook-id": message.id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": _sign(self._signer, message.id, timestamp, body),
        }
        if message.traceparent:
            headers["traceparent"] = message.traceparent
        return headers

    async def deliver(self, message: Message) -> None:
        body = self.body(message)
        now = self._clock.now()
        headers = self.headers(message, body, int(now))
        if self._client is None:
            self._client = self._new_client()
        try:
            await self._check_given_client()
            async with self._client.stream(
                "POST", self._url, content=body, headers=headers, timeout=self.timeout
            ) as response:
                status = response.status_code  # the body is never read: only the status
        except UnsafeWebhookURL as exc:  # recorded for any surface: the reason, no override
            log.warning("%s", exc.refusal)
            raise DeliveryError(exc.refusal) from None
        except httpx.HTTPError as exc:
            raise DeliveryError(redact(f"{type(exc).__name__}: {exc}")) from exc
        if 200 <= status < 300:
            return
        if status == 410:
            raise DeliveryRejected(f"{self._url.host} answered 410 Gone: no more deliveries")
        if 400 <= status < 500 and status not in (408, 425, 429):
            log.warning("webhook %s refused %s with %d", redact_url(self.url), message.id, status)
        raise DeliveryError(
            f"{self._url.host} answered {status}", retry_after=_retry_after(response, now)
        )

    async def aclose(self) -> None:
        """Close the HTTP client this sink made (one it was given stays open)."""
        if self._own_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> WebhookSink:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"WebhookSink({redact_url(self.url)!r})"
