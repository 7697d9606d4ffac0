"""The calls of the HTTP API as data, shared by ``Client`` and ``AsyncClient``: each route
with its method, query and body, and after which failures it may be sent again; how long to
wait before the next attempt; and what each answer is read as.

Sent again (``Resend.ALWAYS``) after a transport error or a 503: the reads, the validation
of a plan (it records nothing), a submission (idempotent by its saga id, which the client
fixes before the first attempt) and a rerun (one rerun per saga: asking again answers the
same one). A decision (approve, reject) and an abort are not: a second one after the first
landed would be refused (409: the saga moved on) though the first was carried out. They are
sent again only when no connection was made, so nothing was sent (``Resend.UNSENT``)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, TypedDict, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from pivotal.agent_view import SagaView as AgentSagaView
from pivotal.client._errors import (
    ClientError,
    OutcomeUnknown,
    ServerUnreachable,
    UnexpectedReply,
    api_error,
    shadowed,
)
from pivotal.errors import InvalidInput
from pivotal.plan import Plan
from pivotal.server import views

PlanLike = Plan | Mapping[str, Any] | str | bytes
M = TypeVar("M", bound=BaseModel)

# what failed before the request was written: nothing reached the server
NOT_SENT: tuple[type[httpx.TransportError], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)
RETRIED_STATUS = 503  # the server is overloaded (uvicorn's limit) or its ledger is unreachable


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
    ALWAYS = "always"  # after a transport error or a 503
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
        self.sent = True  # it reached the server (a 503 may come after a write, or not)
        if (
            response.status_code != RETRIED_STATUS
            or self.call.resend is not Resend.ALWAYS
            or self.made > self.backoff.retries
        ):
            return None
        return self.backoff.delay(self.made, _retry_after(response))

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


def _retry_after(response: httpx.Response) -> float | None:
    given = response.headers.get("retry-after", "")
    return float(given) if given.isdigit() else None


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
    params = [("offset", str(offset))] + ([("limit", str(limit))] if limit is not None else [])
    return Call("GET", "/v1/approvals", Resend.ALWAYS, tuple(params))


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


# -- the answers -------------------------------------------------------------------------------


def reply(response: httpx.Response) -> Any:
    """The JSON of a successful answer; an error answer raised as its error."""
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
        raise api_error(response.status_code, body, response.text)
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
