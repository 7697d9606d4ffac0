"""A plan as the rules over it see it: its calls with their argument types, the trusted
facts about what each call names, and the subject of the request it serves.

Facts are asked for per subject: a call that names an order is checked against that
order's facts, whatever the other calls name. A plan whose calls all name one order asks
once; a plan that names two orders asks for both, so that a call spelling its order
differently is never checked against nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pivotal.declarations.identity import comparable, field_of, identity_of
from pivotal.declarations.plan import Plan

FactsFor = Callable[[Mapping[str, object]], "Mapping[str, object] | None"]
"""The trusted facts for a context (None: they could not be had)."""

_SCALARS = (str, int, float, bool)


@dataclass(frozen=True, slots=True)
class Call:
    """One call of a plan as rules see it."""

    index: int  # flat index, as in idempotency keys
    name: str
    args: Mapping[str, Any]  # as the plan wrote them
    path: str  # where in the plan JSON, e.g. "steps[2]"
    group: int | None  # position of its parallel group, if any
    model: type[BaseModel] | None = None  # the step's argument model, when it has one

    def arg_path(self, name: str) -> str:
        return f"{self.path}.args.{name}"

    def field(self, name: str) -> FieldInfo | None:
        return field_of(self.model, name)

    def takes(self, name: str) -> bool:
        """Whether the call passes argument ``name``, given or by its default."""
        return name in self.args or self.field(name) is not None

    def value(self, name: str) -> object:
        """The argument as the step gets it: as written, else its field's default (a
        call that leaves out ``currency`` pays in the default currency)."""
        if name in self.args:
            return self.args[name]
        info = self.field(name)
        if info is None or info.is_required():
            return None
        return info.get_default(call_default_factory=True)

    def written(self, name: str) -> str:
        """The argument as written, or its default and that it was left out (for an
        error's message)."""
        if name in self.args:
            return show(self.args[name])
        return f"{show(self.value(name))} (its default: the plan leaves it out)"

    def key(self, name: str) -> object:
        """What the argument ``name`` is compared by (see ``identity.comparable``)."""
        return comparable(self.value(name), self.field(name))

    def identities(self) -> dict[str, str]:
        """The entities this call names: argument name -> canonical id."""
        out: dict[str, str] = {}
        for name, value in self.args.items():
            identity = identity_of(self.field(name))
            if identity is not None and isinstance(value, str):
                out[name] = identity.canonical(value)
        return out


@dataclass(frozen=True, slots=True)
class PlanView:
    """A plan's calls, its catalogue's name, the trusted facts about it (None: the facts
    could not be had), and the subject of the request it serves (``about``)."""

    catalogue: str
    calls: tuple[Call, ...]
    facts: Mapping[str, object] | None
    plan: Plan
    about: Mapping[str, object] = field(default_factory=dict)
    context: Mapping[str, object] = field(default_factory=dict)  # what ``facts`` were asked
    lookup: FactsFor | None = None  # facts for another context (a call naming another order)

    @classmethod
    def of(
        cls,
        plan: Plan,
        facts: Mapping[str, object] | None,
        *,
        models: Mapping[str, type[BaseModel]] | None = None,
        lookup: FactsFor | None = None,
    ) -> PlanView:
        models = models or {}
        calls = tuple(
            Call(f.index, f.call.name, f.call.args, f.path, f.group, models.get(f.call.name))
            for f in plan.calls()
        )
        about = dict(plan.provenance.about or {})
        return cls(plan.catalogue, calls, facts, plan, about, plan_context(calls), lookup)

    def named(self, names: Iterable[str] | None) -> list[Call]:
        wanted = None if names is None else set(names)
        return [c for c in self.calls if wanted is None or c.name in wanted]

    def facts_for(self, call: Call) -> Mapping[str, object] | None:
        """The trusted facts about what ``call`` names: the plan's, unless the call names
        an entity the plan's context does not (then that entity's own facts)."""
        own = call.identities()
        if self.lookup is None or all(self.context.get(k) == v for k, v in own.items()):
            return self.facts
        return self.lookup({**self.context, **own})


def show(value: object) -> str:
    """``value`` as JSON for an error's message, cut at 80 characters."""
    try:
        text = json.dumps(value, default=str)
    except ValueError:
        text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def plan_context(calls: Iterable[Call]) -> dict[str, object]:
    """The scalar arguments every call that carries them agrees on (the plan's order id),
    each compared as its field reads it and entities given in their canonical spelling:
    what the app's ``facts`` are asked with."""
    seen: dict[str, tuple[object, object]] = {}  # name -> (value, comparison key)
    split: set[str] = set()
    for call in calls:
        own = call.identities()
        for name, value in call.args.items():
            if not isinstance(value, _SCALARS) or name in split:
                continue
            key = call.key(name)
            if name in seen and seen[name][1] != key:
                split.add(name)
                del seen[name]
            elif name not in seen:
                seen[name] = (own.get(name, value), key)
    return {name: value for name, (value, _) in seen.items()}
