"""``Guard``: what every request passes before anything else, as pure ASGI middleware.

* **Host.** With ``allowed_hosts`` (``pivotal serve --allowed-host``), a request whose
  ``Host`` names another host is answered 421 ``host_not_allowed`` (a DNS-rebinding page
  cannot reach the server under its own name). ``None`` checks nothing (an app built in a
  test or embedded). An entry is a host name or address without the port; ``.example.com``
  also allows every subdomain, and ``*`` allows any host.
* **Cross-site requests.** A request that may change state (any method but GET, HEAD and
  OPTIONS) whose ``Origin`` is neither the request's own host nor an allowed host, or whose
  ``Sec-Fetch-Site`` is ``cross-site``, is answered 403 ``origin_refused``, on the API and
  the pages alike; one without either (not from a browser) passes, and ``Origin: null`` is
  judged by ``Sec-Fetch-Site``. An API request of that kind whose body has a
  ``Content-Type`` must say ``application/json`` (else 415 ``unsupported_media_type``): a
  cross-site form (``text/plain``, urlencoded, multipart) cannot be a "simple" request the
  API obeys, so a proxy that authenticates users by cookie cannot be driven from another
  site. A body without a ``Content-Type`` is read as JSON, as before: a browser leaves the
  header out only when a script fetches a bare ``Blob``, and a cross-site fetch always says
  its ``Origin`` (and ``Sec-Fetch-Site``), which the check above refuses.
* **Answers.** Every answer carries ``X-Content-Type-Options: nosniff``, and
  ``Cache-Control: no-store`` and a ``Content-Security-Policy`` unless it set its own (the
  pages' static files are cacheable)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pivotal.server.errors import error_body

SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK = ("localhost", "127.0.0.1", "::1")
API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'"


def host_name(authority: str) -> str:
    """The host of a ``Host`` header or URL authority, lower case, without port or
    brackets."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1 : authority.find("]")] if "]" in authority else ""
    if authority.count(":") > 1:  # a bare IPv6 address
        return authority
    return authority.partition(":")[0]


def normal_hosts(hosts: Iterable[str]) -> tuple[str, ...]:
    """Allowed hosts as ``Guard`` compares them; ValueError on one that is no host."""
    found = []
    for host in hosts:
        entry = host.strip().lower()
        if entry not in ("*",) and not entry.startswith("."):
            entry = host_name(entry)
        body = entry.lstrip(".")
        if entry != "*" and (
            not body or not all(c.isalnum() or c in "-.:_" for c in body) or len(entry) > 253
        ):
            raise ValueError(f"{host!r} is not a host name")
        found.append(entry)
    return tuple(found)


def allowed(host: str, hosts: tuple[str, ...]) -> bool:
    if not host:
        return False
    for entry in hosts:
        if entry == "*" or host == entry:
            return True
        if entry.startswith(".") and (host == entry[1:] or host.endswith(entry)):
            return True
    return False


def is_json(content_type: str) -> bool:
    kind = content_type.partition(";")[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    if "transfer-encoding" in headers:
        return True
    return length is not None and length.strip() not in ("", "0")


async def answer(
    send: Send, status: int, code: str, message: str, extra: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """A JSON error answer, closing the connection (the body, if any, stays unread)."""
    payload = json.dumps(error_body(code, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class Guard:
    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str] | None = None) -> None:
        self.app = app
        self.hosts = None if allowed_hosts is None else normal_hosts(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        sent = _headed(send)
        if self.hosts is not None and not allowed(host_name(host), self.hosts):
            await answer(
                sent,
                421,
                "host_not_allowed",
                "this server does not answer for that Host (pivotal serve --allowed-host)",
            )
            return
        if scope.get("method", "GET") not in SAFE:
            if not self._from_here(headers, host):
                await answer(
                    sent, 403, "origin_refused", "a request from another site may not do this"
                )
                return
            path = str(scope.get("path", ""))
            api = path != "/ui" and not path.startswith("/ui/")
            kind = headers.get("content-type")
            if api and has_body(headers) and kind is not None and not is_json(kind):
                await answer(
                    sent,
                    415,
                    "unsupported_media_type",
                    "a request body must be JSON: Content-Type: application/json",
                )
                return
        await self.app(scope, receive, sent)

    def _from_here(self, headers: Headers, host: str) -> bool:
        """Not sent by a page of another site, as far as the browser tells: its ``Origin``
        is this host or an allowed one; an opaque ``Origin: null`` (what a browser sends
        under ``Referrer-Policy: no-referrer``, as the pages use) is judged by
        ``Sec-Fetch-Site``. Without either, not from a browser: the CSRF token and the JSON
        content type still guard."""
        fetch_site = headers.get("sec-fetch-site", "").strip().lower()
        if fetch_site == "cross-site":
            return False
        origin = headers.get("origin")
        if origin is None:
            return True
        if origin.strip().lower() == "null":
            return fetch_site in ("", "same-origin", "none")
        return self._same_site(origin, host)

    def _same_site(self, origin: str, host: str) -> bool:
        try:
            parts = urlsplit(origin.strip())
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (a sandboxed page, a file) and the like
        if parts.netloc.lower() == host.strip().lower():
            return True
        return self.hosts is not None and allowed(host_name(parts.netloc), self.hosts)


def _headed(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message.setdefault("headers", [])
            headers = MutableHeaders(scope=message)
            headers.setdefault("x-content-type-options", "nosniff")
            headers.setdefault("cache-control", "no-store")
            headers.setdefault("content-security-policy", API_CSP)
        await send(message)

    return sending
