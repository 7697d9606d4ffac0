"""Frozen records made cheaply: ``quick_init`` gives a frozen, slotted dataclass an
``__init__`` that sets each field through its slot's own descriptor.

A frozen dataclass's ``__init__`` sets every field with ``object.__setattr__(self, name,
value)``: a call that packs its arguments and looks the name up on the class, for every
field of every record. The engine makes a few dozen records a saga (events, statements,
step records, contexts), so this was a sizeable share of its cost. The slot's descriptor
sets the same slot with the same value, for about half as much; the record is as frozen as
before (its ``__setattr__`` still refuses), equal, hashed and printed as before, and its
``__init__`` takes the same arguments with the same defaults.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    """The default shown for a field made by a factory (as dataclasses shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def quick_init(cls: type[T]) -> type[T]:
    """Give the frozen, slotted dataclass ``cls`` the cheaper ``__init__`` (a class
    decorator, put above ``@dataclass``). Refused for a class it would change otherwise:
    one that is not frozen or not slotted, has ``__post_init__``, an ``InitVar`` or a field
    left out of ``__init__``."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in vars(cls):
        raise TypeError(f"{cls.__name__} must be a frozen, slotted dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__: its __init__ is kept")
    found = dataclasses.fields(cls)  # type: ignore[arg-type]
    # ``fields`` leaves out InitVar and ClassVar pseudo-fields; ``__dataclass_fields__`` not
    if any(not f.init for f in found) or len(found) != len(vars(cls)["__dataclass_fields__"]):
        raise TypeError(f"{cls.__name__} has a field outside __init__: its __init__ is kept")
    namespace: dict[str, Any] = {"FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in found:
        name = f.name
        slot = getattr(cls, name)
        if not isinstance(slot, types.MemberDescriptorType):
            raise TypeError(f"{cls.__name__}.{name} is not a slot")
        namespace[f"set_{name}"] = slot.__set__
        value = name
        if f.default is not dataclasses.MISSING:
            namespace[f"default_{name}"] = f.default
            param = f"{name}=default_{name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"factory_{name}"] = f.default_factory
            param = f"{name}=FACTORY"
            value = f"factory_{name}() if {name} is FACTORY else {name}"
        else:
            param = name
        (keyword if f.kw_only else positional).append(param)
        body.append(f"    set_{name}(self, {value})\n")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n" + ("".join(body) or "    pass\n")
    exec(source, namespace)  # the source is built from the class's own fields
    init = namespace["__init__"]
    original = vars(cls)["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(original.__annotations__)
    init.__doc__ = original.__doc__
    setattr(cls, "__init__", init)  # noqa: B010  (mypy refuses assigning to __init__)
    return cls
