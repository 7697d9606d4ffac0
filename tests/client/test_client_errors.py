"""The client without a server (httpx's MockTransport answers): an error answer is raised as
the class of its code, what is sent again after which failure, and how long it waits."""

from __future__ import annotations

import inspect
import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from pivotal import (
    FourEyesError,
    InvalidInput,
    PivotalError,
    PlanRejected,
    RolloutShadowed,
    SagaConflict,
    SagaNotFound,
)
from pivotal.admission.validation import ErrorCode
from pivotal.client import (
    ApiError,
    AsyncClient,
    Client,
    ClientError,
    OutcomeUnknown,
    RateLimited,
    ServerUnreachable,
    UnexpectedReply,
    error_class,
)
from pivotal.client import _calls as calls
from pivotal.client._calls import Attempts, Backoff
from pivotal.server.errors import Forbidden, Unauthorized
from pivotal.views.saga_actions import SagaNotAbortable

URL = "http://pivotal.test"
Handler = Callable[[httpx.Request], httpx.Response]
OUTCOME = {"saga_id": "s-1", "status": "submitted", "version": 1, "reason": None, "approval": None}


def error(status: int, code: str, message: str = "no", **extra: Any) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": message, **extra}})


def client(handler: Handler, **options: Any) -> Client:
    options = {"retries": 3, "backoff": 0.0, **options}
    return Client(URL, token="pvt_x", transport=httpx.MockTransport(handler), **options)


