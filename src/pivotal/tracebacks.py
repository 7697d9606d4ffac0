"""Why a step's call failed, as bounded data an operator can read: the user's frames.

``from_exception`` turns what an action or an undo raised into a short list kept on the
failure's event (``trace``): the frames of the user's code only (those inside Pivotal and
asyncio are dropped; Pivotal's own example catalogues count as user code), oldest first,
each with its file's name, line, function and source line, then the exception's type and
message; an exception it was raised from (or while handling) comes first, as Python prints
it. Every text in it passes through ``redaction.redact``. It is bounded (``MAX_FRAMES``
frames, ``MAX_BYTES`` of JSON in all) and never raises: a message that cannot be read, a
huge one, a deep recursion or a source file that is gone still give a trace, or None.

A timeout needs no trace: the error already says how long the call was given.

The entries are plain dicts, either a frame::

    {"file": "shop.py", "line": 42, "function": "charge", "source": "raise Declined(...)"}

(with ``"repeated": n`` when the same frame follows itself n more times: a recursion), or
an exception::

    {"exception": "shop.Declined", "message": "card declined"}

with ``"omitted": n`` when n of its frames were left out to stay in bounds, and ``"then"``
(``"cause"`` or ``"context"``) when the exception listed after it was raised from it, or
while handling it. ``lines`` and ``last_frame`` say them as text.
"""

from __future__ import annotations

import asyncio
import json
import linecache
import os
from collections import deque
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from pivotal.redaction import redact

__all__ = ["MAX_BYTES", "MAX_FRAMES", "from_exception", "last_frame", "lines"]

MAX_FRAMES = 12  # frames kept, over the whole chain; the ones nearest the failure first
MAX_BYTES = 4096  # the trace's size as JSON, at most
MAX_CHAIN = 3  # exceptions of a chain kept (the failure and what it was raised from)
_MESSAGE = 500  # characters of an exception's message kept
_SOURCE = 160  # characters of a source line kept
_NAME = 100  # characters of a file or function name kept
_READ = 4000  # characters of a message redacted before it is cut to ``_MESSAGE``
_WALK = 100_000  # traceback entries looked at, at most (a recursion has about 1000)

_PIVOTAL = os.path.dirname(os.path.abspath(__file__)) + os.sep
_EXAMPLES = os.path.join(_PIVOTAL, "examples") + os.sep  # catalogues, as a user writes them
_ASYNCIO = os.path.dirname(asyncio.__file__) + os.sep

THEN = {
    "cause": "The above exception was the direct cause of the following exception:",
    "context": "During handling of the above exception, another exception occurred:",
}


def from_exception(exc: BaseException) -> list[dict[str, Any]] | None:
    """The trace of ``exc`` (see the module), or None for a timeout or when none can be
    made. Never raises."""
    try:
        if isinstance(exc, TimeoutError):  # asyncio's, and the engine's Abandoned
            return None
        return _bounded(_trace(exc))
    except Exception:
        return None


def lines(trace: Sequence[dict[str, Any]] | None) -> list[str]:
    """The trace as lines of text, oldest first, as Python prints a traceback."""
    shown: list[str] = []
    for entry in trace or ():
        if not isinstance(entry, dict) or not ("exception" in entry or "file" in entry):
            continue
        if "exception" in entry:
            if entry.get("omitted"):
                shown.append(f"  ... {entry['omitted']} more frames not kept")
            message = entry.get("message")
            shown.append(f"{entry['exception']}: {message}" if message else str(entry["exception"]))
            if entry.get("then") in THEN:
                shown.append(THEN[entry["then"]])
            continue
        shown.append(f"  {_where(entry)}")
        if entry.get("source"):
            shown.append(f"    {entry['source']}")
        if entry.get("repeated"):
            shown.append(f"  [the frame above repeated {entry['repeated']} more times]")
    return shown


def last_frame(trace: Sequence[dict[str, Any]] | None) -> str | None:
    """Where the failure was raised in the user's code (``shop.py:42 in charge``), if the
    trace has a frame of it."""
    frames = [e for e in trace or () if isinstance(e, dict) and "file" in e]
    return _where(frames[-1]) if frames else None


