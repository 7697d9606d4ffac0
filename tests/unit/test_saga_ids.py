"""The one rule of what a saga id may be, and every place that says or checks it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pivotal.errors import InvalidInput
from pivotal.sagas import saga_ids
from pivotal.views import saga_scope

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("saga_id", "kept"),
    [
        ("order-4471", True),
        ("a", True),
        ("A.b_c-9", True),
        ("x" * 128, True),
        ("x" * 129, False),
        ("", False),
        ("order 4471", False),
        ("order/4471", False),
        ("ordér", False),  # ASCII only
        ("order\n", False),
        ("order\x00", False),
    ],
)
def test_which_ids_the_ledger_keeps(saga_id: str, kept: bool) -> None:
    assert bool(saga_ids.pattern().match(saga_id)) is kept
    if kept:
        saga_ids.check(saga_id)
    else:
        with pytest.raises(InvalidInput, match=re.escape(saga_ids.rule())):
            saga_ids.check(saga_id)


def test_an_agents_own_id_leaves_room_for_its_namespace() -> None:
    assert saga_scope.MAX_ID == 96
    assert saga_ids.rule(96) == saga_scope.ID_RULE
    assert saga_ids.pattern(96).match("x" * 96)
    assert not saga_ids.pattern(96).match("x" * 97)
    stored = saga_scope.namespace("planner-bot") + "x" * saga_scope.MAX_ID
    assert saga_ids.pattern().match(stored)


def test_a_new_id_and_a_file_name_follow_the_rule() -> None:
    assert re.fullmatch(r"sg_[0-9a-f]{32}", saga_ids.new())
    assert saga_ids.as_file_name("a/b c\u202e") == "a_b_c_"
    assert saga_ids.as_file_name("") == "_"


def test_the_rule_is_written_in_one_place() -> None:
    """No other module spells the characters of an id out."""
    spelled = re.compile(r"A-Za-z0-9_\.\\?-\]\{1,")
    found = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "src" / "pivotal").rglob("*.py")
        if p.name != "saga_ids.py" and spelled.search(p.read_text())
    ]
    assert found == []
