"""What the client raises: an error answer of the API as Pivotal's own error class, found by
the answer's ``code``; and its own errors, when no answer came or an answer made no sense.

Every error answer is raised as an ``ApiError`` that is also the ``PivotalError`` subclass
with the answer's code (``except SagaNotFound`` works as it does in process), carrying the
HTTP status and the body. The classes are not listed here: they are found among
``PivotalError``'s subclasses by their ``code`` (each code is one class's own), once the
modules that define the errors the API answers with are imported (below). A code no class
has keeps the code on a plain ``ApiError`` (by its status: 401 ``Unauthorized``, 403
``Forbidden``, 404 ``NotFound``, 429 ``RateLimited`` besides)."""

from __future__ import annotations

import functools
from typing import Any, cast

# Imported for their error classes: the API answers with these codes, among those of
# ``pivotal.errors`` (``pivotal.server.errors`` gives each its status).
import pivotal.engine.by_hand
import pivotal.engine.resuming
import pivotal.operations.bulk
import pivotal.orchestration.fork
import pivotal.orchestration.rerun
import pivotal.store.planning_records
import pivotal.store.saved
import pivotal.store.search
import pivotal.views.report
import pivotal.views.saga_actions  # noqa: F401
from pivotal.declarations.plan_errors import ErrorCode, PlanError
from pivotal.errors import PivotalError, PlanRejected, RolloutRefused, RolloutShadowed
from pivotal.server.api_errors import Forbidden, NotFound, Unauthorized

HTTP_ERROR = "http_error"  # the code of an error answer that is not Pivotal's JSON body


class ClientError(PivotalError):
    """The client could not carry out the call."""

    code = "client_error"


class ApiError(ClientError):
    """The server answered with an error: ``status``, and ``body``, its JSON (``{"error":
    {"code", "message", ...}}``; None when the answer was not JSON). Each one raised is also
    the ``PivotalError`` subclass of its code (``code``, as the server gave it)."""

    code = "api_error"

    def __init__(self, message: str, *, status: int, body: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body

    def __reduce__(self) -> tuple[Any, ...]:  # its class is made here: rebuilt by code
        return (_rebuilt, (self.code, self.message, self.status, self.body))


class RateLimited(ApiError):
    """The server, or a proxy in front of it, refused the call for now (429): not carried
    out. ``retry_after``: the seconds its ``Retry-After`` asked to wait, None when it asked
    none. Pivotal answers 429 itself only to a credential that failed too often from one
    client (code ``too_many_failures``): a valid token is never refused so. ``code`` is the
    answer's, as for any ``ApiError`` (``http_error`` for a proxy's page)."""

    code = "rate_limited"
    retry_after: float | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (self.code, self.message, self.status, self.body, self.retry_after))


