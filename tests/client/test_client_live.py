"""``Client`` and ``AsyncClient`` against a real ``pivotal serve`` (one for the module,
``conftest.served``): each call as the server answers it, the errors by their classes, and
a submission that outlives a lost answer or a restart of the server, recorded once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from live_server import Connect, Served, checkout, done, every

from commerce_plans import approval_plan
from pivotal import (
    PlanParseError,
    PlanRejected,
    SagaConflict,
    SagaNotFound,
    SagaStatus,
    VersionConflict,
)
from pivotal.admission.validation import ErrorCode
from pivotal.client import ApiError, AsyncClient, Client
from pivotal.orchestration.rerun import SagaNotRerunnable
from pivotal.sagas.saga_ids import new
from pivotal.server import views
from pivotal.server.errors import Forbidden, Unauthorized
from pivotal.views.agent_view import SagaView as AgentSagaView
from pivotal.views.saga_actions import SagaNotAbortable

ROOT = Path(__file__).parents[2]


async def test_submit_get_and_events(served: Served, connect: Connect) -> None:
    bot, olga = connect("bot"), connect("olga")
    submitted = await done(bot.submit(checkout("order-1")))
    assert isinstance(submitted, views.Submitted)
    assert submitted.created is True
    assert submitted.status is SagaStatus.SUBMITTED
    assert submitted.saga_id.startswith("sg_")  # made by the client
    mine = await done(bot.get(submitted.saga_id))
    assert isinstance(mine, AgentSagaView)  # what an agent is shown of its own saga
    assert mine.saga_id == submitted.saga_id
    assert mine.submitted_by == "bot"
    stored = served.stored_id(submitted.saga_id)
    seen = await done(olga.get(stored))
    assert isinstance(seen, views.SagaView)  # what a person is shown
    assert seen.plan["catalogue"] == "checkout"
    assert seen.provenance["actor_id"] == "bot"
    log = await done(olga.events(stored))
    assert isinstance(log, views.EventLog)
    assert log.saga_id == stored
    assert [e["type"] for e in log.events] == ["saga_submitted"]
    assert log.events[0]["provenance_ref"] in log.provenance


async def test_the_same_id_and_plan_is_the_same_saga_and_another_plan_conflicts(
    served: Served, connect: Connect
) -> None:
    bot = connect("bot")
    saga_id = new()
    first = await done(bot.submit(checkout("order-2"), saga_id=saga_id))
    again = await done(bot.submit(checkout("order-2"), saga_id=saga_id))
    assert (first.created, again.created) == (True, False)
    assert again.saga_id == first.saga_id == saga_id
    with pytest.raises(SagaConflict) as raised:
        await done(bot.submit(checkout("order-3"), saga_id=saga_id))
    assert raised.value.status == 409
    assert served.count(served.stored_id(saga_id)) == 1


class LoseFirstAnswer(httpx.HTTPTransport):
    """Sends each request; the first answer to a POST is read and then lost."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and not self.lost:
            response.read()
            response.close()
            self.lost += 1
            raise httpx.ReadError("the answer was lost on the way back", request=request)
        return response


