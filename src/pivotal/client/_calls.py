"""The calls of the HTTP API as data, shared by ``Client`` and ``AsyncClient``: each route
with its method, query and body, and after which failures it may be sent again; how long to
wait before the next attempt; and what each answer is read as.

Sent again (``Resend.ALWAYS``) after a transport error or an answer of ``RETRIED_STATUS``
(503 from the server or a proxy, 502 and 504 from a proxy whose upstream failed or was
late: the call may or may not have reached the server): the reads, the validation of a
plan (it records nothing), a submission (idempotent by its saga id, which the client fixes
before the first attempt), a rerun (one rerun per saga: asking again answers the same one)
and a fork (the same request answers the same fork). A decision (approve, reject), an
abort, a resume or resolve of a parked saga, and a retry or resolve of a dead letter or an
escalation are not: a second one after the first landed would be refused (409 or 404: the
saga or the letter moved on) though the first was carried out. They are sent again only
when no connection was made, so nothing was sent (``Resend.UNSENT``).

A 429 (``RateLimited``: too many calls, or from Pivotal itself too many failed credentials
from this client) is waited out and sent again like a 503, for the calls sent again after
one, when its ``Retry-After`` asks no longer than the longest wait between attempts
(``Backoff.cap``, the client's ``max_backoff``): a longer one, or any 429 of a call that is
not sent again, is raised at once, its ``retry_after`` saying how long it asked."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import Any, Literal, TypedDict, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from pivotal.client._errors import (
    ClientError,
    OutcomeUnknown,
    ServerUnreachable,
    UnexpectedReply,
    api_error,
    shadowed,
)
from pivotal.declarations.plan import Plan
from pivotal.errors import InvalidInput
from pivotal.server import views
from pivotal.views.agent_view import SagaView as AgentSagaView

PlanLike = Plan | Mapping[str, Any] | str | bytes
M = TypeVar("M", bound=BaseModel)

# what failed before the request was written: nothing reached the server
NOT_SENT: tuple[type[httpx.TransportError], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)
# 503: the server is overloaded (uvicorn's limit) or its ledger is unreachable, or a proxy
# has no server to send to; 502, 504: a proxy's upstream failed, or did not answer in time
RETRIED_STATUS = frozenset({502, 503, 504})
RATE_LIMITED = 429  # waited out as they are, when Retry-After asks no more than Backoff.cap


class SagaFilters(TypedDict, total=False):
    """The filters of ``GET /v1/sagas`` (``pivotal sagas list`` has the same): each given
    narrows the search; a list (``status``, ``about``) allows any of its values."""

    status: str | Sequence[str]
    catalogue: str
    created_since: str  # 7d, 24h, 30m back from now, or an ISO date(-time)
    created_until: str
    updated_since: str
    updated_until: str
    actor_type: str
    actor_id: str
    model: str
    run_id: str
    prompt_version: str
    on_behalf_of: str
    source_document_id: str
    failed_step: str
    reason: str  # text in the reason, any case
    about: str | Sequence[str]  # NAME=VALUE: the plan names it (order_id=4471)
    sort: Literal["created", "updated"]
    order: Literal["desc", "asc"]
    saved: str  # the caller's saved search of this name, with no other filter


class Resend(Enum):
    ALWAYS = "always"  # after a transport error, a RETRIED_STATUS or a 429 (RATE_LIMITED)
    UNSENT = "unsent"  # only when nothing was sent


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    resend: Resend
    params: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    saga_id: str | None = None  # the saga the call is about, named in its errors

    @property
    def what(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Backoff:
    """``retries`` attempts after the first at most; before the n-th, a wait between half
    and all of ``base * 2 ** (n - 1)`` seconds, at most ``cap`` (random: many clients failed
    by one outage do not come back at once), or what the server's ``Retry-After`` asks when
    that is longer (at most ``cap``)."""

    retries: int = 3
    base: float = 0.25
    cap: float = 5.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.base < 0 or self.cap < 0:
            raise ValueError("retries and backoff times cannot be negative")

    def delay(self, retry: int, asked: float | None = None) -> float:
        longest = min(self.cap, self.base * 2 ** (retry - 1))
        wait = random.uniform(longest / 2, longest)
        return min(self.cap, max(wait, asked or 0.0))


class Attempts:
    """The attempts of one call: after each failure, how long to wait before the next, or
    the error to raise when there is no next."""

    def __init__(self, call: Call, backoff: Backoff) -> None:
        self.call = call
        self.backoff = backoff
        self.made = 0
        self.sent = False  # some attempt reached the server, or may have

    def failed(self, failure: httpx.TransportError) -> float:
        self.made += 1
        self.sent = self.sent or not isinstance(failure, NOT_SENT)
        resend = self.call.resend is Resend.ALWAYS or isinstance(failure, NOT_SENT)
        if not resend or self.made > self.backoff.retries:
            raise self._gave_up(failure) from failure
        return self.backoff.delay(self.made)

    def answered(self, response: httpx.Response) -> float | None:
        """None: ``response`` is the call's answer; else the wait before the next attempt."""
        self.made += 1
        self.sent = True  # it reached the server, or a proxy that may have passed it on
        status = response.status_code
        if (
            (status not in RETRIED_STATUS and status != RATE_LIMITED)
            or self.call.resend is not Resend.ALWAYS
            or self.made > self.backoff.retries
        ):
            return None
        asked = retry_after(response)
        if status == RATE_LIMITED and asked is not None and asked > self.backoff.cap:
            return None  # longer than this client waits between attempts: RateLimited now
        return self.backoff.delay(self.made, asked)

    def _gave_up(self, failure: httpx.TransportError) -> ClientError:
        tried = f"{self.call.what}: {type(failure).__name__}: {failure}"
        tried += f" ({self.made} attempt{'s' if self.made > 1 else ''})"
        if self.sent:
            return OutcomeUnknown(
                f"{tried}; no answer came, it may have been carried out",
                attempts=self.made,
                saga_id=self.call.saga_id,
            )
        return ServerUnreachable(
            f"{tried}; nothing was sent", attempts=self.made, saga_id=self.call.saga_id
        )


