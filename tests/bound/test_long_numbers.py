"""An integer longer than Python reads by default (4300 digits) is a clear refusal wherever
a plan is read, never an internal error: from JSON text (the CLI's file, the HTTP API's
body, MCP's arguments) or from a mapping (the Python API)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pivotal import PlanParseError, parse_plan
from pivotal.declarations.plan import MAX_DIGITS

PIVOTAL = str(Path(sys.executable).parent / "pivotal")


def text(digits: int) -> str:
    return '{"catalogue":"shop","steps":[{"name":"refund","args":{"amount":%s}}]}' % ("9" * digits)


@pytest.mark.parametrize("digits", [MAX_DIGITS + 1, 5000, 100_000])
def test_a_long_integer_in_json_text_is_a_parse_error_that_says_what_to_do(digits: int) -> None:
    with pytest.raises(PlanParseError) as raised:
        parse_plan(text(digits))
    said = str(raised.value)
    assert f"{digits} digits" in said
    assert f"at most {MAX_DIGITS}" in said
    assert "set_int_max_str_digits" not in said


def test_a_long_negative_integer_is_refused_the_same_way() -> None:
    with pytest.raises(PlanParseError, match=f"{MAX_DIGITS + 1} digits"):
        parse_plan(text(MAX_DIGITS + 1).replace(":9", ":-9"))


def test_an_integer_of_the_most_digits_read_is_read() -> None:
    plan = parse_plan(text(MAX_DIGITS))
    assert plan.steps[0].args["amount"] == int("9" * MAX_DIGITS)  # type: ignore[union-attr]


def test_a_long_integer_in_a_mapping_is_a_parse_error_too() -> None:
    data = json.loads(text(10))
    data["steps"][0]["args"]["amount"] = 10**5000
    with pytest.raises(PlanParseError, match="5001 digits") as raised:
        parse_plan(data)
    assert "set_int_max_str_digits" not in str(raised.value)


def test_the_cli_refuses_it_as_a_malformed_plan(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(text(5000))
    done = subprocess.run(
        [PIVOTAL, "validate", str(plan)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    assert "internal_error" not in done.stderr + done.stdout
    assert "5000 digits" in done.stderr + done.stdout
