"""How the engine keeps what a call left: an exception, a result or an undo's note, as
bounded text or JSON-able data for the ledger's events."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python

from pivotal.declarations.retry import Outcome

_NOTE_LIMIT = 2000


def describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a user exception whose __str__ raises
        text = ""
    text = text if len(text) <= _NOTE_LIMIT else text[:_NOTE_LIMIT] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def jsonable(value: Any) -> Any:
    """A result as JSON-able data; what cannot be converted is kept as its text."""
    try:
        return to_jsonable_python(value, fallback=str)
    except Exception:
        return {"unserialisable": describe_value(value)}


def describe_value(value: Any) -> str:
    try:
        return repr(value)[:_NOTE_LIMIT]
    except Exception:
        return type(value).__name__


def _note(note: object) -> str:
    """What an undo reported doing, as bounded text."""
    text = str.__str__(note) if isinstance(note, str) else describe_value(note)
    return text if len(text) <= _NOTE_LIMIT else text[:_NOTE_LIMIT] + "..."


def _outcome_name(exc: BaseException, outcome: Outcome) -> str:
    return "timeout" if isinstance(exc, TimeoutError) else outcome.value
