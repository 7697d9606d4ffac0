"""Planners named on the command line."""

from __future__ import annotations

import json

import pytest

from pivotal import ActorType
from pivotal.planning import (
    OpenAIPlanner,
    PlannerConfigError,
    RouterPlanner,
    Rule,
    RulePlanner,
    ScriptedPlanner,
    planner_from_spec,
)

LOCAL = {"PIVOTAL_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}
MY_RULES = (Rule("only", "tiny", ("x",), lambda request: []),)


def my_rules() -> tuple[Rule, ...]:
    return MY_RULES


def test_rules_default_to_the_commerce_table() -> None:
    planner = planner_from_spec("rules")
    assert isinstance(planner, RulePlanner)
    assert [r.name for r in planner.rules] == ["fulfil", "checkout"]
    assert planner.info.actor_type is ActorType.SYSTEM


def test_a_rule_table_of_your_own() -> None:
    planner = planner_from_spec(f"rules:{__name__}:my_rules")
    assert isinstance(planner, RulePlanner)
    assert planner.rules == MY_RULES
    with pytest.raises(PlannerConfigError, match="not a sequence of pivotal Rule"):
        planner_from_spec(f"rules:{__name__}:LOCAL")
    with pytest.raises(PlannerConfigError, match="cannot load rules"):
        planner_from_spec("rules:no.such.module:rules")


def test_model_planners_read_the_given_environment() -> None:
    planner = planner_from_spec("openai:llama3.1:8b", LOCAL)
    assert isinstance(planner, OpenAIPlanner)
    assert planner.config.model == "llama3.1:8b"  # Ollama tags keep their colon
    assert planner.config.base_url == LOCAL["PIVOTAL_OPENAI_BASE_URL"]
    assert planner.info.actor_type is ActorType.AGENT
    router = planner_from_spec("router:qwen", LOCAL)
    assert isinstance(router, RouterPlanner)
    assert router.info.model == "qwen"


def test_a_scripted_planner_from_a_file(tmp_path) -> None:
    path = tmp_path / "plans.json"
    path.write_text(json.dumps([{"steps": []}, {"steps": [1]}]))
    planner = planner_from_spec(f"scripted:{path}")
    assert isinstance(planner, ScriptedPlanner)
    assert len(planner.script) == 2
    path.write_text("{}")
    with pytest.raises(PlannerConfigError, match="JSON list"):
        planner_from_spec(f"scripted:{path}")


@pytest.mark.parametrize("spec", ["", "openai", "openai:", "gpt-4o", "router:"])
def test_unknown_specs_are_refused(spec) -> None:
    with pytest.raises(PlannerConfigError, match="unknown planner"):
        planner_from_spec(spec, LOCAL)
