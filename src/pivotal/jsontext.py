"""Canonical JSON text: what ``json.dumps(value, sort_keys=True, separators=(",", ":"))``
returns, byte for byte, for every value (and the same exception where it raises).

The ledger keeps its rows' JSON in this form and the plan digest hashes it, so it must never
change. ``JSONEncoder.encode`` builds a new C encoder on every call (and a closure beside
it); ``canonical`` calls one made once. That one skips the circular-reference check (its
table of the containers being encoded would be shared by every caller): a circular value
recurses until ``RecursionError`` instead, and is then encoded again by the standard
encoder, which raises what it always raised (``ValueError: Circular reference detected``).
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

_STANDARD = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _made_once() -> Callable[[Any, int], Any] | None:
    # what ``JSONEncoder.iterencode`` builds for these options on every call
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is None:  # an interpreter without the C accelerator
        return None
    made: Callable[[Any, int], Any] = c_make_encoder(
        None,  # markers: no circular-reference check (see above)
        _STANDARD.default,
        json.encoder.encode_basestring_ascii,  # ensure_ascii
        None,  # indent
        ":",
        ",",
        True,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )
    return made


_ENCODE = _made_once()


def canonical(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``."""
    if _ENCODE is None:
        return _STANDARD.encode(value)
    try:
        return "".join(_ENCODE(value, 0))
    except RecursionError:  # circular, or nested too deep: as the standard encoder tells
        return _STANDARD.encode(value)