def answering(*answers: httpx.Response | Exception) -> tuple[Handler, list[httpx.Request]]:
    """A handler giving ``answers`` in turn (an exception is raised), and what it was sent."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        given = answers[min(len(seen), len(answers)) - 1]
        if isinstance(given, Exception):
            raise given
        return given

    return handle, seen


def test_an_error_answer_is_the_class_of_its_code_with_status_and_body() -> None:
    handle, _ = answering(error(404, "saga_not_found", "no saga 'x'"))
    with client(handle) as c, pytest.raises(SagaNotFound) as raised:
        c.get("x")
    exc = raised.value
    assert isinstance(exc, ApiError)
    assert isinstance(exc, ClientError)
    assert exc.code == "saga_not_found"
    assert exc.status == 404
    assert exc.message == "no saga 'x'"
    assert exc.body == {"error": {"code": "saga_not_found", "message": "no saga 'x'"}}


def test_a_subclass_s_code_is_that_subclass_and_its_parents() -> None:
    handle, _ = answering(error(409, "saga_not_abortable"), error(403, "four_eyes"))
    with client(handle) as c:
        with pytest.raises(SagaNotAbortable) as raised:
            c.abort("x", reason="r")
        assert isinstance(raised.value, SagaConflict)
        with pytest.raises(FourEyesError):
            c.approve("x", version=1)


def test_a_rejected_plan_carries_its_errors() -> None:
    wrong = {"code": "unknown_step", "message": "no such step", "index": 0, "path": "steps[0]"}
    odd = {"code": "not_a_code_yet", "message": "a newer server's"}
    handle, _ = answering(error(422, "plan_rejected", "plan rejected", errors=[wrong, odd]))
    with client(handle) as c, pytest.raises(PlanRejected) as raised:
        c.submit({"catalogue": "c", "steps": []}, saga_id="s-1")
    [first] = raised.value.errors  # the one this version cannot read stays in the body
    assert first.code is ErrorCode.UNKNOWN_STEP
    assert first.path == "steps[0]"
    assert raised.value.body is not None
    assert len(raised.value.body["error"]["errors"]) == 2


def test_an_unknown_code_keeps_its_code_and_an_unknown_401_is_unauthorized() -> None:
    handle, _ = answering(error(418, "teapot"), error(429, "too_many_failures"))
    with client(handle) as c:
        with pytest.raises(ApiError) as raised:
            c.get("x")
        assert raised.value.code == "teapot"
        assert raised.value.status == 418
        assert type(raised.value).__mro__[1] is ApiError  # no class of Pivotal's
        with pytest.raises(RateLimited) as limited:  # Pivotal's own 429: bad credentials
            c.get("x")
        assert limited.value.code == "too_many_failures"
        assert isinstance(limited.value, ApiError)
    handle, _ = answering(error(401, "token_expired"), error(403, "forbidden"))
    with client(handle) as c:
        with pytest.raises(Unauthorized) as unauthorized:
            c.get("x")
        assert unauthorized.value.code == "token_expired"
        with pytest.raises(Forbidden):
            c.get("x")


def test_an_answer_that_is_not_pivotal_s_error_body_is_an_http_error() -> None:
    handle, _ = answering(httpx.Response(502, text="<html>Bad Gateway</html>"))
    with client(handle) as c, pytest.raises(ApiError) as raised:
        c.get("x")
    assert raised.value.code == "http_error"
    assert raised.value.status == 502
    assert raised.value.body is None
    assert "Bad Gateway" in raised.value.message


def test_a_successful_answer_of_another_shape_is_an_unexpected_reply() -> None:
    handle, _ = answering(httpx.Response(200, text="hello"), httpx.Response(200, json={"a": 1}))
    with client(handle) as c:
        with pytest.raises(UnexpectedReply, match="not JSON"):
            c.get("x")
        with pytest.raises(UnexpectedReply, match="saga_id"):
            c.events("x")


def test_a_plan_kept_in_shadow_raises_rollout_shadowed_with_its_run() -> None:
    shadow = {"shadowed": True, "code": "rollout_shadow", "run_id": "run-7", "message": "kept"}
    handle, _ = answering(httpx.Response(202, json=shadow))
    with client(handle) as c, pytest.raises(RolloutShadowed) as raised:
        c.submit({"catalogue": "c", "steps": []})
    assert raised.value.run_id == "run-7"
    assert raised.value.status == 202


def test_an_error_answer_survives_pickling() -> None:
    shadow = {"shadowed": True, "code": "rollout_shadow", "run_id": "run-7", "message": "kept"}
    handle, _ = answering(error(404, "saga_not_found", "gone"), httpx.Response(202, json=shadow))
    with client(handle) as c:
        with pytest.raises(SagaNotFound) as missing:
            c.get("x")
        with pytest.raises(RolloutShadowed) as kept:
            c.submit({"catalogue": "c", "steps": []})
    again = pickle.loads(pickle.dumps(missing.value))
    assert isinstance(again, SagaNotFound)
    assert isinstance(again, ApiError)
    assert (again.code, again.status, again.message) == ("saga_not_found", 404, "gone")
    shadowed = pickle.loads(pickle.dumps(kept.value))
    assert isinstance(shadowed, RolloutShadowed)
    assert (shadowed.run_id, shadowed.status) == ("run-7", 202)


def test_the_root_s_code_is_a_plain_api_error() -> None:
    handle, _ = answering(error(400, "pivotal_error"), error(400, "client_error"))
    with client(handle) as c:
        for _ in range(2):
            with pytest.raises(ApiError) as raised:
                c.get("x")
            assert type(raised.value).__mro__[1] is ApiError
            assert raised.value.code in ("pivotal_error", "client_error")


SERVER_ERRORS = """
import inspect
import json
import pivotal.server.app
from pivotal.errors import PivotalError

def walk(cls):
    return [c for sub in cls.__subclasses__() for c in (sub, *walk(sub))]

print(json.dumps({c.code: f"{c.__module__}.{c.__qualname__}" for c in walk(PivotalError)}))
"""
CLIENT_KNOWS = """
import json, sys
from pivotal.client import error_class

named = lambda c: c and f"{c.__module__}.{c.__qualname__}"
found = {code: named(error_class(code)) for code in json.loads(sys.argv[1])}
print(json.dumps({"found": found, "fastapi": "fastapi" in sys.modules}))
"""


def fresh(code: str, *args: str) -> Any:
    """What ``code`` prints as JSON, run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_error_the_server_loads_is_known_to_the_client_by_its_code() -> None:
    """Each ``PivotalError`` that the server's app loads (in a fresh interpreter) is known,
    by its code, to ``import pivotal.client`` alone (in another), which loads no FastAPI;
    but the outbox relay's, which no route answers with."""
    loaded = fresh(SERVER_ERRORS)
    relay = {code for code, name in loaded.items() if name.startswith("pivotal.operations.relay.")}
    assert relay <= {"relay_invalid", "delivery_failed", "delivery_rejected"}  # if loaded at all
    api = {code: name for code, name in loaded.items() if code not in relay}
    assert len(api) > 40
    told = fresh(CLIENT_KNOWS, json.dumps(sorted(api)))
    assert told["found"] == api
    assert told["fastapi"] is False
    assert error_class("saga_not_found") is SagaNotFound