def _where(frame: dict[str, Any]) -> str:
    return f"{frame.get('file')}:{frame.get('line')} in {frame.get('function')}"


# -- building ----------------------------------------------------------------------------


def _chain(exc: BaseException) -> list[tuple[BaseException, str | None]]:
    """``exc`` and what it was raised from, latest first, each with how the one before it
    in this list (raised later) relates to it: ``cause``, ``context``, None for ``exc``."""
    found: list[tuple[BaseException, str | None]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    link: str | None = None
    while current is not None and len(found) < MAX_CHAIN and id(current) not in seen:
        seen.add(id(current))
        found.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, "cause"
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, "context"
        else:
            current = None
    return found


def _trace(exc: BaseException) -> list[dict[str, Any]]:
    parts: list[list[dict[str, Any]]] = []
    room = MAX_FRAMES
    for current, link in _chain(exc):
        frames, omitted = _frames(current.__traceback__, room)
        room -= len(frames)
        entry: dict[str, Any] = {"exception": _type_name(current), "message": _message(current)}
        if omitted:
            entry["omitted"] = omitted
        if link is not None:
            entry["then"] = link
        parts.append([*frames, entry])
    return [entry for part in reversed(parts) for entry in part]


def _frames(tb: TracebackType | None, room: int) -> tuple[list[dict[str, Any]], int]:
    """The user's frames of ``tb`` (the last ``room`` of them, a frame that repeats itself
    kept once) and how many more there were."""
    kept: deque[list[Any]] = deque(maxlen=max(room, 1))
    counted = 0
    walked = 0
    while tb is not None and walked < _WALK:
        walked += 1
        code = tb.tb_frame.f_code
        filename = code.co_filename
        if _users(filename):
            where = (filename, tb.tb_lineno, code.co_name)
            if kept and kept[-1][0] == where:
                kept[-1][1] += 1
            elif room > 0:
                kept.append([where, 0])
                counted += 1
            else:
                counted += 1
        tb = tb.tb_next
    frames = [_frame(where[0], where[1], where[2], repeated) for where, repeated in kept]
    return frames, counted - len(frames)


def _users(filename: str) -> bool:
    if filename.startswith(_ASYNCIO):
        return False
    return not filename.startswith(_PIVOTAL) or filename.startswith(_EXAMPLES)


def _frame(filename: str, line: int, function: str, repeated: int) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "file": _cut(os.path.basename(filename) or filename, _NAME),
        "line": line,
        "function": _cut(function, _NAME),
        "source": _source(filename, line),
    }
    if repeated:
        frame["repeated"] = repeated
    return frame


def _source(filename: str, line: int) -> str:
    try:
        text = linecache.getline(filename, line).strip()
    except Exception:  # a file that cannot be read, or decoded
        return ""
    return _cut(redact(text[:_READ]), _SOURCE)


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    name = cls.__qualname__
    module = getattr(cls, "__module__", None)
    if isinstance(module, str) and module not in ("builtins", "__main__"):
        name = f"{module}.{name}"
    return _cut(name, 200)


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a __str__ that raises, or returns what is no text
        return "(its message could not be read)"
    text = str.__str__(text)  # a str subclass's own methods are not called below
    return _cut(redact(text[:_READ]), _MESSAGE)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(trace: list[dict[str, Any]]) -> int:
    return len(json.dumps(trace, ensure_ascii=False).encode())


def _bounded(trace: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """``trace`` within ``MAX_BYTES``: the oldest frames go first, then the messages of
    the exceptions it was raised from, then what is left of the failure's own."""
    while _size(trace) > MAX_BYTES:
        frame = next((i for i, e in enumerate(trace) if "file" in e), None)
        if frame is None:
            break
        trace.pop(frame)
        owner = next(e for e in trace[frame:] if "exception" in e)
        owner["omitted"] = owner.get("omitted", 0) + 1
    if _size(trace) > MAX_BYTES:
        for entry in trace[:-1]:
            entry["message"] = _cut(entry["message"], 80)
    if _size(trace) > MAX_BYTES:
        last = trace[-1]
        trace = [{**last, "message": _cut(last["message"], 200)}]
    return trace or None
