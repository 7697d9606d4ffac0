"""Signed webhooks (Standard Webhooks): a relay sink that POSTs each message, and the
receiver's check.

Each request carries ``webhook-id`` (the message id: stable across retries, the key to
dedupe on), ``webhook-timestamp`` (unix seconds) and ``webhook-signature``: ``v1,`` and the
base64 HMAC-SHA256 of ``"{id}.{timestamp}.{body}"`` under the endpoint's secret (``whsec_``
and base64 key bytes). A 2xx answer is a delivery; 410 Gone rejects the message for good
(dead at once); anything else (429, 5xx, other 4xx, a redirect, a transport error) is
retried by the relay, after ``Retry-After`` when the receiver sent one.

**SSRF guard.** Only ``https://`` URLs whose host resolves to public addresses are
accepted, unless ``allow_insecure=True`` (tests, a receiver on this machine). The host is
resolved when the sink is made and again before each delivery; a name whose records change
between that check and the connection (DNS rebinding) is not caught, so keep the HTTP
client from following redirects (the default) and point webhooks at hosts you trust.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from email.utils import parsedate_to_datetime

import httpx

from pivotal.clock import Clock, SystemClock
from pivotal.errors import InvalidInput, PivotalError
from pivotal.outbox import Message
from pivotal.relay import DeliveryError, DeliveryRejected

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
    address (pass allow_insecure=True for a receiver you run yourself)."""

    code = "webhook_unsafe"


class WebhookVerificationError(PivotalError):
    """The webhook request is not signed by this secret, or is too old."""

    code = "webhook_unverified"


# -- signatures ----------------------------------------------------------------------------


def new_secret() -> str:
    """A new endpoint secret: ``whsec_`` and the base64 of 32 random bytes."""
    return PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    """The key bytes of a ``whsec_`` secret."""
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


def _signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{message_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` entry for a body: ``v1,<base64 HMAC-SHA256>``."""
    return "v1," + _signature(_key(secret), message_id, timestamp, body)


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
    Verify the raw bytes before parsing them."""
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
        key = _key(secret)
    except WebhookConfigError as exc:
        raise WebhookVerificationError(exc.message) from None
    expected = _signature(key, message_id, timestamp, body).encode()
    matched = False
    for entry in signatures.split():
        version, _, value = entry.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected):
            matched = True
    if not matched:
        raise WebhookVerificationError("no webhook-signature matches the body and secret")


# -- the SSRF guard ------------------------------------------------------------------------


def system_resolver(host: str) -> list[str]:
    """The addresses ``host`` resolves to (``OSError`` when it does not)."""
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})


def _unsafe_address(address: str) -> str | None:
    """Why a webhook must not go to ``address`` (None: it is public)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return f"{ip} is a loopback address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_private:
        return f"{ip} is a private address"
    if ip.is_multicast or not ip.is_global:
        return f"{ip} is not a public address"
    return None


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _check_addresses(url: str, host: str, addresses: Sequence[str]) -> None:
    for address in addresses:
        why = _unsafe_address(address)
        if why is not None:
            raise UnsafeWebhookURL(
                f"refusing webhook {url}: {host} resolves to {why} (SSRF guard; "
                "allow_insecure=True for a receiver you run yourself)"
            )


def _parse(url: str, allow_insecure: bool) -> httpx.URL:
    """The URL, checked: http(s), a host, and (unless insecure) https to a public host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise WebhookConfigError(f"not a webhook URL: {url!r} ({exc})") from None
    if parsed.scheme not in ("https", "http") or not parsed.host:
        raise WebhookConfigError(f"a webhook URL is https://host/path, not {url!r}")
    if allow_insecure:
        return parsed
    if parsed.scheme != "https":
        raise UnsafeWebhookURL(
            f"refusing webhook {url}: only https is allowed (allow_insecure=True for a "
            "receiver you run yourself)"
        )
    host = parsed.host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        raise UnsafeWebhookURL(f"refusing webhook {url}: {host} is this machine (SSRF guard)")
    return parsed


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
    ) -> None:
        self._url = _parse(url, allow_insecure)
        self.url = url
        self._key = _key(secret)
        self.secret = secret
        self.allow_insecure = allow_insecure
        self.timeout = timeout
        self.name = name or f"webhook {self._url.host}"
        self._resolver: Resolver = resolver or system_resolver
        self._clock: Clock = clock or SystemClock()
        self._client = client
        self._own_client = client is None
        if not allow_insecure:
            self._check_now()

    def _check_now(self) -> None:
        """Check the host's addresses now; a name that does not resolve yet is checked again
        before each delivery."""
        host = self._url.host
        if _literal(host):
            _check_addresses(self.url, host, [host])
            return
        try:
            addresses = self._resolver(host)
        except OSError as exc:
            log.warning("webhook host %s does not resolve yet: %s", host, exc)
            return
        _check_addresses(self.url, host, addresses)

    async def _check_before_delivery(self) -> None:
        host = self._url.host
        if self.allow_insecure or _literal(host):
            return
        try:
            addresses = await asyncio.to_thread(self._resolver, host)
        except OSError as exc:
            raise DeliveryError(f"{host} does not resolve: {exc}") from exc
        try:
            _check_addresses(self.url, host, addresses)
        except UnsafeWebhookURL as exc:
            raise DeliveryError(exc.message) from None

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
            "webhook-signature": "v1," + _signature(self._key, message.id, timestamp, body),
        }
        if message.traceparent:
            headers["traceparent"] = message.traceparent
        return headers

    async def deliver(self, message: Message) -> None:
        await self._check_before_delivery()
        body = self.body(message)
        now = self._clock.now()
        headers = self.headers(message, body, int(now))
        if self._client is None:
            self._client = httpx.AsyncClient(follow_redirects=False)
        try:
            async with self._client.stream(
                "POST", self._url, content=body, headers=headers, timeout=self.timeout
            ) as response:
                status = response.status_code  # the body is never read: only the status
        except httpx.HTTPError as exc:
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc
        if 200 <= status < 300:
            return
        if status == 410:
            raise DeliveryRejected(f"{self._url.host} answered 410 Gone: no more deliveries")
        if 400 <= status < 500 and status not in (408, 425, 429):
            log.warning("webhook %s refused %s with %d", self.url, message.id, status)
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
        return f"WebhookSink({self.url!r})"