def test_reads_and_submissions_are_sent_again_after_a_lost_answer_or_a_503() -> None:
    lost = httpx.ReadError("lost")
    handle, seen = answering(lost, httpx.Response(503, text="busy"), httpx.Response(200, json={}))
    with client(handle) as c, pytest.raises(UnexpectedReply):  # {} is not a saga
        c.get("x")
    assert len(seen) == 3
    submitted = OUTCOME | {"created": False}
    handle, seen = answering(lost, httpx.Response(200, json=submitted))
    with client(handle) as c:
        done = c.submit({"catalogue": "c", "steps": []})
    assert done.created is False
    ids = {r.url.params["saga_id"] for r in seen}
    assert len(seen) == 2
    assert len(ids) == 1  # made once, before the first attempt
    assert ids.pop().startswith("sg_")
    assert seen[0].content == seen[1].content


def test_a_decision_is_sent_again_only_when_nothing_was_sent() -> None:
    refused = httpx.ConnectError("refused")
    handle, seen = answering(refused, httpx.Response(200, json=OUTCOME))
    with client(handle) as c:
        assert c.approve("s-1", version=3, reason="ok").saga_id == "s-1"
    assert len(seen) == 2
    assert json.loads(seen[-1].content) == {"reason": "ok", "version": 3}
    handle, seen = answering(httpx.ReadError("lost"), httpx.Response(200, json=OUTCOME))
    with client(handle) as c, pytest.raises(OutcomeUnknown) as raised:
        c.abort("s-1", reason="stop")
    assert len(seen) == 1
    assert raised.value.saga_id == "s-1"
    assert "may have been carried out" in raised.value.message
    handle, seen = answering(httpx.Response(503, text="busy"), httpx.Response(200, json=OUTCOME))
    with client(handle) as c, pytest.raises(ApiError) as busy:
        c.reject("s-1", version=3)
    assert busy.value.status == 503
    assert len(seen) == 1


def test_attempts_are_bounded_and_say_whether_anything_was_sent() -> None:
    handle, seen = answering(httpx.ConnectError("refused"))
    with client(handle, retries=2) as c, pytest.raises(ServerUnreachable) as raised:
        c.submit({"catalogue": "c", "steps": []}, saga_id="mine")
    assert len(seen) == 3
    assert raised.value.attempts == 3
    assert raised.value.saga_id == "mine"  # send it again with this id later
    handle, seen = answering(httpx.ReadError("lost"), httpx.ConnectError("refused"))
    with client(handle, retries=2) as c, pytest.raises(OutcomeUnknown):
        c.submit({"catalogue": "c", "steps": []})  # the first may have landed
    assert len(seen) == 3


def test_the_backoff_doubles_with_jitter_up_to_its_cap() -> None:
    backoff = Backoff(retries=10, base=0.1, cap=1.0)
    for retry, longest in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (9, 1.0)]:
        waits = [backoff.delay(retry) for _ in range(200)]
        assert all(longest / 2 <= w <= longest for w in waits), retry
        assert len(set(waits)) > 1
    assert backoff.delay(1, asked=0.7) == 0.7  # Retry-After, when longer
    assert backoff.delay(1, asked=30) == 1.0
    with pytest.raises(ValueError, match="negative"):
        Backoff(retries=-1)


def test_paths_escape_the_saga_id_and_never_climb() -> None:
    handle, seen = answering(
        httpx.Response(200, json={"saga_id": "x", "events": [], "provenance": {}})
    )
    with client(handle) as c:
        c.events("..")
        c.events("a/b")
        c.events("bot.9d74932bdb6f.x")
    assert [r.url.raw_path for r in seen] == [
        b"/v1/sagas/%2E%2E/events",
        b"/v1/sagas/a%2Fb/events",
        b"/v1/sagas/bot.9d74932bdb6f.x/events",
    ]
    assert seen[0].headers["authorization"] == "Bearer pvt_x"


