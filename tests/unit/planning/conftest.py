"""Planning unit fixtures: the commerce catalogues, and a checker for the JSON Schema subset
the rendered plan schema may use (a keyword outside it fails the test)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pivotal import Catalogue
from pivotal.examples.commerce import CommerceApp, create_app

KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "const", "enum", "anyOf",
        "$ref", "$defs", "items", "minItems", "maxItems", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
        "description", "default",
    }
)  # fmt: skip

TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}

SchemaCheck = Callable[[dict[str, Any], Any], list[str]]


def _check(schema: dict[str, Any], value: Any, root: dict[str, Any], at: str) -> Iterator[str]:
    unknown = set(schema) - KEYWORDS
    assert not unknown, f"{at}: the schema uses keywords outside the supported subset: {unknown}"
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        yield from _check(target, value, root, at)
        return
    if "anyOf" in schema and not any(
        not list(_check(branch, value, root, at)) for branch in schema["anyOf"]
    ):
        yield f"{at}: matches none of {len(schema['anyOf'])} alternatives"
    if "const" in schema and value != schema["const"]:
        yield f"{at}: must be {schema['const']!r}"
    if "enum" in schema and value not in schema["enum"]:
        yield f"{at}: must be one of {schema['enum']}"
    kind = schema.get("type")
    if kind is not None and not TYPES[kind](value):
        yield f"{at}: must be {kind}"
        return
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                yield f"{at}: {name} is required"
        props = schema.get("properties", {})
        for name, item in value.items():
            if name in props:
                yield from _check(props[name], item, root, f"{at}.{name}")
            elif schema.get("additionalProperties") is False:
                yield f"{at}: {name} is not allowed"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            yield f"{at}: too few items"
        for i, item in enumerate(value):
            if "items" in schema:
                yield from _check(schema["items"], item, root, f"{at}[{i}]")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", 1e9):
            yield f"{at}: bad length"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            yield f"{at}: does not match {schema['pattern']}"
    if TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            yield f"{at}: below the minimum"
        if "maximum" in schema and value > schema["maximum"]:
            yield f"{at}: above the maximum"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            yield f"{at}: not above the exclusive minimum"
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            yield f"{at}: not below the exclusive maximum"


@pytest.fixture
def schema_errors() -> SchemaCheck:
    """Errors of ``value`` against ``schema`` (empty when it conforms)."""

    def run(schema: dict[str, Any], value: Any) -> list[str]:
        return list(_check(schema, value, schema, "$"))

    return run


@pytest.fixture
def commerce(tmp_path: Path) -> Iterator[CommerceApp]:
    app = create_app(tmp_path / "commerce.db")
    yield app
    app.services.close()


@pytest.fixture
def fulfilment(commerce: CommerceApp) -> Catalogue:
    return commerce.catalogue("fulfilment")


@pytest.fixture
def checkout(commerce: CommerceApp) -> Catalogue:
    return commerce.catalogue("checkout")