def retry_after(response: httpx.Response) -> float | None:
    """The seconds ``response``'s ``Retry-After`` asks to wait (delay-seconds, or an
    HTTP-date: the time until it, 0 once it has passed); None without one or for one that
    is neither."""
    given = response.headers.get("retry-after", "").strip()
    if given.isdigit():
        return float(given)
    try:
        until = parsedate_to_datetime(given)
    except (TypeError, ValueError, IndexError):
        return None
    if until.tzinfo is None:  # not an HTTP-date (they are GMT), though parsed
        return None
    return max(0.0, until.timestamp() - time.time())


# -- the calls --------------------------------------------------------------------------------


def _segment(saga_id: str) -> str:
    """``saga_id`` as one segment of a path: escaped, and never read as ``.`` or ``..``."""
    if not saga_id:
        raise InvalidInput("a saga id is needed")
    quoted = quote(saga_id, safe="")
    return quoted.replace(".", "%2E") if set(saga_id) == {"."} else quoted


def plan_body(plan: PlanLike) -> bytes:
    """The plan as the request body: a ``Plan`` or a mapping as JSON, text as it is."""
    if isinstance(plan, Plan):
        return plan.to_json().encode()
    if isinstance(plan, str):
        return plan.encode()
    if isinstance(plan, bytes):
        return plan
    return json.dumps(dict(plan)).encode()


def validate(plan: PlanLike) -> Call:
    return Call("POST", "/v1/plans/validate", Resend.ALWAYS, body=plan_body(plan))


def submit(plan: PlanLike, saga_id: str) -> Call:
    params = (("saga_id", saga_id),)
    body = plan_body(plan)
    return Call("POST", "/v1/sagas", Resend.ALWAYS, params, body, saga_id)


def saga(saga_id: str) -> Call:
    return Call("GET", f"/v1/sagas/{_segment(saga_id)}", Resend.ALWAYS, saga_id=saga_id)


def events(saga_id: str) -> Call:
    return Call("GET", f"/v1/sagas/{_segment(saga_id)}/events", Resend.ALWAYS, saga_id=saga_id)


def search(filters: Mapping[str, Any], cursor: str | None, limit: int | None) -> Call:
    params: list[tuple[str, str]] = []
    for name, given in filters.items():
        if given is None:
            continue
        values = [given] if isinstance(given, str) else list(given)
        params.extend((name, str(value)) for value in values)
    if cursor is not None:
        params.append(("cursor", cursor))
    if limit is not None:
        params.append(("limit", str(limit)))
    return Call("GET", "/v1/sagas", Resend.ALWAYS, tuple(params))


def approvals(limit: int | None, offset: int) -> Call:
    # the route pages by offset only: a pivot decided between two pages moves the later
    # ones up by one (one pending is then missed until the next listing)
    return _paged("/v1/approvals", None, limit, offset)


def decision(saga_id: str, verdict: str, version: int, reason: str) -> Call:
    body = json.dumps({"reason": reason, "version": version}).encode()
    path = f"/v1/approvals/{_segment(saga_id)}/{verdict}"
    return Call("POST", path, Resend.UNSENT, body=body, saga_id=saga_id)


def abort(saga_id: str, reason: str) -> Call:
    body = json.dumps({"reason": reason}).encode()
    path = f"/v1/sagas/{_segment(saga_id)}/abort"
    return Call("POST", path, Resend.UNSENT, body=body, saga_id=saga_id)


def rerun(saga_id: str) -> Call:
    # one rerun per saga: asking again answers the one made (Orchestrator.rerun), so sending
    # it again after a lost answer makes no second saga
    path = f"/v1/sagas/{_segment(saga_id)}/rerun"
    return Call("POST", path, Resend.ALWAYS, saga_id=saga_id)


def fork(saga_id: str, changes: Mapping[str, Any], reason: str) -> Call:
    # the same request (saga, changes, person) answers the same fork (Orchestrator.fork), so
    # sending it again after a lost answer makes no second saga
    if not changes:
        raise InvalidInput('a fork needs at least one change: {"STEP.ARGUMENT": value}')
    body = json.dumps({"set": dict(changes), "reason": reason}).encode()
    path = f"/v1/sagas/{_segment(saga_id)}/fork"
    return Call("POST", path, Resend.ALWAYS, body=body, saga_id=saga_id)