def test_the_search_sends_each_filter_and_follows_the_cursor() -> None:
    row = {"catalogue": "c", "status": "completed", "reason": None}
    row |= {"created_at": 1.0, "updated_at": 1.0}
    pages = [
        {"items": [row | {"saga_id": "a"}], "next_cursor": "c1"},
        {"items": [row | {"saga_id": "b"}], "next_cursor": None},
    ]
    common = {"limit": 1, "offset": 0, "next_offset": None}
    handle, seen = answering(*(httpx.Response(200, json=p | common) for p in pages))
    with client(handle) as c:
        rows = list(c.search(status=["completed", "compensated"], about="order_id=1", page_size=1))
    assert [r.saga_id for r in rows] == ["a", "b"]
    assert seen[0].url.params.multi_items() == [
        ("status", "completed"),
        ("status", "compensated"),
        ("about", "order_id=1"),
        ("limit", "1"),
    ]
    assert seen[1].url.params["cursor"] == "c1"


def test_a_client_needs_an_http_address() -> None:
    with pytest.raises(PivotalError, match="not an http"):
        Client("ftp://pivotal.test")
    with pytest.raises(PivotalError, match="not an http"):
        AsyncClient("pivotal.test:8000")


async def test_the_async_client_sends_again_as_the_client_does() -> None:
    handle, seen = answering(httpx.ConnectError("refused"), httpx.Response(200, json=OUTCOME))
    transport = httpx.MockTransport(handle)
    async with AsyncClient(URL, transport=transport, backoff=0.0) as c:
        assert (await c.abort("s-1", reason="stop")).saga_id == "s-1"
        transport.handler = answering(error(404, "saga_not_found"))[0]
        with pytest.raises(SagaNotFound):
            await c.get("nope")
    assert len(seen) == 2


# -- 502, 503, 504 and 429: one rule of what is sent again ----------------------------------

GATEWAY = [httpx.Response(502, text="<html>Bad Gateway</html>"), httpx.Response(504, text="late")]
SAGA = {"saga_id": "s-1", "status": "submitted", "version": 1, "reason": None, "approval": None}
SAGA |= {"catalogue": "c", "plan_digest": "d", "created_at": 1.0, "updated_at": 1.0}
SAGA |= {"provenance": {}, "provenance_ref": "p", "rationale": "", "plan": {}, "steps": []}
SAGA |= {"progress": {}, "no_worker": None, "events": []}


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_proxy_s_502_or_504_is_sent_again_as_a_503_is(status: int) -> None:
    handle, seen = answering(
        httpx.Response(status, text="upstream"), httpx.Response(200, json=SAGA)
    )
    with client(handle) as c:
        assert c.get("s-1").saga_id == "s-1"
    assert len(seen) == 2
    submitted = OUTCOME | {"created": True}
    handle, seen = answering(*GATEWAY, httpx.Response(200, json=submitted))
    with client(handle) as c:
        assert c.submit({"catalogue": "c", "steps": []}).created is True
    assert len(seen) == 3
    assert len({r.url.params["saga_id"] for r in seen}) == 1  # the same saga, each time


# calls sent again only when nothing was sent
SENT_ONCE: dict[str, Callable[[Client], Any]] = {
    "approve": lambda c: c.approve("s-1", version=1),
    "abort": lambda c: c.abort("s-1", reason="stop"),
    "resume": lambda c: c.resume("s-1", reason="fixed"),
    "resolve": lambda c: c.resolve("s-1", reason="settled by hand"),
    "retry_dead_letter": lambda c: c.retry_dead_letter(7),
    "resolve_escalation": lambda c: c.resolve_escalation(3, reason="planned by hand"),
}


@pytest.mark.parametrize("status", [502, 504])
def test_a_decision_answered_502_or_504_is_not_sent_again(status: int) -> None:
    """A proxy may have passed it on before its upstream failed: it was sent."""
    for act, sent in SENT_ONCE.items():
        handle, seen = answering(httpx.Response(status, text="gateway"), httpx.Response(200))
        with client(handle) as c, pytest.raises(ApiError) as raised:
            sent(c)
        assert raised.value.status == status, act
        assert raised.value.code == "http_error"
        assert len(seen) == 1, act


def test_the_502s_are_bounded_by_the_retries() -> None:
    handle, seen = answering(httpx.Response(502, text="down"))
    with client(handle, retries=2) as c, pytest.raises(ApiError) as raised:
        c.events("s-1")
    assert raised.value.status == 502
    assert len(seen) == 3