class AsyncLoseFirstAnswer(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if request.method == "POST" and not self.lost:
            await response.aread()
            await response.aclose()
            self.lost += 1
            raise httpx.ReadError("the answer was lost on the way back", request=request)
        return response


async def test_a_submission_whose_answer_was_lost_is_sent_again_and_recorded_once(
    served: Served, connect: Connect, request: pytest.FixtureRequest
) -> None:
    sync = request.node.callspec.params["connect"] == "sync"
    transport = LoseFirstAnswer() if sync else AsyncLoseFirstAnswer()
    bot = connect("bot", transport=transport, backoff=0.01)
    submitted = await done(bot.submit(checkout("order-4")))
    assert transport.lost == 1
    assert submitted.created is False  # the lost attempt recorded it: this is that saga
    assert served.count(served.stored_id(submitted.saga_id)) == 1
    assert (await done(bot.get(submitted.saga_id))).saga_id == submitted.saga_id


async def test_search_follows_the_cursor_page_by_page(served: Served, connect: Connect) -> None:
    bot, vera = connect("bot"), connect("vera")
    order = f"order-5-{new()[-6:]}"  # an order no other test names: these sagas alone
    served.open_order(order)
    ids = [(await done(bot.submit(checkout(order)))).saga_id for _ in range(5)]
    about = f"order_id={order}"
    first = await done(vera.search_page(about=about, limit=2))
    assert isinstance(first, views.SagaPage)
    assert len(first.items) == 2
    assert first.next_cursor is not None
    rows = await every(vera.search(about=about, catalogue="checkout", page_size=2))
    assert [r.saga_id for r in rows] == [served.stored_id(i) for i in reversed(ids)]  # newest first
    assert all(isinstance(r, views.SagaRow) for r in rows)
    oldest = await every(vera.search(about=about, order="asc", status=["submitted"]))
    assert [r.saga_id for r in oldest] == [served.stored_id(i) for i in ids]
    assert await every(vera.search(about=about, status="completed")) == []


async def test_validate_answers_the_errors_and_an_unreadable_plan_raises(
    connect: Connect,
) -> None:
    bot = connect("bot")
    assert (await done(bot.validate(checkout("order-1")))).valid is True
    wrong = {"catalogue": "checkout", "steps": [{"name": "teleport", "args": {}}]}
    checked = await done(bot.validate(wrong))
    assert checked.valid is False
    assert [e["code"] for e in checked.errors] == ["unknown_step"]
    with pytest.raises(PlanParseError) as raised:
        await done(bot.validate("{not json"))
    assert raised.value.status == 422
    with pytest.raises(PlanRejected) as rejected:
        await done(bot.submit(wrong))
    assert [e.code for e in rejected.value.errors] == [ErrorCode.UNKNOWN_STEP]


async def test_an_approval_is_decided_on_the_version_shown(
    served: Served, connect: Connect, request: pytest.FixtureRequest
) -> None:
    bot, alice = connect("bot"), connect("alice")
    saga_id = (await done(bot.submit(approval_plan(), saga_id=new()))).saga_id
    stored = served.stored_id(saga_id)
    assert (await served.run(stored)).status is SagaStatus.AWAITING_APPROVAL  # as a worker would
    [pending] = [p for p in await done(alice.approvals(page_size=1)) if p.saga_id == stored]
    assert isinstance(pending, views.PendingRow)
    assert pending.step == "capture_payment"
    assert pending.version is not None
    with pytest.raises(VersionConflict) as stale:
        await done(alice.approve(stored, version=pending.version - 1))
    assert stale.value.status == 409
    with pytest.raises(Forbidden):  # an agent never decides
        await done(bot.approve(saga_id, version=pending.version))
    if request.node.callspec.params["connect"] == "sync":
        decided = await done(alice.approve(stored, version=pending.version, reason="fine"))
        assert decided.approval is not None
        assert decided.approval["approver"] == "alice"
        assert decided.approval["status"] == "approved"
    else:
        decided = await done(alice.reject(stored, version=pending.version, reason="no"))
        assert decided.status is SagaStatus.COMPENSATING
    assert stored not in [p.saga_id for p in await done(alice.approvals())]


async def test_an_abort_then_a_rerun_of_the_compensated_saga(
    served: Served, connect: Connect
) -> None:
    bot, olga, vera = connect("bot"), connect("olga"), connect("vera")
    saga_id = (await done(bot.submit(checkout("order-1")))).saga_id
    stored = served.stored_id(saga_id)
    with pytest.raises(Forbidden) as refused:  # a viewer only reads
        await done(vera.abort(stored, reason="not mine to stop"))
    assert refused.value.status == 403
    with pytest.raises(SagaNotRerunnable):
        await done(olga.rerun(stored))
    aborted = await done(olga.abort(stored, reason="the customer cancelled"))
    assert aborted.status is SagaStatus.COMPENSATING
    with pytest.raises(SagaNotAbortable) as again:
        await done(olga.abort(stored, reason="twice"))
    assert again.value.status == 409
    assert (await served.run(stored)).status is SagaStatus.COMPENSATED
    rerun = await done(olga.rerun(stored))
    assert rerun.saga_id != stored
    assert (await done(olga.rerun(stored))).saga_id == rerun.saga_id  # one rerun per saga
    assert (await done(olga.get(rerun.saga_id))).provenance["rerun_of"]["saga_id"] == stored


async def test_refused_tokens_and_an_unknown_saga(connect: Connect) -> None:
    with pytest.raises(Unauthorized) as unknown:
        await done(connect("pvt_not_a_token").get("anything"))
    assert unknown.value.status == 401
    with pytest.raises(Unauthorized):
        await done(connect(None).validate(checkout()))  # no token at all
    with pytest.raises(Forbidden):  # an agent does not search
        await done(connect("bot").search_page())
    with pytest.raises(SagaNotFound) as missing:
        await done(connect("vera").get("no-such-saga"))
    assert isinstance(missing.value, ApiError)
    assert missing.value.status == 404
    assert missing.value.body == {
        "error": {"code": "saga_not_found", "message": missing.value.message}
    }


class WatchedRefusals(httpx.HTTPTransport):
    """Says when a connection was first refused."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = threading.Event()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return super().handle_request(request)
        except httpx.ConnectError:
            self.refused.set()
            raise


class AsyncWatchedRefusals(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.refused = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except httpx.ConnectError:
            self.refused.set()
            raise


PATIENT = {"retries": 100, "backoff": 0.05, "max_backoff": 0.5}  # outlasts a restart


def test_a_submission_outlives_a_restart_of_the_server(served: Served) -> None:
    transport = WatchedRefusals()
    saga_id = new()
    answers: list[views.Submitted | BaseException] = []
    with Client(served.url, token=served.tokens["bot"], transport=transport, **PATIENT) as bot:
        served.stop()

        def submit() -> None:
            try:
                answers.append(bot.submit(checkout("order-2"), saga_id=saga_id))
            except BaseException as exc:  # the test says what went wrong
                answers.append(exc)

        sending = threading.Thread(target=submit)
        sending.start()
        try:
            assert transport.refused.wait(timeout=60)  # it tried while the server was down
        finally:
            served.start()
            sending.join(timeout=60)
    [submitted] = answers
    assert isinstance(submitted, views.Submitted), submitted
    assert submitted.created is True
    assert submitted.saga_id == saga_id
    assert served.count(served.stored_id(saga_id)) == 1


async def test_an_async_submission_and_an_abort_outlive_a_restart_of_the_server(
    served: Served,
) -> None:
    watched = {name: AsyncWatchedRefusals() for name in ("bot", "olga")}
    bot, olga = (
        AsyncClient(served.url, token=served.tokens[name], transport=watched[name], **PATIENT)
        for name in ("bot", "olga")
    )
    async with bot, olga:
        await asyncio.to_thread(served.stop)
        saga_id = new()
        sending = asyncio.create_task(bot.submit(checkout("order-3"), saga_id=saga_id))
        try:
            await asyncio.wait_for(watched["bot"].refused.wait(), timeout=60)
        finally:
            await asyncio.to_thread(served.start)
        submitted = await sending
        assert (submitted.saga_id, submitted.created) == (saga_id, True)
        stored = served.stored_id(saga_id)
        assert served.count(stored) == 1
        await asyncio.to_thread(served.stop)  # an abort is sent again when nothing was sent
        aborting = asyncio.create_task(olga.abort(stored, reason="stopped during an outage"))
        try:
            await asyncio.wait_for(watched["olga"].refused.wait(), timeout=60)
        finally:
            await asyncio.to_thread(served.start)
        assert (await aborting).status is SagaStatus.COMPENSATING


def test_the_readme_s_client_example_runs_against_the_server(served: Served) -> None:
    example = ROOT / "examples" / "client" / "submit_order.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOTAL_")}
    env |= {"PIVOTAL_URL": served.url, "PIVOTAL_TOKEN": served.tokens["bot"]}
    said = []
    for _ in range(2):  # sent twice, it is the same saga
        ran = subprocess.run(
            [sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        said.append(ran.stdout)
    assert said[0].splitlines()[0].endswith(" submitted recorded"), said[0]
    assert said[1].splitlines()[0].endswith(" submitted already recorded"), said[1]
    assert served.count(served.stored_id("checkout-order-5")) == 1
