"""``records.quick_init``: a frozen, slotted dataclass made through its slots' descriptors is
the record its dataclass ``__init__`` made: same arguments and defaults, same fields, as
frozen; classes it would change otherwise are refused."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, ClassVar

import pytest

from pivotal.declarations.catalogue import StepContext
from pivotal.declarations.plan import FlatCall
from pivotal.engine.journal import Creation, RunOptions
from pivotal.engine.machine import Facts
from pivotal.records import quick_init
from pivotal.sagas.outbox import Message
from pivotal.sagas.state import ApprovalRecord, Event, SagaState, StepRecord, numbered
from pivotal.store.base import StoredSaga
from pivotal.store.primitives import Stmt


def plain_twin(cls: type[Any]) -> type[Any]:
    """The same fields in a class left to ``dataclasses`` alone."""
    fields = [
        (
            f.name,
            f.type,
            dataclasses.field(
                default=f.default,
                default_factory=f.default_factory,
                repr=f.repr,
                compare=f.compare,
                hash=f.hash,
                kw_only=f.kw_only,
            ),
        )
        for f in dataclasses.fields(cls)
    ]
    twin: type[Any] = dataclasses.make_dataclass(cls.__name__, fields, frozen=True, slots=True)
    return twin


QUICK = [Event, StepRecord, ApprovalRecord, SagaState, Stmt, FlatCall, StepContext]
QUICK += [StoredSaga, Message, Facts, RunOptions, Creation]


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_a_quick_record_takes_the_arguments_its_dataclass_took(cls: type[Any]) -> None:
    ours = inspect.signature(cls).parameters
    theirs = inspect.signature(plain_twin(cls)).parameters
    assert list(ours) == list(theirs)
    for name, param in ours.items():
        assert param.kind == theirs[name].kind
        if theirs[name].default is inspect.Parameter.empty:
            assert param.default is inspect.Parameter.empty
        elif repr(theirs[name].default) == "<factory>":
            assert repr(param.default) == "<factory>"
        else:
            assert param.default is theirs[name].default
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"


def test_a_quick_record_is_the_record_its_dataclass_made() -> None:
    event = Event("step_started", 5.0, 0, attempt=1, data={"key": "s:0"})
    assert dataclasses.asdict(event) == {
        "type": "step_started",
        "at": 5.0,
        "step": 0,
        "attempt": 1,
        "data": {"key": "s:0"},
        "seq": 0,
        "provenance_ref": None,
    }
    assert event == dataclasses.replace(event)
    assert hash(event.type) == hash("step_started")
    assert Event("x", 1.0).data == {}
    assert Event("x", 1.0).data is not Event("x", 1.0).data
    ctx = StepContext("s", 0, "charge", "s:0", "s:0", 1)
    assert ctx.outbox == []
    assert ctx.outbox is not StepContext("s", 0, "c", "k", "k", 1).outbox
    assert repr(ctx) == repr(plain_twin(StepContext)("s", 0, "charge", "s:0", "s:0", 1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"Event.__init__\(\) missing 1 required"):
        Event("x")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        Stmt("SELECT 1", colour="red")  # type: ignore[call-arg]


def test_a_record_is_never_left_a_settable_twin() -> None:
    """Filled as its twin, a record is an instance of its own class again once made; a
    subclass's instance (filled through the descriptors) stays of its class; copies too."""

    class Noted(Event):
        __slots__ = ()

    made = [Event("x", 1.0), StepRecord(0, "n", "compensable"), Stmt("SELECT 1")]
    for record, cls in zip(made, (Event, StepRecord, Stmt), strict=True):
        assert type(record) is cls
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.__setattr__(dataclasses.fields(record)[0].name, None)
    noted = Noted("y", 2.0, step=1)
    assert type(noted) is Noted
    assert (noted.type, noted.at, noted.step, noted.data) == ("y", 2.0, 1, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        noted.at = 3.0  # type: ignore[misc]
    copied = numbered(made[0], 4)
    assert type(copied) is Event
    assert copied == dataclasses.replace(made[0], seq=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.seq = 5  # type: ignore[misc]


def test_keyword_only_fields_stay_keyword_only() -> None:
    @quick_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Tagged:
        name: str
        size: int = 1
        _: dataclasses.KW_ONLY
        tags: list[str] = dataclasses.field(default_factory=list)
        note: str | None = None

    made = Tagged("a", 2, note="n")
    assert (made.name, made.size, made.tags, made.note) == ("a", 2, [], "n")
    with pytest.raises(TypeError):
        Tagged("a", 2, [])  # type: ignore[misc]
    assert str(inspect.signature(Tagged)).startswith("(name: 'str', size: 'int' = 1, *, tags")


def test_a_class_it_would_change_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Loose:
        n: int

    @dataclasses.dataclass(slots=True)
    class Thawed:
        n: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived:
        n: int
        m: int = dataclasses.field(default=0, init=False)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Counted:
        n: int
        made: ClassVar[int] = 0
        extra: dataclasses.InitVar[int] = 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class Selfish:
        self: int

    for cls in (Loose, Thawed, Checked, Derived, Counted, Selfish):
        with pytest.raises(TypeError):
            quick_init(cls)