def limited(after: str | None = None, code: str = "too_many_requests") -> httpx.Response:
    headers = {"Retry-After": after} if after is not None else {}
    body = {"error": {"code": code, "message": "slow down"}}
    return httpx.Response(429, json=body, headers=headers)


def test_a_429_is_rate_limited_with_the_wait_it_asked() -> None:
    handle, seen = answering(limited("30"))
    with client(handle) as c, pytest.raises(RateLimited) as raised:
        c.get("s-1")  # 30 s is past max_backoff (5 s): raised at once, not waited
    assert len(seen) == 1
    exc = raised.value
    assert exc.retry_after == 30.0
    assert (exc.status, exc.code, exc.message) == (429, "too_many_requests", "slow down")
    assert isinstance(exc, ApiError)
    assert isinstance(exc, ClientError)
    again = pickle.loads(pickle.dumps(exc))
    assert isinstance(again, RateLimited)
    assert (again.retry_after, again.code, again.status) == (30.0, "too_many_requests", 429)
    handle, _ = answering(httpx.Response(429, text="<html>Too Many Requests</html>"))
    with client(handle) as c, pytest.raises(RateLimited) as page:  # a proxy's page
        c.get("s-1")
    assert (page.value.code, page.value.retry_after, page.value.body) == ("http_error", None, None)


def test_a_429_is_waited_out_for_a_call_sent_again_and_raised_for_a_decision() -> None:
    handle, seen = answering(limited("0"), limited(), httpx.Response(200, json=SAGA))
    with client(handle) as c:
        assert c.get("s-1").saga_id == "s-1"
    assert len(seen) == 3
    handle, seen = answering(limited("0"))
    with client(handle, retries=2) as c, pytest.raises(RateLimited) as raised:
        c.validate({"catalogue": "c", "steps": []})
    assert len(seen) == 3  # the retries bound it
    assert raised.value.retry_after == 0.0
    for act, sent in SENT_ONCE.items():
        handle, seen = answering(limited("0"), httpx.Response(200, json=OUTCOME))
        with client(handle) as c, pytest.raises(RateLimited):
            sent(c)
        assert len(seen) == 1, act


