"""Structured logs: every line about a saga says which saga, step, key and attempt.

The fields live in a context variable. ``LogFields`` (an engine observer) sets them around
each pass and each call; ``saga_fields`` sets them for code outside the engine (a worker or
sweeper line about one saga); ``SagaFieldsFilter`` copies them onto each record, and the two
formatters write them: ``JsonLines`` as keys, ``TextLines`` as `` saga=… step=… key=…``.
``configure_logging`` installs all of it on the root logger for as long as a command runs,
and ``RequestLog`` is an ASGI middleware writing one line per HTTP request.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import IO, Any

from pythonjsonlogger.json import JsonFormatter

from pivotal.engine.telemetry import Call, Telemetry
from pivotal.moments import age
from pivotal.redaction import redact
from pivotal.sagas import saga_ids
from pivotal.sagas.state import Event, SagaState
from pivotal.terminal import printable

__all__ = [
    "FIELDS",
    "JsonLines",
    "LogFields",
    "LogFormat",
    "RequestLog",
    "SagaFields",
    "SagaFieldsFilter",
    "TextLines",
    "configure_logging",
    "current_fields",
    "formatter",
    "saga_fields",
    "saga_in_path",
]

FIELDS = ("saga_id", "step", "key", "attempt")  # record attributes, in this order
_TEXT_NAMES = {"saga_id": "saga", "step": "step", "key": "key", "attempt": "attempt"}


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


@dataclass(frozen=True, slots=True)
class SagaFields:
    """What a log line is about; None where it is about no particular one."""

    saga_id: str | None = None
    step: str | None = None
    key: str | None = None
    attempt: int | None = None

    def items(self) -> Iterator[tuple[str, str | int]]:
        for name in FIELDS:
            value = getattr(self, name)
            if value is not None:
                yield name, value


_NO_FIELDS = SagaFields()
_fields: ContextVar[SagaFields | None] = ContextVar("pivotal_log_fields", default=None)


def current_fields() -> SagaFields:
    """The fields in force here."""
    return _fields.get() or _NO_FIELDS


@contextlib.contextmanager
def _fields_set(fields: SagaFields) -> Iterator[None]:
    token = _fields.set(fields)
    try:
        yield
    finally:
        _fields.reset(token)


@contextlib.contextmanager
def saga_fields(saga_id: str, step: str | None = None, key: str | None = None) -> Iterator[None]:
    """Lines logged inside are about ``saga_id`` (and ``step``, ``key`` when given)."""
    with _fields_set(SagaFields(saga_id=saga_id, step=step, key=key)):
        yield


_rest = logging.getLogger("pivotal.sagas")


class LogFields(Telemetry):
    """The engine observer that sets the fields: the saga during a pass, and the step, its
    idempotency key and attempt during a call (so that a step's own log records carry the
    attempt they belong to). It also writes one line per saga that comes to rest: its id,
    outcome and how long it took from submission, on the ledger's clock."""

    def committed(
        self, before: SagaState | None, after: SagaState, events: Sequence[Event]
    ) -> None:
        if not after.status.terminal or (before is not None and before.status.terminal):
            return
        took = max(0.0, (events[-1].at if events else after.updated_at) - after.created_at)
        _rest.info(
            "saga %s came to rest: %s after %s",
            after.saga_id,
            after.status.value,
            age(took),
            extra={
                "saga_id": after.saga_id,
                "fields": {"outcome": after.status.value, "duration_seconds": round(took, 3)},
            },
        )

    @contextlib.contextmanager
    def saga_pass(self, state: SagaState, owner: str) -> Iterator[None]:
        with _fields_set(SagaFields(saga_id=state.saga_id)):
            yield

    @contextlib.contextmanager
    def call(self, call: Call) -> Iterator[None]:
        fields = replace(
            current_fields(),
            saga_id=call.saga_id,
            step=call.step,
            key=call.key,
            attempt=call.attempt,
        )
        with _fields_set(fields):
            yield