class ServerUnreachable(ClientError):
    """No connection to the server could be made, on any attempt: nothing was sent."""

    code = "server_unreachable"

    def __init__(self, message: str, *, attempts: int, saga_id: str | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.saga_id = saga_id  # the saga the call was about (a submission's own id)


class OutcomeUnknown(ClientError):
    """The request was sent and no answer came back: it may have been carried out. Read the
    saga to know (a submission may be sent again with the same ``saga_id``: it is recorded
    once)."""

    code = "outcome_unknown"

    def __init__(self, message: str, *, attempts: int, saga_id: str | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.saga_id = saga_id


class UnexpectedReply(ClientError):
    """The server's answer is not what this call answers (not JSON, or another shape)."""

    code = "unexpected_reply"


# the class of an error answer whose code no class has (or that is not Pivotal's body)
BY_STATUS: dict[int, type[PivotalError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    429: RateLimited,
}


def _classes(root: type[PivotalError]) -> list[type[PivotalError]]:
    found: list[type[PivotalError]] = []
    for sub in root.__subclasses__():
        if not issubclass(sub, ClientError):
            found.append(sub)
        found.extend(_classes(sub))
    return found


@functools.cache
def _by_code(generation: int) -> dict[str, type[PivotalError]]:
    """Each code with the class that names it itself (not one inheriting it), Pivotal's
    classes before any other's; ``generation``: how many classes there are (a module loaded
    later adds classes, and a new map is made)."""
    known: dict[str, type[PivotalError]] = {}
    ours = sorted(_classes(PivotalError), key=lambda c: not c.__module__.startswith("pivotal."))
    candidates: list[type[PivotalError]] = [PivotalError, *ours]
    for cls in candidates:
        if "code" in vars(cls):
            known.setdefault(cls.code, cls)
    return known


def error_class(code: str) -> type[PivotalError] | None:
    """The ``PivotalError`` subclass whose code is ``code``, if one is loaded."""
    return _by_code(len(_classes(PivotalError))).get(code)


_REMOTE: dict[tuple[type[PivotalError] | None, str], type[ApiError]] = {}
MAX_REMOTE = 512  # classes kept for reuse (a server could make up codes without end)


def _remote(base: type[PivotalError] | None, code: str) -> type[ApiError]:
    """``base`` as an error answer: a subclass of it and of ``ApiError``, with ``code``."""
    found = _REMOTE.get((base, code))
    if found is None:
        found = _made(base, code)
        if len(_REMOTE) < MAX_REMOTE:
            _REMOTE[base, code] = found
    return found


def _made(base: type[PivotalError] | None, code: str) -> type[ApiError]:
    if base is not None and issubclass(ApiError, base):  # PivotalError itself: ApiError is one
        base = None
    name = base.__name__ if base is not None else ApiError.__name__
    bases = (ApiError,) if base is None else (base, ApiError)
    namespace = {
        "code": code,
        "__init__": ApiError.__init__,  # not ``base``'s: the answer has what it needs
        "__module__": "pivotal.client",
        "__qualname__": name,
        "__doc__": (base or ApiError).__doc__,
    }
    return cast(type[ApiError], type(name, bases, namespace))


def api_error(status: int, body: Any, text: str = "", retry_after: float | None = None) -> ApiError:
    """The error an answer of ``status`` with JSON ``body`` (``text``: the answer as text,
    for an answer that is not Pivotal's error body; ``retry_after``: the seconds its
    ``Retry-After`` asked, kept on a ``RateLimited``) is raised as."""
    detail = body.get("error") if isinstance(body, dict) else None
    if isinstance(detail, dict) and isinstance(detail.get("code"), str):
        code = str(detail["code"])
        message = str(detail.get("message") or code)
    else:
        code = HTTP_ERROR
        shown = " ".join(text.split())[:300]
        message = f"HTTP {status}" + (f": {shown}" if shown else "")
    return _rebuilt(code, message, status, body if isinstance(body, dict) else None, retry_after)


def _rebuilt(
    code: str,
    message: str,
    status: int,
    body: dict[str, Any] | None,
    retry_after: float | None = None,
) -> ApiError:
    base = error_class(code) if code != HTTP_ERROR else None
    if base is None:
        base = BY_STATUS.get(status)
    exc = _remote(base, code)(message, status=status, body=body)
    _carry(exc, body or {})
    if isinstance(exc, RateLimited):
        exc.retry_after = retry_after
    return exc


def shadowed(status: int, body: dict[str, Any]) -> ApiError:
    """The answer that a rollout kept a plan in shadow (``{"shadowed": true, "code",
    "run_id", "message"}``, 202): no saga was made, as ``RolloutShadowed`` says in process."""
    code = str(body.get("code") or RolloutShadowed.code)
    message = str(body.get("message") or "the plan was kept in shadow")
    exc = _remote(error_class(code) or RolloutShadowed, code)(message, status=status, body=body)
    _carry(exc, body)
    return exc


def _carry(exc: ApiError, body: dict[str, Any]) -> None:
    """What the class has in process beside its message, from the answer's body (its
    ``error``; a shadowed plan's answer has it at the top)."""
    inner = body.get("error")
    detail: dict[str, Any] = inner if isinstance(inner, dict) else body
    if isinstance(exc, PlanRejected):
        exc.errors = tuple(e for e in map(_plan_error, detail.get("errors") or []) if e)
    if isinstance(exc, RolloutRefused | RolloutShadowed):
        exc.detail = str(detail.get("detail") or "")
    if isinstance(exc, RolloutShadowed):
        exc.run_id = str(detail.get("run_id") or "")


def _plan_error(given: Any) -> PlanError | None:
    """One of a rejected plan's errors (``PlanError.to_dict``), None when it is not one this
    version knows (the body keeps it all the same)."""
    if not isinstance(given, dict):
        return None
    try:
        return PlanError(
            ErrorCode(str(given.get("code"))),
            str(given.get("message", "")),
            index=given["index"] if isinstance(given.get("index"), int) else None,
            path=given["path"] if isinstance(given.get("path"), str) else None,
            step=given["step"] if isinstance(given.get("step"), str) else None,
        )
    except ValueError:
        return None
