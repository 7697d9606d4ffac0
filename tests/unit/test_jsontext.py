"""The ledger's and the digests' JSON text (``pivotal.jsontext``) is the standard library's
``json.dumps(value, sort_keys=True, separators=(",", ":"))``, byte for byte, for every value
the ledger keeps and for the odd ones around it; where that raises, it raises the same.
orjson writes it where it certainly agrees (the rows a saga writes), the standard encoder
the rest."""

from __future__ import annotations

import enum
import json
import math
import sys
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pivotal import jsontext
from pivotal.jsontext import canonical, encoder, standard


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


# every float (NaN and the infinities too), and the ones people write
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 1e-4, 1e-5, 1.5e-7, 1e15, 1e16, 1.5e16, 1e21, 5e-324, 1.7976931348623157e308]
)
# ints past 64 bits too
ints = st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
# every character: ASCII control characters, DEL, non-ASCII, lone surrogates
texts = st.text(st.characters(codec=None), max_size=12) | st.text(
    st.characters(max_codepoint=0x7F), max_size=12
)
scalars = st.none() | st.booleans() | ints | floats | texts | st.sampled_from([Colour.RED])
keys = texts | st.sampled_from(["result", "via", "deadline", "key", "by", Colour.RED])
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=3000, deadline=None)
@given(json_values)
def test_the_text_is_json_dumps_for_every_value_the_ledger_keeps(value: Any) -> None:
    assert canonical(value) == standard(value) == dumps(value)


@settings(max_examples=3000, deadline=None)
@given(json_values)
def test_orjson_text_is_taken_only_where_it_is_json_dumps(value: Any) -> None:
    quick = jsontext._quick(value)
    assert quick is None or quick == dumps(value)


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**63), 2**64 - 1))
def test_orjson_writes_numbers_as_json_dumps_where_its_text_is_taken(number: Any) -> None:
    quick = jsontext._quick({"n": number, "at": [number]})
    assert quick is None or quick == dumps({"n": number, "at": [number]})


@pytest.mark.parametrize(
    "row",
    [
        {"by": "worker-7f3a", "deadline": 1796416334.2679262, "key": "sg_c805d0a1:0"},
        {"result": {"n": 0, "ok": True, "items": [1, 2.5, "x"]}, "via": "action"},
        {"n": 0},
        [1796416244.266164, 0.001, 123456789012345678, -5],
    ],
)
def test_the_rows_a_saga_writes_are_written_by_orjson(row: Any) -> None:
    assert jsontext._ORJSON_AGREES
    assert jsontext._quick(row) == dumps(row)


def test_what_orjson_writes_that_json_dumps_refuses() -> None:
    """The two divergences the module names: a plain Enum member and a UUID, which no value
    the ledger keeps contains (results and messages are made JSON first)."""

    class Plain(enum.Enum):
        Q = "q"

    ident = uuid.UUID(int=7)
    assert canonical({"p": Plain.Q, "u": ident}) == f'{{"p":"q","u":"{ident}"}}'
    for value in ({"p": Plain.Q}, {"u": ident}):
        for refusing in (dumps, standard):  # a digest's text: never orjson's
            with pytest.raises(TypeError):
                refusing(value)


@given(st.dictionaries(st.integers() | st.booleans() | st.none() | floats, scalars, max_size=1))
def test_keys_that_are_not_text_are_written_as_json_dumps_writes_them(value: Any) -> None:
    assert canonical(value) == standard(value) == dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {"n": math.nan, "i": math.inf, "j": -math.inf},
        {"level": Level.HIGH, Colour.RED: [1, 2.5, None]},
        {"b": 1, "a": {"d": [], "c": {}}},
        "\x00\x1f\x7f\u2028\ud800é",
        2**80,
    ],
)
def test_odd_values_are_written_as_json_dumps_writes_them(value: Any) -> None:
    assert canonical(value) == standard(value) == dumps(value)


def test_what_json_dumps_refuses_is_refused_alike() -> None:
    for value in ({"a": object()}, {1: "x", "y": 2}, {"when": {1, 2}}):
        with pytest.raises(TypeError) as theirs:
            dumps(value)
        for ours in (canonical, standard):
            with pytest.raises(TypeError) as refused:
                ours(value)
            assert str(refused.value) == str(theirs.value)


def test_a_circular_value_is_refused_as_json_dumps_refuses_it() -> None:
    loop: list[Any] = [1]
    loop.append({"back": loop})
    for ours in (canonical, standard):
        with pytest.raises(ValueError, match="Circular reference detected"):
            ours(loop)


def test_a_value_nested_too_deep_is_refused_as_json_dumps_refuses_it() -> None:
    deep: Any = []
    for _ in range(sys.getrecursionlimit() + 10):
        deep = [deep]
    with pytest.raises(RecursionError):
        dumps(deep)
    for ours in (canonical, standard):
        with pytest.raises(RecursionError):
            ours(deep)


ARGS_TEXT = encoder(default=str)
COMPACT_TEXT = encoder(separators=(",", ":"), default=str)


@settings(max_examples=1000, deadline=None)
@given(json_values | st.dictionaries(keys, st.sampled_from([object, 1.5, uuid.UUID(int=3)])))
def test_an_encoder_made_once_writes_what_json_dumps_writes(value: Any) -> None:
    """The arguments' text a step's model reads (``json.dumps(raw, default=str)``) and the
    plan's size (compact, ``default=str``): the same text from an encoder made once."""
    assert ARGS_TEXT(value) == json.dumps(value, default=str)
    assert COMPACT_TEXT(value) == json.dumps(value, separators=(",", ":"), default=str)


def test_an_encoder_made_once_refuses_a_circular_value_as_json_dumps_does() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference detected"):
        ARGS_TEXT(loop)