def resume(saga_id: str, reason: str, from_step: int | str | None) -> Call:
    asked: dict[str, Any] = {"reason": reason}
    if from_step is not None:
        asked["from"] = from_step
    path = f"/v1/sagas/{_segment(saga_id)}/resume"
    return Call("POST", path, Resend.UNSENT, body=json.dumps(asked).encode(), saga_id=saga_id)


def resolve(saga_id: str, reason: str) -> Call:
    body = json.dumps({"reason": reason}).encode()
    path = f"/v1/sagas/{_segment(saga_id)}/resolve"
    return Call("POST", path, Resend.UNSENT, body=body, saga_id=saga_id)


Listed = Literal["open", "resolved", "all"]
LISTED: tuple[Listed, ...] = ("open", "resolved", "all")


def _listed(status: str, what: str) -> str:
    if status not in LISTED:
        raise InvalidInput(f"{what} are listed by status open, resolved or all, not {status!r}")
    return status


def _number(given: int, what: str) -> int:
    """``given`` as the id of a ``what`` in a path: a whole number from 1."""
    if isinstance(given, bool) or not isinstance(given, int) or given < 1:
        raise InvalidInput(f"a {what} id is a whole number from 1, not {given!r}")
    return given


def _paged(path: str, status: str | None, limit: int | None, offset: int) -> Call:
    params = [("offset", str(offset))] + ([("limit", str(limit))] if limit is not None else [])
    if status is not None:
        params.append(("status", status))
    return Call("GET", path, Resend.ALWAYS, tuple(params))


def dead_letters(status: str, limit: int | None, offset: int) -> Call:
    return _paged("/v1/dead-letters", _listed(status, "dead letters"), limit, offset)


def retry_dead_letter(dead_letter_id: int) -> Call:
    # due now once, or again: but a second after the first landed is 404 once a worker's sweep
    # settled it, though the first was carried out
    path = f"/v1/dead-letters/{_number(dead_letter_id, 'dead letter')}/retry"
    return Call("POST", path, Resend.UNSENT)


def resolve_dead_letter(dead_letter_id: int, reason: str) -> Call:
    path = f"/v1/dead-letters/{_number(dead_letter_id, 'dead letter')}/resolve"
    return Call("POST", path, Resend.UNSENT, body=json.dumps({"reason": reason}).encode())


def escalations(status: str, limit: int | None, offset: int) -> Call:
    return _paged("/v1/escalations", _listed(status, "escalations"), limit, offset)


def resolve_escalation(escalation_id: int, reason: str, saga_id: str | None) -> Call:
    asked: dict[str, Any] = {"reason": reason}
    if saga_id is not None:
        asked["saga_id"] = saga_id
    path = f"/v1/escalations/{_number(escalation_id, 'escalation')}/resolve"
    return Call("POST", path, Resend.UNSENT, body=json.dumps(asked).encode())


# -- the answers -------------------------------------------------------------------------------


def reply(response: httpx.Response) -> Any:
    """The JSON of a successful answer; an error answer raised as its error (a 429 with the
    seconds its ``Retry-After`` asked: ``RateLimited.retry_after``)."""
    try:
        body = response.json()
    except ValueError:
        body = None
        if response.is_success:
            raise UnexpectedReply(
                f"the answer to {response.request.method} {response.request.url.path} is "
                f"not JSON (HTTP {response.status_code})"
            ) from None
    if not response.is_success:
        raise api_error(response.status_code, body, response.text, retry_after(response))
    if response.status_code == 202 and isinstance(body, dict) and body.get("shadowed"):
        raise shadowed(response.status_code, body)  # no saga: the plan was kept in shadow
    return body


def read(model: type[M], response: httpx.Response) -> M:
    """The answer as ``model``, the server's own answer shape."""
    return _parsed(model.model_validate, response)


SAGA: TypeAdapter[views.SagaView | AgentSagaView] = TypeAdapter(views.SagaView | AgentSagaView)


def saga_view(response: httpx.Response) -> views.SagaView | AgentSagaView:
    """A person's view of a saga, or an agent's (``agent_view``: what an agent is shown)."""
    return _parsed(SAGA.validate_python, response)


T = TypeVar("T")


def _parsed(validate: Callable[[Any], T], response: httpx.Response) -> T:
    body = reply(response)
    try:
        return validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise UnexpectedReply(
            f"the answer to {response.request.method} {response.request.url.path} is not "
            f"what it should be ({exc.error_count()} problem(s); {where}: {first['msg']})"
        ) from None


# -- what both clients are made with -----------------------------------------------------------


def base_url_of(given: str) -> str:
    """The server's address: http(s)://host[:port][/prefix], without a trailing slash."""
    url = httpx.URL(given)
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInput(f"{given!r} is not an http(s) address of a Pivotal server")
    return str(url).rstrip("/")


def headers_of(token: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers
