"""Text holding a lone surrogate (a ``\\ud800``-``\\udfff`` escape without its pair) is no
character: a plan holding one is malformed wherever it is read, saying where, never taken
in to fail later where it is written out again. A pair (an emoji) is text like any."""

from __future__ import annotations

import pytest

from pivotal import PlanParseError, parse_plan


def text(rationale: str = "ok", sku: str = "sku-1", key: str = "sku") -> str:
    args = '{"' + key + '":"' + sku + '","quantity":1}'
    return (
        '{"catalogue":"checkout","rationale":"' + rationale + '","steps":'
        '[{"name":"reserve_stock","args":' + args + '},{"parallel":[]}]}'
    )


@pytest.mark.parametrize(
    ("plan", "where"),
    [
        (text(rationale="a\\ud800b"), "rationale"),
        (text(rationale="\\udc00"), "rationale"),
        (text(rationale="\\ude00\\ud83d"), "rationale"),  # the pair the wrong way round
        (text(sku="s\\ud83d"), "steps[0].args.sku"),
        (text(key="s\\udfffku"), "steps[0].args (a key)"),
    ],
)
def test_a_lone_surrogate_is_malformed_and_says_where(plan: str, where: str) -> None:
    with pytest.raises(PlanParseError) as raised:
        parse_plan(plan)
    assert str(raised.value).startswith(f"malformed plan: {where} holds a lone surrogate")


def test_a_pair_is_text_and_an_escaped_backslash_is_no_escape() -> None:
    assert parse_plan(text(rationale="\\ud83d\\ude00")).rationale == "\U0001f600"
    assert parse_plan(text(rationale="\\\\ud800")).rationale == "\\ud800"


def test_a_mapping_holding_one_is_malformed_too() -> None:
    import json

    data = json.loads(text())
    data["steps"][0]["args"]["sku"] = "s\udc80"
    with pytest.raises(PlanParseError, match=r"steps\[0\]\.args\.sku holds a lone surrogate"):
        parse_plan(data)
