"""The validator: one test per rule, every error at once, and plan parsing."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from pivotal import Catalogue, ErrorCode, PlanError, PlanParseError, parse_plan, validate
from pivotal.declarations.plan import PlanLimits, surely_fits


class Note(BaseModel):
    text: str


@pytest.fixture
def checkout(app) -> Catalogue:
    return app.catalogue("checkout")


@pytest.fixture
def fulfilment(app) -> Catalogue:
    return app.catalogue("fulfilment")


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


def order_o(services, *lines: tuple[str, int]) -> None:
    """Order "o" open in the order system for 10 with these lines (sku, quantity): the
    shipped catalogues bind every plan to its order's amount and lines."""
    services.order(
        "o",
        customer="c-o",
        amount="10",
        lines=[{"sku": sku, "quantity": n} for sku, n in lines],
        recipient="o@example.com",
    )


# The test app's trusted facts (its order system), which the catalogues' rules read.
FACTS: Callable[[Mapping[str, object]], Mapping[str, object]] | None = None


@pytest.fixture(autouse=True)
def _order_system(app, monkeypatch: pytest.MonkeyPatch) -> None:
    order_o(app.services, ("sku-1", 1))  # what RESERVE and CHARGE are for
    monkeypatch.setitem(globals(), "FACTS", app.facts)


RESERVE = call("reserve_stock", order_id="o", sku="sku-1", quantity=1)
# the seeded order 4471: 180, one lamp, from warehouse B, to customer-4471@example.com
AUTHORIZE = call("authorize_payment", order_id="4471", amount="180")
CAPTURE = call("capture_payment", order_id="4471", amount="180")
SHIP = call("create_shipment", order_id="4471", warehouse="B")
CHARGE = call("charge_payment", order_id="o", amount="10")


def check(catalogue: Catalogue, *steps: Any, name: str | None = None) -> list[PlanError]:
    plan = parse_plan({"catalogue": name or catalogue.name, "steps": list(steps)})
    return validate(plan, catalogue, facts=FACTS)


def only(errors: list[PlanError]) -> PlanError:
    assert len(errors) == 1, errors
    return errors[0]


def test_valid_plans_have_no_errors(checkout, fulfilment) -> None:
    assert check(checkout, RESERVE, CHARGE, call("create_shipment", order_id="o")) == []
    reserve = call("reserve_stock", order_id="4471", sku="lamp", quantity=1, warehouse="B")
    assert check(fulfilment, reserve, AUTHORIZE, CAPTURE, SHIP) == []


def test_unknown_catalogue(checkout) -> None:
    error = only(check(checkout, RESERVE, name="fulfilment"))
    assert error.code is ErrorCode.UNKNOWN_CATALOGUE
    assert error.path == "catalogue"
    assert "'fulfilment'" in error.message


def test_empty_plan(checkout) -> None:
    error = only(check(checkout))
    assert (error.code, error.path) == (ErrorCode.EMPTY_PLAN, "steps")


def test_empty_parallel(checkout) -> None:
    error = only(check(checkout, RESERVE, {"parallel": []}))
    assert (error.code, error.path) == (ErrorCode.EMPTY_PARALLEL, "steps[1].parallel")


def test_unknown_step_suggests_the_closest_name(checkout) -> None:
    error = only(check(checkout, call("reserve_stok", order_id="o"), CHARGE))
    assert error.code is ErrorCode.UNKNOWN_STEP
    assert (error.index, error.path, error.step) == (0, "steps[0].name", "reserve_stok")
    assert "Did you mean 'reserve_stock'?" in error.message
    assert "charge_payment, create_shipment, reserve_stock" in error.message


def test_unknown_step_without_a_close_name(checkout) -> None:
    error = only(check(checkout, call("launch_rocket")))
    assert error.code is ErrorCode.UNKNOWN_STEP
    assert "Did you mean" not in error.message


def test_compensation_cannot_be_planned(checkout) -> None:
    error = only(check(checkout, RESERVE, call("refund_payment", order_id="o")))
    assert error.code is ErrorCode.UNDO_NOT_CALLABLE
    assert (error.index, error.path) == (1, "steps[1].name")
    assert "compensation" in error.message


def test_invalid_args_point_at_the_field(checkout) -> None:
    error = only(check(checkout, RESERVE, call("charge_payment", order_id="o", amount="501")))
    assert error.code is ErrorCode.INVALID_ARGS
    assert error.path == "steps[1].args.amount"
    assert (error.index, error.step) == (1, "charge_payment")
    assert error.where() == "steps[1].args.amount"


