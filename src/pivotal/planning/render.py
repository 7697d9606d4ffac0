"""The catalogue as a planner sees it: a JSON Schema of a valid plan and a short description.

Only forward steps appear. Nothing about how a step is reversed, looked up or checked is
rendered: a planner cannot name what it is never shown, and the validator refuses it anyway.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pivotal.declarations.catalogue import Catalogue, Step, StepKind

KIND_RULES: Mapping[StepKind, str] = {
    StepKind.COMPENSABLE: (
        "reversible: if a later step fails, the orchestrator reverses it on its own"
    ),
    StepKind.PIVOT: (
        "the point of no return; at most one per plan; it may wait for a person's approval"
    ),
    StepKind.RETRIABLE: "runs after the pivot and is retried until it succeeds",
}

_DROP = frozenset({"title", "$schema"})


@dataclass(frozen=True, slots=True)
class CatalogueView:
    """What a planner receives about one catalogue."""

    catalogue: str
    schema: dict[str, Any]
    text: str
    steps: tuple[str, ...]

    def schema_json(self) -> str:
        return json.dumps(self.schema, sort_keys=True)


def render_catalogue(catalogue: Catalogue) -> CatalogueView:
    """The schema and the description of ``catalogue`` for a planner."""
    schema = catalogue_schema(catalogue)
    return CatalogueView(
        catalogue=catalogue.name,
        schema=schema,
        text=catalogue_text(catalogue, schema),
        steps=tuple(step.name for step in catalogue),
    )


# -- the schema --------------------------------------------------------------------------


def catalogue_schema(catalogue: Catalogue) -> dict[str, Any]:
    """JSON Schema of a plan for ``catalogue``: each step name tied to its argument schema.

    The shape is checked by the schema; the ordering rule (compensable, pivot, retriable)
    and the preconditions are the validator's, which always has the last word.
    """
    defs: dict[str, Any] = {}
    for step in catalogue:
        defs[f"call_{step.name}"] = _call_schema(step, defs)
    call_refs = [{"$ref": f"#/$defs/call_{s.name}"} for s in catalogue]
    items: list[dict[str, Any]] = list(call_refs)
    compensable = [
        {"$ref": f"#/$defs/call_{s.name}"} for s in catalogue if s.kind is StepKind.COMPENSABLE
    ]
    if compensable:
        defs["parallel_group"] = {
            "type": "object",
            "description": "Compensable calls that run at the same time.",
            "properties": {
                "parallel": {"type": "array", "minItems": 1, "items": {"anyOf": compensable}}
            },
            "required": ["parallel"],
            "additionalProperties": False,
        }
        items.append({"$ref": "#/$defs/parallel_group"})
    # The rules over the whole plan relate calls to each other, which the schema subset that
    # structured output accepts cannot say: they are stated in the description.
    rules = "".join(f" Rule: {rule.describe()}." for rule in catalogue.rules)
    steps: dict[str, Any] = {
        "type": "array",
        "minItems": 1,
        "maxItems": catalogue.limits.max_steps,
        "description": f"Calls in execution order.{rules}",
        "items": {"anyOf": items},
    }
    return {
        "type": "object",
        "description": f"A plan for the catalogue {catalogue.name!r}.",
        "properties": {
            "catalogue": {"type": "string", "const": catalogue.name},
            "steps": steps,
            "rationale": {
                "type": "string",
                "maxLength": catalogue.limits.max_rationale,
                "description": "Why this plan, for the person who may approve it.",
            },
        },
        "required": ["catalogue", "steps", "rationale"],
        "additionalProperties": False,
        "$defs": defs,
    }


def _call_schema(step: Step, defs: dict[str, Any]) -> dict[str, Any]:
    prefix = f"args_{step.name}__"
    args = step.args_model.model_json_schema(ref_template=f"#/$defs/{prefix}{{model}}")
    for name, sub in args.pop("$defs", {}).items():
        defs[prefix + name] = _clean(sub)
    return {
        "type": "object",
        "description": f"{step.name} ({step.kind.value}): {_first_line(step.description)}",
        "properties": {
            "name": {"type": "string", "const": step.name},
            "args": _clean(args),
        },
        "required": ["name", "args"],
        "additionalProperties": False,
    }


def _clean(schema: Any) -> Any:
    """Drop titles; keep only the bounded branch of pydantic's lax number-or-string unions."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROP:
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: _clean(sub) for name, sub in value.items()}
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = [_clean(sub) for sub in value]
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _clean(value)
        else:
            out[key] = value
    branches = out.get("anyOf")
    if isinstance(branches, list) and len(branches) == 2:
        numbers = [b for b in branches if b.get("type") in ("number", "integer")]
        bare_strings = [b for b in branches if b == {"type": "string"}]
        if len(numbers) == 1 and len(bare_strings) == 1:
            del out["anyOf"]
            out = numbers[0] | out
    return out


