"""``Client`` and ``AsyncClient`` behind a failing proxy, and refused for now by the server
itself (its own ``pivotal serve``: ``conftest.served``, one per module).

A proxy's 502 or 504 is sent again as a 503 is, for the calls that may be (a read, a
submission by its saga id), and raised for a decision: the proxy may have passed it on
before its upstream failed, and here it did. Pivotal answers 429 itself to a client whose
bad credentials it locked out: ``RateLimited``, raised at once since its ``Retry-After``
asks more than the client waits between attempts."""

from __future__ import annotations

import httpx
import pytest
from live_server import Connect, Served, checkout, done

from commerce_plans import approval_plan
from pivotal import SagaStatus
from pivotal.client import ApiError, AsyncClient, Client, RateLimited
from pivotal.sagas.saga_ids import new
from pivotal.server import views
from pivotal.server.errors import Unauthorized


def _failing(status: int) -> httpx.Response:
    page = f"<html><h1>{status}</h1>upstream</html>"
    return httpx.Response(status, text=page, headers={"content-type": "text/html"})


class Gateway(httpx.HTTPTransport):
    """A proxy in front of the server: its next answers are ``failing`` (a status each,
    its own page), then it passes every request on. ``forwarded``: it passed each failed
    one on first and lost the upstream's answer (the server carried it out)."""

    def __init__(self, *failing: int, forwarded: bool = False) -> None:
        super().__init__()
        self.failing = list(failing)
        self.forwarded = forwarded
        self.seen: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if not self.failing:
            return super().handle_request(request)
        if self.forwarded:
            lost = super().handle_request(request)
            lost.read()
            lost.close()
        return _failing(self.failing.pop(0))


class AsyncGateway(httpx.AsyncHTTPTransport):
    def __init__(self, *failing: int, forwarded: bool = False) -> None:
        super().__init__()
        self.failing = list(failing)
        self.forwarded = forwarded
        self.seen: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if not self.failing:
            return await super().handle_async_request(request)
        if self.forwarded:
            lost = await super().handle_async_request(request)
            await lost.aread()
            await lost.aclose()
        return _failing(self.failing.pop(0))


def gateway(
    request: pytest.FixtureRequest, *failing: int, forwarded: bool = False
) -> Gateway | AsyncGateway:
    """The proxy for the kind of client the test runs with (``conftest.connect``)."""
    if request.node.callspec.params["connect"] == "sync":
        return Gateway(*failing, forwarded=forwarded)
    return AsyncGateway(*failing, forwarded=forwarded)


async def test_a_submission_and_a_read_pass_a_proxy_s_502_and_504(
    served: Served, connect: Connect, request: pytest.FixtureRequest
) -> None:
    proxy = gateway(request, 502, 504, forwarded=True)
    bot = connect("bot", transport=proxy, backoff=0.01)
    submitted = await done(bot.submit(checkout("order-1")))
    assert len(proxy.seen) == 3  # 502, 504, then the answer
    assert len({r.url.params["saga_id"] for r in proxy.seen}) == 1
    assert submitted.created is False  # the first attempt recorded it: this is that saga
    stored = served.stored_id(submitted.saga_id)
    assert served.count(stored) == 1
    reader = gateway(request, 504, 502)
    vera = connect("vera", transport=reader, backoff=0.01)
    shown = await done(vera.get(stored))
    assert shown.status is SagaStatus.SUBMITTED
    assert len(reader.seen) == 3


async def test_a_decision_answered_502_is_raised_not_sent_again(
    served: Served, connect: Connect, request: pytest.FixtureRequest
) -> None:
    """Sent again it would be refused (409: decided), though the first was carried out."""
    saga_id = (await done(connect("bot").submit(approval_plan(), saga_id=new()))).saga_id
    stored = served.stored_id(saga_id)
    assert (await served.run(stored)).status is SagaStatus.AWAITING_APPROVAL
    [pending] = [p for p in await done(connect("vera").approvals()) if p.saga_id == stored]
    assert pending.version is not None
    proxy = gateway(request, 502, forwarded=True)
    alice = connect("alice", transport=proxy, backoff=0.01)
    with pytest.raises(ApiError) as raised:
        await done(alice.approve(stored, version=pending.version, reason="fine"))
    assert (raised.value.status, raised.value.code) == (502, "http_error")
    assert len(proxy.seen) == 1
    shown = await done(connect("vera").get(stored))
    assert isinstance(shown, views.SagaView)
    assert shown.approval is not None
    assert shown.approval["status"] == "approved"  # the proxy had passed it on


class Counted(httpx.HTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)


LOCKOUT = 20  # bad credentials a client may present in a minute (limits.Lockout's default)


async def test_a_client_locked_out_by_its_bad_token_is_rate_limited_at_once(
    served: Served,
) -> None:
    """The server's own 429 (``too_many_failures``), from its lockout of bad credentials:
    ``RateLimited`` with the seconds it asked; not waited out (longer than
    ``max_backoff``), so one request. A valid token from the same address still passes."""
    counted = Counted()
    with Client(served.url, token="pvt_not_a_token", transport=counted, backoff=0.01) as wrong:
        for _ in range(LOCKOUT):
            with pytest.raises(Unauthorized):
                wrong.get("anything")
        assert counted.sent == LOCKOUT
        with pytest.raises(RateLimited) as raised:
            wrong.get("anything")
    assert counted.sent == LOCKOUT + 1
    exc = raised.value
    assert (exc.status, exc.code) == (429, "too_many_failures")
    assert exc.retry_after is not None
    assert 0 < exc.retry_after <= 60
    assert "too many failed credentials" in exc.message
    async with AsyncClient(served.url, token="pvt_still_wrong") as also_wrong:
        with pytest.raises(RateLimited):
            await also_wrong.validate(checkout())
    with Client(served.url, token=served.tokens["bot"]) as bot:
        assert bot.validate(checkout()).valid is True  # a valid token is never locked out
