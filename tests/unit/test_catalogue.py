"""Catalogue definitions: invalid steps are refused when the catalogue is built."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pivotal import (
    App,
    AppLoadError,
    Catalogue,
    CatalogueError,
    RetryPolicy,
    Step,
    StepContext,
    StepKind,
)
from pivotal.declarations.retry import NO_RETRY


class Args(BaseModel):
    order_id: str


async def act(args: Args, ctx: StepContext) -> dict[str, Any]:
    """Do the thing."""
    return {"ok": args.order_id}


async def undo(args: Args, result: Any, ctx: StepContext) -> None:
    return None


def test_compensable_step_without_undo_is_refused() -> None:
    with pytest.raises(CatalogueError, match="compensable step 'act' has no undo"):
        Step("act", "", StepKind.COMPENSABLE, Args, act)
    catalogue = Catalogue("c")
    with pytest.raises(CatalogueError, match="no undo"):
        catalogue.step(StepKind.COMPENSABLE)(act)
    assert len(catalogue) == 0


@pytest.mark.parametrize("kind", [StepKind.PIVOT, StepKind.RETRIABLE])
def test_only_compensable_steps_may_have_an_undo(kind: StepKind) -> None:
    with pytest.raises(CatalogueError, match="cannot have an undo"):
        Step("act", "", kind, Args, act, undo=undo)
    catalogue = Catalogue("c")
    with pytest.raises(CatalogueError, match=f"{kind.value} step 'act' cannot have an undo"):
        catalogue.step(kind, undo=undo)(act)
    assert "act" not in catalogue


def test_pivot_decorator_with_an_undo_is_refused() -> None:
    with pytest.raises(CatalogueError):
        Catalogue("c").pivot(undo=undo)(act)


def test_duplicate_step_name_is_refused() -> None:
    catalogue = Catalogue("c")
    catalogue.compensable(undo=undo)(act)
    with pytest.raises(CatalogueError, match="already has a step 'act'"):
        catalogue.pivot(name="act")(act)
    assert catalogue["act"].kind is StepKind.COMPENSABLE
    assert len(catalogue) == 1


@pytest.mark.parametrize("name", ["", "has space", "semi;colon", "dash-name"])
def test_step_names_must_be_identifiers(name: str) -> None:
    with pytest.raises(CatalogueError, match="identifier"):
        Step(name, "", StepKind.PIVOT, Args, act)


def test_arguments_must_be_a_pydantic_model() -> None:
    with pytest.raises(CatalogueError, match="pydantic model"):
        Step("act", "", StepKind.PIVOT, dict, act)  # type: ignore[arg-type]

    async def untyped(args, ctx):  # type: ignore[no-untyped-def]
        return None

    with pytest.raises(CatalogueError, match="annotate the first parameter"):
        Catalogue("c").pivot()(untyped)


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(CatalogueError, match="timeout must be positive"):
        Step("act", "", StepKind.PIVOT, Args, act, timeout=timeout)


def test_decorator_registers_the_step_and_returns_the_function() -> None:
    catalogue = Catalogue("c", "a test catalogue")
    policy = RetryPolicy(max_attempts=7)
    returned = catalogue.compensable(undo=undo, retry=policy, timeout=2.5)(act)

    assert returned is act
    step = catalogue["act"]
    assert step.description == "Do the thing."
    assert step.args_model is Args
    assert step.undo is undo
    assert step.policy == policy
    assert step.timeout == 2.5
    assert [s.name for s in catalogue] == ["act"]
    assert catalogue.get("missing") is None


def test_non_retryable_step_uses_a_single_attempt() -> None:
    catalogue = Catalogue("c")
    catalogue.retriable(retryable=False, retry=RetryPolicy(max_attempts=9))(act)
    assert catalogue["act"].policy is NO_RETRY
    assert catalogue["act"].policy.max_attempts == 1


def test_app_refuses_two_catalogues_with_one_name() -> None:
    with pytest.raises(AppLoadError, match="two catalogues"):
        App([Catalogue("same"), Catalogue("same")])