# -- the text ----------------------------------------------------------------------------


def catalogue_text(catalogue: Catalogue, schema: Mapping[str, Any] | None = None) -> str:
    """A concise description of the steps, their kinds and the ordering rule."""
    schema = schema or catalogue_schema(catalogue)
    lines = [f"Catalogue {catalogue.name!r}: {catalogue.description}".rstrip(": "), ""]
    lines.append("Steps you may use (no other step exists):")
    for step in catalogue:
        args = schema["$defs"][f"call_{step.name}"]["properties"]["args"]
        lines.append(f"- {step.name} [{step.kind.value}]: {_first_line(step.description)}")
        lines.append(f"    args: {_describe_args(args)}")
    lines += ["", "Kinds:"]
    lines += [f"- {kind.value}: {rule}" for kind, rule in KIND_RULES.items()]
    lines += [
        "",
        "Ordering rule: all compensable steps first, then at most one pivot, then the "
        'retriable steps. Compensable steps may be grouped as {"parallel": [calls]} to run '
        "together.",
    ]
    if catalogue.rules:
        lines += ["", "Rules every plan of this catalogue must keep:"]
        lines += [f"- {rule.describe()}" for rule in catalogue.rules]
    lines += [
        "Only the orchestrator reverses steps, and only after a failure; a plan never "
        "contains a reversal. If the request asks for something no step does, leave it out "
        "and say so in the rationale.",
        f'Reply with one JSON object: {{"catalogue": "{catalogue.name}", "steps": '
        '[{"name": ..., "args": {...}}], "rationale": "..."}.',
    ]
    return "\n".join(lines)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _describe_args(schema: Mapping[str, Any]) -> str:
    props: Mapping[str, Any] = schema.get("properties", {})
    if not props:
        return "none"
    required = set(schema.get("required", []))
    parts = []
    for name, prop in props.items():
        detail = _describe_value(prop)
        flag = "required" if name in required else f"default {json.dumps(prop.get('default'))}"
        parts.append(f"{name} ({detail}; {flag})")
    return ", ".join(parts)


_BOUNDS: tuple[tuple[str, Callable[[Any], str]], ...] = (
    ("exclusiveMinimum", lambda v: f"> {v:g}"),
    ("minimum", lambda v: f">= {v:g}"),
    ("exclusiveMaximum", lambda v: f"< {v:g}"),
    ("maximum", lambda v: f"<= {v:g}"),
    ("minLength", lambda v: f"min {v} chars"),
    ("maxLength", lambda v: f"max {v} chars"),
    ("pattern", lambda v: f"matching {v}"),
    ("minItems", lambda v: f"at least {v} items"),
    ("maxItems", lambda v: f"at most {v} items"),
)


def _describe_value(prop: Mapping[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + "|".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return f"exactly {json.dumps(prop['const'])}"
    if "anyOf" in prop:
        return " or ".join(_describe_value(b) for b in prop["anyOf"])
    if "$ref" in prop:
        return "object"
    words = [render(prop[key]) for key, render in _BOUNDS if key in prop]
    kind = str(prop.get("type", "value"))
    return f"{kind}, {', '.join(words)}" if words else kind