def test_invalid_args_report_every_field(checkout) -> None:
    bad = call("reserve_stock", sku="sku-1", quantity=0, colour="red")
    errors = check(checkout, bad)
    assert {e.code for e in errors} == {ErrorCode.INVALID_ARGS}
    assert {e.path for e in errors} == {
        "steps[0].args.order_id",
        "steps[0].args.quantity",
        "steps[0].args.colour",
    }


def test_multiple_pivots(fulfilment) -> None:
    error = only(check(fulfilment, RESERVE, CAPTURE, CAPTURE))
    assert error.code is ErrorCode.MULTIPLE_PIVOTS
    assert (error.index, error.path) == (2, "steps[2]")
    assert "first is step 1" in error.message


def test_pivot_before_a_compensable_step_is_out_of_order(fulfilment) -> None:
    error = only(check(fulfilment, CAPTURE, RESERVE))
    assert error.code is ErrorCode.KIND_ORDER
    assert (error.index, error.step) == (1, "reserve_stock")
    assert "after the pivot step capture_payment" in error.message


def test_pivot_in_the_middle_of_compensable_steps_is_rejected(fulfilment) -> None:
    error = only(check(fulfilment, RESERVE, CAPTURE, AUTHORIZE))
    assert error.code is ErrorCode.KIND_ORDER
    assert (error.index, error.step) == (2, "authorize_payment")


def test_retriable_before_the_pivot_is_out_of_order(fulfilment) -> None:
    error = only(check(fulfilment, RESERVE, SHIP, CAPTURE))
    assert error.code is ErrorCode.KIND_ORDER
    assert error.step == "capture_payment"


def test_a_fulfilment_without_its_pivot_is_refused_by_the_catalogue_rules(fulfilment) -> None:
    """Each call is right and in order; the plan as a whole ships without a capture."""
    reserve = call("reserve_stock", order_id="4471", sku="lamp", quantity=1, warehouse="B")
    confirm = call("send_confirmation", order_id="4471", recipient="customer-4471@example.com")
    errors = check(fulfilment, reserve, AUTHORIZE, SHIP, confirm)
    # The confirmation now needs the shipment before it (which it has), no longer the
    # capture itself: the shipment needs the capture, so only the shipment is refused.
    assert [(e.code, e.path) for e in errors] == [
        (ErrorCode.MISSING_STEP, "steps"),
        (ErrorCode.MISSING_PREREQUISITE, "steps[2]"),
    ]


def test_parallel_group_holds_only_compensable_steps(fulfilment) -> None:
    errors = check(fulfilment, {"parallel": [RESERVE, CAPTURE]})
    error = only(errors)
    assert error.code is ErrorCode.PARALLEL_NOT_COMPENSABLE
    assert (error.index, error.path) == (1, "steps[0].parallel[1]")


def test_parallel_group_of_compensable_steps_is_valid(checkout, services) -> None:
    order_o(services, ("sku-1", 1), ("lamp", 1))
    # one warehouse: the reservations of a plan must agree on it
    other = call("reserve_stock", order_id="o", sku="lamp", quantity=1)
    assert check(checkout, {"parallel": [RESERVE, other]}, CHARGE) == []


def test_precondition_failed(checkout, services) -> None:
    order_o(services, ("nope", 1))  # an order of a product no warehouse stocks
    unknown = call("reserve_stock", order_id="o", sku="nope", quantity=1)
    error = only(check(checkout, unknown, CHARGE))
    assert error.code is ErrorCode.PRECONDITION_FAILED
    assert (error.index, error.path) == (0, "steps[0]")
    assert "warehouse A does not stock nope" in error.message
    plan = parse_plan({"catalogue": "checkout", "steps": [unknown, CHARGE]})
    assert validate(plan, checkout, preconditions=False, facts=FACTS) == []


def test_precondition_of_the_pivot_reads_current_state(fulfilment, services) -> None:
    error = only(check(fulfilment, RESERVE, call("capture_payment", order_id="x", amount="1")))
    assert error.code is ErrorCode.PRECONDITION_FAILED
    assert "order x does not exist" in error.message
    services.set_order_status("4471", "cancelled")
    assert "order 4471 is cancelled" in only(check(fulfilment, RESERVE, CAPTURE)).message


def test_every_error_is_reported_at_once(fulfilment) -> None:
    errors = check(
        fulfilment,
        CAPTURE,
        call("reserv_stock", order_id="o"),
        call("void_authorization", order_id="o"),
        call("reserve_stock", order_id="o", sku="nope", quantity=1),
        call("authorize_payment", order_id="o", amount="501"),
        CAPTURE,
        {"parallel": []},
        {"parallel": [SHIP]},
    )
    codes = [e.code for e in errors]
    assert set(codes) == {
        ErrorCode.UNKNOWN_STEP,
        ErrorCode.UNDO_NOT_CALLABLE,
        ErrorCode.KIND_ORDER,
        ErrorCode.PRECONDITION_FAILED,
        ErrorCode.INVALID_ARGS,
        ErrorCode.MULTIPLE_PIVOTS,
        ErrorCode.EMPTY_PARALLEL,
        ErrorCode.PARALLEL_NOT_COMPENSABLE,
    }
    assert [e.to_dict()["code"] for e in errors] == [c.value for c in codes]


