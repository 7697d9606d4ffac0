"""Signed webhooks: signatures a receiver verifies, the answers a relay acts on (through
``httpx.MockTransport`` and a real HTTP server on this machine), and the SSRF guard."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import standardwebhooks

from pivotal import FakeClock
from pivotal.operations.relay import DeliveryError, DeliveryRejected, Relay
from pivotal.operations.webhooks import (
    UnsafeWebhookURL,
    WebhookConfigError,
    WebhookSink,
    WebhookVerificationError,
    new_secret,
    sign,
    verify,
)
from pivotal.sagas.outbox import Message
from pivotal.store import Store

RunSagas = Callable[..., Awaitable[list[str]]]  # the ``sagas`` fixture
SECRET = new_secret()
PUBLIC = ["93.184.216.34"]
URL = "https://hooks.example.com/pivotal"


def public(host: str) -> list[str]:
    return PUBLIC


def message(**fields: Any) -> Message:
    base: dict[str, Any] = {
        "id": "s-1:7",
        "saga_id": "s-1",
        "type": "saga.completed",
        "payload": {"status": "completed"},
        "created_at": 1_800_000_000.5,
    }
    return Message(**(base | fields))


# -- signatures ----------------------------------------------------------------------------


def test_a_new_secret_is_whsec_and_32_random_bytes() -> None:
    one, two = new_secret(), new_secret()
    assert one.startswith("whsec_")
    assert one != two
    assert len(base64.b64decode(one.removeprefix("whsec_"))) == 32


@pytest.mark.parametrize("body", [b"{}", '{"é":1}'.encode(), b"\xff\x00{"])
def test_sign_matches_the_standard_webhooks_construction(body: bytes) -> None:
    import hashlib
    import hmac

    # the body's bytes as they are, UTF-8 or not
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    expected = hmac.new(key, b"msg_1.1700000000." + body, hashlib.sha256).digest()
    assert sign(SECRET, "msg_1", 1_700_000_000, body) == "v1," + base64.b64encode(expected).decode()


def headers_for(body: bytes, at: int = 1_800_000_000, secret: str = SECRET) -> dict[str, str]:
    return {
        "Webhook-Id": "m-1",
        "Webhook-Timestamp": str(at),
        "Webhook-Signature": sign(secret, "m-1", at, body),
    }


def test_verify_accepts_a_signed_body_and_any_of_several_signatures() -> None:
    body = b'{"a":1}'
    verify(SECRET, headers_for(body), body, now=1_800_000_100)
    rotated = headers_for(body)
    rotated["Webhook-Signature"] = (
        sign(new_secret(), "m-1", 1_800_000_000, body) + " " + rotated["Webhook-Signature"]
    )
    verify(SECRET, rotated, body, now=1_800_000_000)


@pytest.mark.parametrize(
    "change",
    ["body", "secret", "old", "future", "missing", "timestamp", "version"],
)
def test_verify_refuses_what_was_not_signed_now_by_this_secret(change: str) -> None:
    body = b'{"a":1}'
    headers = headers_for(body, secret=new_secret() if change == "secret" else SECRET)
    now = {"old": 1_800_000_301, "future": 1_799_999_699}.get(change, 1_800_000_000)
    if change == "body":
        body = b'{"a":2}'
    if change == "missing":
        del headers["Webhook-Id"]
    if change == "timestamp":
        headers["Webhook-Timestamp"] = "soon"
    if change == "version":
        headers["Webhook-Signature"] = headers["Webhook-Signature"].replace("v1,", "v2,")
    with pytest.raises(WebhookVerificationError):
        verify(SECRET, headers, body, now=now)


# -- against the standardwebhooks package's own signer and verifier --------------------------


def package_signed(
    body: bytes, at: int = 1_800_000_000, secrets: tuple[str, ...] = (SECRET,)
) -> dict[str, str]:
    """Headers for ``body`` signed by the package, one signature per secret."""
    when = datetime.fromtimestamp(at, tz=UTC)
    signatures = [standardwebhooks.Webhook(s).sign("m-1", when, body) for s in secrets]
    return {
        "webhook-id": "m-1",
        "webhook-timestamp": str(at),
        "webhook-signature": " ".join(signatures),
    }


async def test_what_the_relay_signs_passes_the_package_verifier(
    store: Store, clock: FakeClock, sagas: RunSagas
) -> None:
    got: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        got.append(request)
        return httpx.Response(204)

    await sagas(1, count=1)
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        # the sink signs with the real time: the package's verifier reads the wall clock
        # (five minutes either way), with no clock of its own to give it
        sink = WebhookSink(URL, SECRET, client=client, resolver=public)
        report = await Relay(store, [sink], clock=clock, timeout=10).run(until_idle=True)
    assert report.delivered == len(got) == 2
    for request in got:
        envelope = standardwebhooks.Webhook(SECRET).verify(request.content, dict(request.headers))
        assert envelope["id"] == request.headers["webhook-id"]
        with pytest.raises(standardwebhooks.WebhookVerificationError):
            standardwebhooks.Webhook(new_secret()).verify(request.content, dict(request.headers))


def test_what_the_package_signs_passes_ours() -> None:
    body = b'{"a":1}'
    verify(SECRET, package_signed(body), body, now=1_800_000_299)
    # during a rotation the sender signs with the old secret and the new one
    rotated = package_signed(body, secrets=(new_secret(), SECRET))
    verify(SECRET, rotated, body, now=1_800_000_000)
    assert package_signed(body)["webhook-signature"] == sign(SECRET, "m-1", 1_800_000_000, body)


@pytest.mark.parametrize("change", ["body", "secret", "stale", "ahead"])
def test_ours_refuses_what_the_package_signed_then_changed(change: str) -> None:
    body = b'{"a":1}'
    headers = package_signed(body, secrets=(new_secret() if change == "secret" else SECRET,))
    now = {"stale": 1_800_000_301, "ahead": 1_799_999_699}.get(change, 1_800_000_000)
    if change == "body":
        body = b'{"a":2}'
    with pytest.raises(WebhookVerificationError) as refused:
        verify(SECRET, headers, body, now=now)
    assert type(refused.value) is WebhookVerificationError  # ours, not the package's
    assert refused.value.code == "webhook_unverified"


@pytest.mark.parametrize("secret", ["plain", "whsec_!!!", "whsec_" + "QUJD", "whsec_"])
def test_a_bad_secret_is_refused(secret: str) -> None:
    with pytest.raises(WebhookConfigError):
        WebhookSink(URL, secret, resolver=public)


# -- the SSRF guard ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/x",
        "https://127.0.0.1/x",
        "https://10.0.0.8/x",
        "https://192.168.1.1/x",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/x",
        "https://[::ffff:10.0.0.1]/x",
        "https://100.64.0.1/x",
        "https://0.0.0.0/x",
        "https://localhost/x",
        "https://api.localhost/x",
    ],
)
def test_private_and_insecure_urls_are_refused(url: str) -> None:
    with pytest.raises(UnsafeWebhookURL):
        WebhookSink(url, SECRET, resolver=public)


def test_a_name_resolving_to_a_private_address_is_refused() -> None:
    with pytest.raises(UnsafeWebhookURL, match=r"10\.1\.2\.3"):
        WebhookSink(URL, SECRET, resolver=lambda host: ["93.184.216.34", "10.1.2.3"])


@pytest.mark.parametrize("url", ["ftp://x/y", "https:///path", "not a url", ""])
def test_a_malformed_url_is_refused(url: str) -> None:
    with pytest.raises(WebhookConfigError):
        WebhookSink(url, SECRET, resolver=public, allow_insecure=True)


async def test_a_name_that_turns_private_later_is_not_delivered_to() -> None:
    answers = {"now": PUBLIC}
    calls: list[httpx.Request] = []
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(lambda r: calls.append(r) or httpx.Response(200))
    )
    async with client:
        sink = WebhookSink(URL, SECRET, client=client, resolver=lambda h: answers["now"])
        answers["now"] = ["127.0.0.1"]
        with pytest.raises(DeliveryError, match="loopback"):
            await sink.deliver(message())
    assert calls == []


# -- answers, through a mock transport -------------------------------------------------------


async def post(status: int, headers: dict[str, str] | None = None) -> list[httpx.Request]:
    """Deliver one message to a receiver answering ``status``; the requests it got."""
    got: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        got.append(request)
        return httpx.Response(status, headers=headers or {})

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        sink = WebhookSink(URL, SECRET, client=client, resolver=public, clock=FakeClock())
        await sink.deliver(message(traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01"))
    return got


async def test_a_delivery_is_a_signed_post_of_the_envelope() -> None:
    (request,) = await post(204)
    assert request.method == "POST"
    assert str(request.url) == URL
    body = request.content
    assert json.loads(body) == message().envelope()
    assert request.headers["webhook-id"] == "s-1:7"
    assert request.headers["webhook-timestamp"] == "1800000000"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["traceparent"].startswith("00-aaaa")
    verify(SECRET, dict(request.headers), body, now=1_800_000_000)


async def test_410_rejects_the_message_for_good() -> None:
    with pytest.raises(DeliveryRejected):
        await post(410)


@pytest.mark.parametrize("status", [301, 400, 404, 408, 429, 500, 503])
async def test_other_answers_are_retried(status: int) -> None:
    with pytest.raises(DeliveryError) as raised:
        await post(status, {"Retry-After": "120"} if status == 429 else None)
    assert not isinstance(raised.value, DeliveryRejected)
    assert str(status) in raised.value.message
    assert raised.value.retry_after == (120.0 if status == 429 else None)


async def test_a_transport_error_is_retried() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
        sink = WebhookSink(URL, SECRET, client=client, resolver=public)
        with pytest.raises(DeliveryError, match="ConnectError"):
            await sink.deliver(message())


# -- a real receiver on this machine ----------------------------------------------------------


class Receiver(BaseHTTPRequestHandler):
    """Verifies each request with ``verify`` before reading it as JSON; keeps what passed."""

    received: list[tuple[str, dict[str, Any]]]
    refused: list[str]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            verify(SECRET, dict(self.headers.items()), body)
        except WebhookVerificationError as exc:
            self.refused.append(str(exc))
            self.send_response(401)
        else:
            self.received.append((self.headers["webhook-id"], json.loads(body)))
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[Receiver]]]:
    handler = type("Handler", (Receiver,), {"received": [], "refused": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_a_real_receiver_verifies_every_delivery(
    store: Store, clock: FakeClock, sagas: RunSagas, receiver: tuple[str, type[Receiver]]
) -> None:
    url, handler = receiver
    with pytest.raises(UnsafeWebhookURL):
        WebhookSink(url, SECRET)
    ids = await sagas(2, count=1)
    async with WebhookSink(url, SECRET, allow_insecure=True) as sink:
        # the sink signs with the real time, which the receiver checks
        report = await Relay(store, [sink], clock=clock, timeout=10).run(until_idle=True)
    assert report.delivered == 4
    assert handler.refused == []
    got = [mid for mid, _ in handler.received]
    assert sorted(got) == sorted(m.id for m in await store.messages())
    for saga_id in ids:
        assert [mid for mid in got if mid.startswith(saga_id + ":")] == [
            m.id for m in await store.messages(saga_id=saga_id)
        ]
    assert all(envelope["id"] == mid for mid, envelope in handler.received)


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_an_insecure_sink_never_takes_a_proxy_from_the_environment(
    store: Store,
    clock: FakeClock,
    sagas: RunSagas,
    receiver: tuple[str, type[Receiver]],
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
) -> None:
    # a signed delivery sent to a proxy named by the environment would leave the host; the
    # one here refuses every connection, so only a direct delivery can arrive
    monkeypatch.setenv(variable, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    url, handler = receiver
    await sagas(1, count=1)
    async with WebhookSink(url, SECRET, allow_insecure=True) as sink:
        report = await Relay(store, [sink], clock=clock, timeout=10).run(until_idle=True)
    assert report.delivered == 2
    assert len(handler.received) == 2
