"""The kinds of step: declared by the catalogue, read by the validator, the engine and the
approval policies (``pivotal.declarations.catalogue`` exports them as its own)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class StepKind(StrEnum):
    """Where a step may stand in a plan and how failure is handled."""

    COMPENSABLE = "compensable"  # has an undo; before the point of no return
    PIVOT = "pivot"  # the point of no return; at most one per plan
    RETRIABLE = "retriable"  # after the pivot; retried until it succeeds


# each kind's text, read once: an enum member's ``.value`` is a property, two Python calls
KIND_TEXT: Mapping[str, str] = {kind: kind.value for kind in StepKind}

KIND_ORDER: Mapping[StepKind, int] = {
    StepKind.COMPENSABLE: 0,
    StepKind.PIVOT: 1,
    StepKind.RETRIABLE: 2,
}
