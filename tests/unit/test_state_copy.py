"""Folding an event copies the state, a step record and the event with copiers made once
per class: each copy must equal ``dataclasses.replace`` and leave the original as it was."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pivotal.sagas.state import (
    Event,
    EventType,
    SagaState,
    SagaStatus,
    StepRecord,
    StepStatus,
    _copier,
    _copy_state,
    _copy_step,
    numbered,
)


def a_state() -> SagaState:
    steps = (StepRecord(index=0, name="reserve", kind="compensable"),)
    return SagaState(
        saga_id="s",
        catalogue="c",
        plan_digest="d",
        provenance_ref="p",
        status=SagaStatus.SUBMITTED,
        steps=steps,
        created_at=1.0,
        updated_at=1.0,
        version=1,
    )


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"version": 2, "updated_at": 2.0},
        {"status": SagaStatus.RUNNING, "reason": "why", "compensating_since": 3.0},
        {f.name: getattr(a_state(), f.name) for f in dataclasses.fields(SagaState)},
    ],
)
def test_a_state_copy_is_replace(changes: dict[str, Any]) -> None:
    before = a_state()
    copied = _copy_state(before, changes)
    assert copied == dataclasses.replace(before, **changes)
    assert copied is not before
    assert before == a_state()
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.version = 9  # type: ignore[misc]


def test_a_step_copy_and_a_numbered_event_are_replace() -> None:
    step = a_state().steps[0]
    changes = {"status": StepStatus.SUCCEEDED, "result": {"n": 1}, "seq": 1}
    assert _copy_step(step, changes) == dataclasses.replace(step, **changes)
    event = Event(EventType.STEP_STARTED, 5.0, step=0, attempt=1, data={"key": "s:0"})
    assert numbered(event, 7) == dataclasses.replace(event, seq=7)
    assert event.seq == 0


def test_a_copy_refuses_a_field_the_class_does_not_have() -> None:
    with pytest.raises(TypeError, match="no field"):
        _copy_state(a_state(), {"version": 2, "colour": "red"})


def test_a_copier_is_made_only_for_a_slotted_class_without_post_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class Loose:
        n: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("negative")

    for cls in (Loose, Checked):
        with pytest.raises(TypeError, match="slotted"):
            _copier(cls)


def test_copies_of_many_shapes_are_replace() -> None:
    """A copy is made per shape of changes, and kept for a bounded number of shapes: past
    that bound (and in any order of fields) each copy is still ``replace``."""
    before = a_state()
    names = ["version", "updated_at", "reason", "outcomes", "compensating_since", "traceparent"]
    values = {
        "version": 5,
        "updated_at": 9.0,
        "reason": "r",
        "outcomes": 2,
        "compensating_since": 4.0,
        "traceparent": "t",
    }
    shapes = [names[i:] + names[:i] for i in range(len(names))]
    shapes += [names[: n + 1][::-1] for n in range(len(names))]
    shapes += [  # 120 more: past the bound
        [a, b, c] for a in names for b in names for c in names if len({a, b, c}) == 3
    ]
    for shape in shapes:
        changes = {name: values[name] for name in shape}
        assert _copy_state(before, changes) == dataclasses.replace(before, **changes)
    assert before == a_state()