class SagaFieldsFilter(logging.Filter):
    """Copies the fields in force onto each record (unless it already carries them, from
    ``extra``); put it on a handler so that records of every logger get them."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = current_fields()
        for name in FIELDS:
            if getattr(record, name, None) is None:
                setattr(record, name, getattr(fields, name))
        return True


def _record_fields(record: logging.LogRecord) -> Iterator[tuple[str, Any]]:
    for name in FIELDS:
        value = getattr(record, name, None)
        if value is not None:
            yield name, value


class JsonLines(JsonFormatter):
    """One JSON object per record, written by python-json-logger: time, level, logger,
    message, the saga fields when set, the record's ``fields`` (``extra={"fields": {...}}``)
    and the exception. Only these: any other attribute a caller sets on a record (``extra=``)
    stays out, since nothing redacted it."""

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["ts"] = dt.datetime.fromtimestamp(record.created, dt.UTC)
        log_data["level"] = record.levelname.lower()
        log_data["logger"] = record.name
        log_data["message"] = redact(record.getMessage())
        log_data |= dict(_record_fields(record))
        log_data |= getattr(record, "fields", {})
        if message_dict.get("exc_info"):
            log_data["exception"] = redact(str(message_dict["exc_info"]))


class TextLines(logging.Formatter):
    """``time logger message``, then `` saga=… step=… key=… attempt=…`` when set. The
    message stays one line, with secrets redacted and control characters escaped (it may
    quote a step's error or a receiver's answer); so does a traceback's text."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(name)s %(message)s")

    def formatException(self, ei: Any) -> str:
        return printable(redact(super().formatException(ei)), newlines=True)

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = printable(redact(super().formatMessage(record)))
        extra = " ".join(f"{_TEXT_NAMES[k]}={_plain(v)}" for k, v in _record_fields(record))
        return f"{text} {extra}" if extra else text


def _plain(value: object) -> str:
    """A field value as one token: quoted (JSON) if it has spaces, quotes or controls."""
    text = str(value)
    if text and text.isprintable() and not any(c in text for c in ' "='):
        return text
    return json.dumps(text)


def formatter(fmt: LogFormat) -> logging.Formatter:
    """The formatter for ``fmt``."""
    return JsonLines() if fmt is LogFormat.JSON else TextLines()


@contextlib.contextmanager
def configure_logging(
    fmt: LogFormat, *, level: int = logging.INFO, stream: IO[str] | None = None
) -> Iterator[logging.Handler]:
    """Log records at ``level`` and above to ``stream`` (stderr) in ``fmt``, with the saga
    fields, for as long as the block runs; then put the root logger back as it was."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(SagaFieldsFilter())
    root = logging.getLogger()
    before = root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(before)
        handler.flush()


# -- HTTP requests ---------------------------------------------------------------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Paths that name a saga: /[api/]v1/sagas/{id}…, /[api/]v1/approvals/{id}…, /ui/sagas/{id}…
# and /ui/approvals/{id}…
_SAGA_PARENTS = (("v1", "sagas"), ("v1", "approvals"), ("ui", "sagas"), ("ui", "approvals"))


def saga_in_path(path: str) -> str | None:
    """The saga id a request path names, if it names one."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        parts = parts[1:]
    if len(parts) < 3 or (parts[0], parts[1]) not in _SAGA_PARENTS:
        return None
    found = parts[2]
    return found if saga_ids.pattern().match(found) else None


class RequestLog:
    """ASGI middleware: one line per HTTP request on logger ``pivotal.http``, with method,
    path (never the query string), status, duration and the saga id the path names; lines
    the app logs while it serves such a request carry the saga id too. Headers and bodies
    are never logged, so neither is a token."""

    def __init__(self, app: ASGIApp, *, logger: logging.Logger | None = None) -> None:
        self.app = app
        self.log = logger or logging.getLogger("pivotal.http")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless the app starts a response
        path = str(scope.get("path", ""))

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        saga_id = saga_in_path(path)
        scoped = saga_fields(saga_id) if saga_id is not None else contextlib.nullcontext()
        with scoped:
            try:
                await self.app(scope, receive, sending)
            finally:
                self._line(str(scope.get("method", "")), path, status, saga_id, started)

    def _line(
        self, method: str, path: str, status: int, saga_id: str | None, started: float
    ) -> None:
        seconds = time.perf_counter() - started
        fields: dict[str, Any] = {
            "event": "http_request",
            "method": method,
            "path": path,
            "status": status,
            "duration_seconds": round(seconds, 6),
        }
        if saga_id is not None:
            fields["saga_id"] = saga_id
        self.log.log(
            logging.WARNING if status >= 500 else logging.INFO,
            "%s %s %d %.1fms",
            method,
            json.dumps(path)[1:-1] if not path.isprintable() else path,
            status,
            seconds * 1000,
            extra={"fields": fields},
        )
