"""Submission: idempotent on the saga id, and nothing is written for an invalid plan."""

from __future__ import annotations

import pytest

from pivotal import (
    ErrorCode,
    InvalidInput,
    PlanRejected,
    SagaConflict,
    SagaNotFound,
    SagaStatus,
    parse_plan,
)


async def test_same_id_and_plan_returns_the_same_saga(
    orchestrator, store, services, checkout_plan, check
) -> None:
    first = await orchestrator.submit(checkout_plan("o-1"), saga_id="order-o-1")
    again = await orchestrator.submit(checkout_plan("o-1"), saga_id="order-o-1")

    assert first.status is SagaStatus.SUBMITTED
    assert again == first
    [summary] = await store.list_sagas()
    assert summary.saga_id == "order-o-1"
    assert [e.type.value for e in await store.events("order-o-1")] == ["saga_submitted"]
    assert services.calls() == []  # submitting runs nothing

    state = await orchestrator.run("order-o-1")
    assert state.status is SagaStatus.COMPLETED
    assert len(services.calls("charge")) == 1
    await check("order-o-1")


async def test_same_id_with_another_plan_conflicts_and_changes_nothing(
    orchestrator, store, services, checkout_plan, check
) -> None:
    await orchestrator.submit(checkout_plan("o-1"), saga_id="s1")
    before = await orchestrator.get("s1")
    events_before = await store.events("s1")

    with pytest.raises(SagaConflict):
        await orchestrator.submit(checkout_plan("o-1", amount="12.00"), saga_id="s1")

    after = await orchestrator.get("s1")
    assert after == before
    assert after.plan == checkout_plan("o-1")
    assert await store.events("s1") == events_before
    assert len(await store.list_sagas()) == 1
    assert services.calls() == []
    await check("s1")


@pytest.mark.parametrize("saga_id", ["", "has space", "slash/no", "x" * 129, "é"])
async def test_invalid_saga_id_is_refused(
    orchestrator, store, services, checkout_plan, saga_id
) -> None:
    with pytest.raises(InvalidInput):
        await orchestrator.submit(checkout_plan("o-1"), saga_id=saga_id)
    assert await store.list_sagas() == []
    assert services.calls() == []


async def test_generated_ids_are_distinct(
    orchestrator, store, services, checkout_plan, check
) -> None:
    a = await orchestrator.submit(checkout_plan("o-1"))
    b = await orchestrator.submit(checkout_plan("o-1"))
    assert a.saga_id != b.saga_id
    assert a.saga_id.startswith("sg_")
    assert len(await store.list_sagas()) == 2
    assert services.calls() == []
    await check(a.saga_id)
    await check(b.saga_id)


async def test_resubmitting_a_finished_checkout_returns_it(
    orchestrator, store, services, checkout_plan, check
) -> None:
    done = await orchestrator.execute(checkout_plan("o-2"), saga_id="retry-me")

    again = await orchestrator.submit(checkout_plan("o-2"), saga_id="retry-me")

    assert again == done
    assert again.status is SagaStatus.COMPLETED
    assert len(await store.list_sagas()) == 1
    assert len(services.calls("charge")) == 1
    await check("retry-me")


async def test_resubmitting_a_finished_fulfilment_returns_it(
    orchestrator, store, services, fulfilment_plan, check
) -> None:
    """A client retrying its submit after the saga ran must get the saga back.

    The capture made order 4490 'paid', so capture_payment's precondition no longer holds;
    that must not turn an idempotent resubmission into a rejection.
    """
    done = await orchestrator.execute(fulfilment_plan(), saga_id="f-retry")
    assert done.status is SagaStatus.COMPLETED

    again = await orchestrator.submit(fulfilment_plan(), saga_id="f-retry")

    assert again == done
    assert len(await store.list_sagas()) == 1
    assert len(services.calls("capture")) == 1
    await check("f-retry")


async def test_invalid_plan_is_rejected_and_nothing_is_written(
    orchestrator, store, services
) -> None:
    plan = parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {"name": "reserve_stock", "args": {"order_id": "o", "sku": "nope", "quantity": 1}},
                {"name": "charge_payment", "args": {"order_id": "o", "amount": "501"}},
            ],
        }
    )

    with pytest.raises(PlanRejected) as raised:
        await orchestrator.submit(plan, saga_id="bad")

    assert {e.code for e in raised.value.errors} == {
        ErrorCode.PRECONDITION_FAILED,
        ErrorCode.INVALID_ARGS,
    }
    assert "[invalid_args] steps[1].args.amount" in str(raised.value)
    assert await store.list_sagas() == []
    assert await store.events("bad") == []
    with pytest.raises(SagaNotFound):
        await orchestrator.get("bad")
    assert services.calls() == []
    assert services.effects_per_key() == {}


async def test_unknown_catalogue_is_rejected_and_nothing_is_written(
    orchestrator, store, services
) -> None:
    plan = parse_plan({"catalogue": "refunds", "steps": [{"name": "anything"}]})

    with pytest.raises(PlanRejected) as raised:
        await orchestrator.execute(plan, saga_id="nowhere")

    [error] = raised.value.errors
    assert error.code is ErrorCode.UNKNOWN_CATALOGUE
    assert "checkout" in error.message
    assert "fulfilment" in error.message
    assert await store.list_sagas() == []
    assert services.calls() == []
