"""Frozen records made cheaply: ``quick_init`` gives a frozen, slotted dataclass an
``__init__`` that sets each field through its slot's own descriptor.

A frozen dataclass's ``__init__`` sets every field with ``object.__setattr__(self, name,
value)``: a call that packs its arguments and looks the name up on the class, for every
field of every record. The engine makes a few dozen records a saga (events, statements,
step records, contexts), so this was a sizeable share of its cost. Here the record is
filled as its ``settable`` twin with plain stores, then made a ``cls`` again (an instance
of a subclass is filled through its slots' descriptors instead). The record is as frozen
as before (its ``__setattr__`` still refuses), equal, hashed and printed as before, and
its ``__init__`` takes the same arguments with the same defaults.
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
_TWINS: dict[type[Any], type[Any]] = {}


def settable(cls: type[T]) -> type[T]:
    """The twin of the frozen, slotted class ``cls`` whose fields can be set: a subclass
    adding no slot (so the layouts are the same) that takes back ``object``'s own
    ``__setattr__`` and ``__delattr__``, so a field is set by a plain store, the
    interpreter's fastest. A record is filled as a twin, then made a ``cls`` by assigning
    its ``__class__``; no twin is ever seen outside this module and ``state._copier``."""
    twin = _TWINS.get(cls)
    if twin is None:
        twin = type(
            f"_Settable{cls.__name__}",
            (cls,),
            {
                "__slots__": (),
                "__setattr__": object.__setattr__,
                "__delattr__": object.__delattr__,
                "__module__": cls.__module__,
                "__qualname__": f"_Settable{cls.__qualname__}",
            },
        )
        _TWINS[cls] = twin
    return twin


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
    if any(f.name.startswith("_qi_") or f.name == "self" for f in found):  # its own names
        raise TypeError(f"{cls.__name__} has a field named self or _qi_...: __init__ is kept")
    namespace: dict[str, Any] = {
        "_qi_factory": _FACTORY,
        "_qi_cls": cls,
        "_qi_twin": settable(cls),
        "_qi_type": type,
        "_qi_setattr": object.__setattr__,  # the frozen class's own refuses
    }
    positional: list[str] = []
    keyword: list[str] = []
    stores: list[str] = []
    sets: list[str] = []
    for f in found:
        name = f.name
        slot = getattr(cls, name)
        if not isinstance(slot, types.MemberDescriptorType):
            raise TypeError(f"{cls.__name__}.{name} is not a slot")
        namespace[f"_qi_set_{name}"] = slot.__set__
        value = name
        if f.default is not dataclasses.MISSING:
            namespace[f"_qi_default_{name}"] = f.default
            param = f"{name}=_qi_default_{name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_qi_factory_{name}"] = f.default_factory
            param = f"{name}=_qi_factory"
            value = f"_qi_factory_{name}() if {name} is _qi_factory else {name}"
        else:
            param = name
        (keyword if f.kw_only else positional).append(param)
        stores.append(f"        self.{name} = {value}\n")
        sets.append(f"        _qi_set_{name}(self, {value})\n")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = (
        f"def __init__({signature}):\n"
        "    if _qi_type(self) is _qi_cls:\n"
        "        _qi_setattr(self, '__class__', _qi_twin)\n"
        f"{''.join(stores)}"
        "        self.__class__ = _qi_cls\n"
        "    else:  # a subclass's instance: through the descriptors\n"
        f"{''.join(sets) or '        pass'}\n"
    )
    exec(source, namespace)  # the source is built from the class's own fields
    init = namespace["__init__"]
    original = vars(cls)["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(original.__annotations__)
    init.__doc__ = original.__doc__
    setattr(cls, "__init__", init)  # noqa: B010  (mypy refuses assigning to __init__)
    return cls