def test_the_wait_before_a_429_s_next_attempt_is_what_it_asked_within_the_cap() -> None:
    call = calls.saga("s-1")
    request = httpx.Request("GET", "http://pivotal.test/v1/sagas/s-1")

    def answered(response: httpx.Response, backoff: Backoff) -> float | None:
        response.request = request
        return Attempts(call, backoff).answered(response)

    patient = Backoff(retries=3, base=0.0, cap=10.0)
    assert answered(limited("7"), patient) == 7.0
    assert answered(limited("11"), patient) is None  # past the cap: raised, not waited
    assert answered(limited(), patient) == 0.0  # none asked: the backoff's own
    assert answered(httpx.Response(503, headers={"Retry-After": "30"}), patient) == 10.0
    soon = (datetime.now(UTC) + timedelta(seconds=120)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert answered(limited(soon), patient) is None  # an HTTP-date two minutes ahead
    decided = calls.decision("s-1", "approve", 1, "")
    assert Attempts(decided, patient).answered(limited("1")) is None


def test_retry_after_reads_seconds_and_http_dates() -> None:
    def asked(value: str) -> float | None:
        return calls.retry_after(httpx.Response(429, headers={"Retry-After": value}))

    assert asked("120") == 120.0
    assert asked(" 3 ") == 3.0
    assert asked("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # passed
    ahead = asked((datetime.now(UTC) + timedelta(hours=1)).strftime("%a, %d %b %Y %H:%M:%S GMT"))
    assert ahead is not None
    assert 3000 < ahead <= 3600
    for nonsense in ("soon", "-1", "1.5", "", "Wed, 21 Oct 2015 07:28:00"):
        assert asked(nonsense) is None, nonsense


# -- the operators' calls: paths, bodies, bad input ---------------------------------------

DEAD = {"id": 7, "saga_id": "s-1", "step": 0, "step_name": "reserve", "undo_key": "k"}
DEAD |= {"error": None, "attempts": 1, "status": "open", "created_at": 1.0, "retries": 0}
DEAD |= {"next_retry_at": None, "resolved_at": None, "resolution": None}


def test_the_operators_calls_send_what_their_routes_take() -> None:
    pages = [
        {"items": [DEAD], "limit": 1, "offset": 0, "next_offset": 1},
        {"items": [DEAD | {"id": 8}], "limit": 1, "offset": 1, "next_offset": None},
    ]
    retried = {"dead_letter_id": 7, "status": "open", "next_retry_at": 1.0, "noted": True}
    handle, seen = answering(
        *(httpx.Response(200, json=p) for p in pages),
        httpx.Response(202, json=retried),
        httpx.Response(200, json={"dead_letter_id": 7, "status": "resolved", "by": "olga"}),
        httpx.Response(200, json=OUTCOME),
        httpx.Response(200, json=OUTCOME),
        httpx.Response(200, json=OUTCOME),
        httpx.Response(201, json=OUTCOME | {"forked_from": "s-1"}),
    )
    with client(handle) as c:
        letters = c.dead_letters(status="all", page_size=1)
        assert [d.id for d in letters] == [7, 8]
        assert c.retry_dead_letter(7).noted is True
        assert c.resolve_dead_letter(7, reason="refunded by hand").by == "olga"
        c.resume("s/1", reason="fixed", from_step="charge")
        c.resume("s-1", reason="fixed")
        c.resolve("s-1", reason="settled")
        c.fork("s-1", changes={"0.quantity": 1}, reason="fewer")
    assert [(r.method, r.url.raw_path) for r in seen] == [
        ("GET", b"/v1/dead-letters?offset=0&limit=1&status=all"),
        ("GET", b"/v1/dead-letters?offset=1&limit=1&status=all"),
        ("POST", b"/v1/dead-letters/7/retry"),
        ("POST", b"/v1/dead-letters/7/resolve"),
        ("POST", b"/v1/sagas/s%2F1/resume"),
        ("POST", b"/v1/sagas/s-1/resume"),
        ("POST", b"/v1/sagas/s-1/resolve"),
        ("POST", b"/v1/sagas/s-1/fork"),
    ]
    bodies = [json.loads(r.content) if r.content else None for r in seen]
    assert bodies[2:] == [
        None,
        {"reason": "refunded by hand"},
        {"reason": "fixed", "from": "charge"},
        {"reason": "fixed"},
        {"reason": "settled"},
        {"set": {"0.quantity": 1}, "reason": "fewer"},
    ]


def test_bad_input_is_refused_before_anything_is_sent() -> None:
    handle, seen = answering(httpx.Response(200, json={}))
    with client(handle) as c:
        for bad in (0, -3, True, "7", 7.0):
            with pytest.raises(InvalidInput, match="whole number from 1"):
                c.retry_dead_letter(bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidInput, match="whole number from 1"):
                c.resolve_escalation(bad, reason="r")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="open, resolved or all"):
            c.dead_letters(status="closed")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="at least one change"):
            c.fork("s-1", changes={}, reason="nothing")
        with pytest.raises(InvalidInput, match="saga id is needed"):
            c.resume("", reason="r")
    assert seen == []


def test_a_list_whose_next_offset_goes_back_is_an_unexpected_reply() -> None:
    page = {"items": [], "limit": 1, "offset": 3, "next_offset": 0}
    handle, seen = answering(httpx.Response(200, json=page))
    with client(handle) as c, pytest.raises(UnexpectedReply, match="earlier page"):
        c.escalations()
    assert len(seen) == 1


def test_both_clients_offer_the_same_calls_with_the_same_parameters() -> None:
    def calls_of(kind: type[Any]) -> dict[str, inspect.Signature]:
        return {
            name: inspect.signature(member)
            for name, member in vars(kind).items()
            if callable(member) and not name.startswith("_") and name not in ("close", "aclose")
        }

    sync, asynchronous = calls_of(Client), calls_of(AsyncClient)
    assert sync.keys() == asynchronous.keys()
    for name, signature in sync.items():
        assert list(signature.parameters) == list(asynchronous[name].parameters), name
        assert signature.return_annotation.replace("Iterator", "AsyncIterator") == (
            asynchronous[name].return_annotation
        ), name
    assert {"resume", "resolve", "dead_letters", "retry_dead_letter", "fork"} <= sync.keys()