def test_plan_error_to_dict() -> None:
    error = PlanError(ErrorCode.EMPTY_PLAN, "no steps", path="steps")
    assert error.to_dict() == {
        "code": "empty_plan",
        "message": "no steps",
        "index": None,
        "path": "steps",
        "step": None,
    }
    assert PlanError(ErrorCode.UNKNOWN_STEP, "x", index=3).where() == "step 3"
    assert PlanError(ErrorCode.UNKNOWN_STEP, "x").where() == "plan"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"catalogue": "checkout", "steps": [', "Invalid JSON"),
        ("not json at all", "Invalid JSON"),
        ('{"steps": []}', "catalogue: Field required"),
        ('{"catalogue": "checkout"}', "steps: Field required"),
        ('{"catalogue": "checkout", "steps": [], "extra": 1}', "extra: Extra inputs"),
        ('{"catalogue": "checkout", "steps": [{"args": {}}]}', "steps.0"),
        ('{"catalogue": "", "steps": []}', "catalogue: String should have at least 1"),
    ],
)
def test_malformed_plans_raise_a_clear_parse_error(text: str, fragment: str) -> None:
    with pytest.raises(PlanParseError) as raised:
        parse_plan(text)
    assert raised.value.message.startswith("malformed plan: ")
    assert fragment in raised.value.message
    assert raised.value.code == "plan_malformed"


def test_parse_accepts_text_bytes_and_mappings() -> None:
    data = {"catalogue": "checkout", "steps": [RESERVE], "rationale": "why"}
    plan = parse_plan(data)
    assert parse_plan(plan.to_json()) == plan
    assert parse_plan(plan.to_json().encode()) == plan
    assert parse_plan(plan.to_json()).digest() == plan.digest()
    assert parse_plan({**data, "rationale": "other"}).digest() != plan.digest()


def test_calls_are_flattened_with_their_json_paths() -> None:
    steps = [RESERVE, {"parallel": [RESERVE, CHARGE]}, CHARGE]
    calls = parse_plan({"catalogue": "checkout", "steps": steps}).calls()
    assert [(f.index, f.group, f.path) for f in calls] == [
        (0, None, "steps[0]"),
        (1, 1, "steps[1].parallel[0]"),
        (2, 1, "steps[1].parallel[1]"),
        (3, None, "steps[2]"),
    ]


@settings(max_examples=400, deadline=None)
@given(
    value=st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(10**25), max_value=10**25),
        st.text(max_size=60),
        st.text(alphabet="\U0001f600\U00010000a", max_size=30),  # surrogate pairs in JSON
        st.text(alphabet='\x00\x01\x1f"\\\u2028\ud7ff', max_size=60),
        st.lists(st.integers(), max_size=5),
    ),
    limit=st.integers(min_value=1, max_value=400),
)
def test_an_argument_skipped_by_the_size_shortcut_really_fits(value: object, limit: int) -> None:
    """The validator encodes an argument to measure it only when it might be too large."""
    if surely_fits(value, limit):
        assert len(json.dumps(value, default=str)) <= limit


def test_an_argument_of_escaped_characters_is_measured_as_json() -> None:
    catalogue = Catalogue("limits", limits=PlanLimits(max_argument=40))

    @catalogue.compensable(undo=lambda args, result, ctx: None)
    async def note(args: Note, ctx: object) -> None:
        return None

    fits = parse_plan(
        {"catalogue": "limits", "steps": [{"name": "note", "args": {"text": "a" * 6}}]}
    )
    escaped = parse_plan(
        {"catalogue": "limits", "steps": [{"name": "note", "args": {"text": "\x01" * 7}}]}
    )
    assert validate(fits, catalogue) == []
    assert [e.code for e in validate(escaped, catalogue)] == ["argument_too_large"]


def test_a_plans_digest_never_changes() -> None:
    """Ledgers compare a resubmitted plan with the digest stored when it was first
    submitted: the canonical form (sorted keys, compact, ASCII) must stay as it is."""
    plan = parse_plan(
        {
            "catalogue": "checkout",
            "steps": [
                {"name": "reserve", "args": {"sku": "é-1", "qty": 2, "price": 1.5}},
                {"parallel": [{"name": "a", "args": {}}]},
            ],
            "rationale": "why ✓",
        }
    )
    assert plan.digest() == "fe0c51bbad171186dd61222581a28c88bfec965ae69e3a25a8bcf8d145f71f43"
