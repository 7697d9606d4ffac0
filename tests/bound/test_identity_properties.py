"""One spelling per entity, as properties: two spellings that canonicalise alike are treated
alike by every rule, and two that do not are two entities."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from pivotal import Catalogue, StepContext, parse_plan, validate
from pivotal.admission.validation import check_rules
from pivotal.declarations.identity import MONEY, Identity, OrderId, canonical_text, comparable
from pivotal.declarations.rules import Agree, FromFact

KNOWN = "A-4471"  # the one order the trusted system knows: it totals 10

base_ids = st.text(alphabet="0123456789ABCabc-", min_size=1, max_size=8)
SPACES = [" ", "\t", "\n", "\u00a0", "\u3000", "\u2003"]
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e"]


def full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


@st.composite
def spellings(draw: st.DrawFn, base: st.SearchStrategy[str] = base_ids) -> str:
    """Another spelling of an id: space around it, invisible characters in it, some of
    its characters full-width."""
    text = draw(base)
    chars = [full_width(c) if draw(st.booleans()) else c for c in text]
    for _ in range(draw(st.integers(0, 2))):
        chars.insert(draw(st.integers(0, len(chars))), draw(st.sampled_from(INVISIBLE)))
    before = "".join(draw(st.lists(st.sampled_from(SPACES), max_size=2)))
    after = "".join(draw(st.lists(st.sampled_from(SPACES), max_size=2)))
    return before + "".join(chars) + after


any_ids = st.one_of(
    base_ids, spellings(), st.text(max_size=10), st.just(KNOWN), spellings(st.just(KNOWN))
)


class Pay(BaseModel):
    model_config = ConfigDict(extra="forbid")
    order_id: OrderId
    amount: Annotated[Decimal, MONEY]


def shop() -> Catalogue:
    catalogue = Catalogue("shop", rules=[Agree("order_id"), FromFact("amount")])

    async def undo(args: Any, result: Any, ctx: StepContext) -> None:
        return None

    @catalogue.compensable(undo=undo)
    async def hold(args: Pay, ctx: StepContext) -> None:
        return None

    @catalogue.pivot()
    async def capture(args: Pay, ctx: StepContext) -> None:
        return None

    return catalogue


SHOP = shop()
ASKED: list[Mapping[str, object]] = []


def facts(context: Mapping[str, object]) -> Mapping[str, object]:
    ASKED.append(dict(context))
    return {"amount": "10"} if context.get("order_id") == KNOWN else {}


def plan(first: str, second: str, amount: str = "10") -> Any:
    return parse_plan(
        {
            "catalogue": "shop",
            "steps": [
                {"name": "hold", "args": {"order_id": first, "amount": amount}},
                {"name": "capture", "args": {"order_id": second, "amount": amount}},
            ],
        }
    )


def codes(errors: list[Any]) -> list[tuple[str, int | None]]:
    return [(e.code.value, e.index) for e in errors]


@given(st.text(max_size=20))
def test_the_canonical_spelling_is_a_fixed_point(text: str) -> None:
    once = canonical_text(text)
    assert canonical_text(once) == once
    assert once == once.strip()
    assert all(unicodedata.category(c) != "Cf" for c in once)
    assert unicodedata.normalize("NFKC", once) == once


@given(any_ids, any_ids)
def test_two_spellings_are_one_entity_exactly_when_they_canonicalise_alike(a: str, b: str) -> None:
    info = Pay.model_fields["order_id"]
    alike = canonical_text(a) == canonical_text(b)
    assert (comparable(a, info) == comparable(b, info)) is alike


@settings(max_examples=300)
@given(any_ids, any_ids, st.sampled_from(["10", "1", "10.00"]))
def test_every_rule_judges_a_call_by_the_entity_it_names(a: str, b: str, amount: str) -> None:
    """The rules over raw calls (as a plan check sees them, spellings included): the calls
    agree exactly when they name one entity, and each call's amount is checked against the
    facts of the entity it names — never skipped because the calls disagree."""
    ASKED.clear()
    found = codes(check_rules(plan(a, b, amount), SHOP, facts))
    same = canonical_text(a) == canonical_text(b)
    assert (("arguments_disagree", 1) in found) is not same
    for index, spelled in enumerate((a, b)):
        known = canonical_text(spelled) == KNOWN
        right = known and Decimal(amount) == 10
        assert (("fact_mismatch", index) in found) is (known and not right)
        assert (("fact_unavailable", index) in found) is (not known)
    # the facts were asked with each entity's one spelling, once per entity (and once for
    # the plan as a whole, which names no one order when its calls disagree)
    asked = [c["order_id"] for c in ASKED if "order_id" in c]
    assert sorted(asked) == sorted({canonical_text(a), canonical_text(b)})


@settings(max_examples=200)
@given(spellings(st.just(KNOWN)))
def test_a_plan_must_write_the_one_spelling_and_is_told_which(spelled: str) -> None:
    errors = validate(plan(KNOWN, spelled), SHOP, facts=facts)
    if spelled == KNOWN:
        assert errors == []
        return
    assert codes(errors) == [("not_canonical", 1)]
    assert repr(KNOWN) in errors[0].message
    assert errors[0].path == "steps[1].args.order_id"


@given(any_ids)
def test_what_names_no_known_order_never_passes(spelled: str) -> None:
    errors = validate(plan(spelled, spelled), SHOP, facts=facts)
    assert (errors == []) is (spelled == KNOWN)


def test_an_identity_declared_by_hand_folds_its_case() -> None:
    class Ship(BaseModel):
        warehouse: Annotated[str, Identity("warehouse", fold="upper"), Field(pattern="^[A-Z]$")]

    info = Ship.model_fields["warehouse"]
    assert comparable("b", info) == comparable("B", info)
    assert Ship.model_validate({"warehouse": "B"}).warehouse == "B"
    with pytest.raises(ValueError, match="use 'B'"):
        Ship.model_validate({"warehouse": "b"})
