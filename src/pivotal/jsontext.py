"""Canonical JSON text: what ``json.dumps(value, sort_keys=True, separators=(",", ":"))``
returns, byte for byte, for every value (and the same exception where it raises).

The ledger keeps its rows' JSON in this form (``canonical``) and the plan digest hashes it
(``standard``), so it must never change. Two encoders make it:

- for the ledger's rows, orjson first, several times cheaper, whose text is taken only
  where it cannot differ from the standard library's: pure ASCII without DEL (the standard
  encoder escapes the rest as ``\\uXXXX``, orjson writes it as UTF-8), no ``null`` (orjson
  writes NaN and the infinities as ``null``, the standard encoder as ``NaN``,
  ``Infinity``), no ``e-`` and no ``0.0000`` (below 1e-4 the standard encoder writes a
  float with an exponent, ``1e-05``, orjson as ``0.00001`` or ``1.5e-7``). What orjson does
  not write as the standard encoder does is handed to ``default``, which refuses it: a
  subclass of str, int, dict or list (a key that is one, an OrderedDict), a dataclass, a
  datetime, anything unknown; so are keys that are not text, ints past 64 bits and nesting
  past orjson's limit.
- else, and for digests always, the standard library's C encoder, made once with the same
  options (``JSONEncoder.encode`` builds a new one on every call, and a closure beside it).
  It skips the circular-reference check (its table of the containers being encoded would be
  shared by every caller): a circular value recurses until ``RecursionError``, and is then
  encoded again by the standard encoder, which raises what it always raised (``ValueError:
  Circular reference detected``).

Two kinds of value that ``json.dumps`` refuses are written by orjson: an ``enum.Enum``
member that is not also a str or an int (as its value) and a ``uuid.UUID`` (as its text).
The ledger never gets either: what it keeps of a step's result or message was made JSON
first (``engine.values.jsonable``, ``outbox.check_message``), and the engine's own event
data are JSON values. ``tests/unit/test_jsontext.py`` compares the two encoders.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

import orjson


def encoder(
    *,
    default: Callable[[Any], Any] | None = None,
    sort_keys: bool = False,
    separators: tuple[str, str] = (", ", ": "),
) -> Callable[[Any], str]:
    """``json.JSONEncoder(default=..., sort_keys=..., separators=...).encode``, the text
    byte for byte, with its C encoder made once rather than on every call (see above)."""
    slow = json.JSONEncoder(default=default, sort_keys=sort_keys, separators=separators)
    # what ``JSONEncoder.iterencode`` builds for these options on every call
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is None:  # an interpreter without the C accelerator
        return slow.encode
    fast: Callable[[Any, int], Any] = c_make_encoder(
        None,  # markers: no circular-reference check (see above)
        slow.default,
        json.encoder.encode_basestring_ascii,  # ensure_ascii
        None,  # indent
        slow.key_separator,
        slow.item_separator,
        slow.sort_keys,
        slow.skipkeys,
        slow.allow_nan,
    )

    def encode(value: Any) -> str:
        try:
            return "".join(fast(value, 0))
        except RecursionError:  # circular, or nested too deep: as the standard encoder tells
            return slow.encode(value)

    return encode


# ``json.dumps(value, sort_keys=True, separators=(",", ":"))``, from the standard library's
# encoder alone: what a digest hashes (``Plan.digest``)
standard = encoder(sort_keys=True, separators=(",", ":"))


_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def _refuse(value: Any) -> Any:
    """orjson's ``default``: what it cannot write as the standard encoder does."""
    raise TypeError(type(value).__name__)


def _quick(value: Any) -> str | None:
    """orjson's text of ``value`` when it is certainly the standard encoder's, else None."""
    try:
        raw = orjson.dumps(value, default=_refuse, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError included
        return None
    text = raw.decode()  # searched as str: bytes' ``in`` costs several times more
    if (
        text.isascii()
        and "null" not in text
        and "e-" not in text
        and "0.0000" not in text
        and "\x7f" not in text
    ):
        return text
    return None


# Checked once with the orjson installed: the floats it writes as the standard encoder
# does, where older releases did not (1e16, not 1e+16); off when any differs.
_ORJSON_AGREES = (
    all(
        _quick(v) in (None, standard(v))
        for v in (1e16, 1.5e16, 1e22, 1.2345678901234568e17, 1e15, 123456.789, 0.0001, -0.0)
    )
    and _quick(1e16) is not None
)


def canonical(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``."""
    if _ORJSON_AGREES:
        quick = _quick(value)
        if quick is not None:
            return quick
    return standard(value)
