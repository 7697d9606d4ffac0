"""Planners named on the command line: ``rules``, ``openai:MODEL``, ``router:MODEL``..."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from pivotal.planning.base import Planner
from pivotal.planning.commerce import commerce_rules
from pivotal.planning.errors import PlannerConfigError
from pivotal.planning.router import RouterPlanner
from pivotal.planning.rules import Rule, RulePlanner
from pivotal.planning.scripted import ScriptedPlanner

SPECS = (
    "rules (the bundled commerce rule table), rules:MODULE:ATTR (your rule table), "
    "openai:MODEL, router:MODEL (rules first, then openai:MODEL), scripted:PLANS.json"
)


def load_rules(target: str) -> RulePlanner:
    """A rule table from ``module:attribute`` (a sequence of ``Rule`` or a callable)."""
    module_name, _, attr = target.partition(":")
    try:
        found: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise PlannerConfigError(f"cannot load rules {target!r}: {exc}") from None
    if callable(found):
        found = found()
    if isinstance(found, RulePlanner):
        return found
    rules = tuple(found) if isinstance(found, list | tuple) else ()
    if not rules or not all(isinstance(r, Rule) for r in rules):
        raise PlannerConfigError(f"{target!r} is not a sequence of pivotal Rule objects")
    return RulePlanner(rules, actor_id=f"rules:{target}")


def planner_from_spec(spec: str, env: Mapping[str, str] | None = None) -> Planner:
    """Build the planner ``spec`` names; the model endpoint is configured from ``env``."""
    kind, _, rest = spec.partition(":")
    if kind == "rules":
        return load_rules(rest) if rest else RulePlanner(commerce_rules(), actor_id="rules")
    if kind in ("openai", "router") and rest:
        # only a model planner needs an HTTP client: import it when one is asked for
        from pivotal.planning.openai import OpenAIConfig, OpenAIPlanner

        model = OpenAIPlanner(OpenAIConfig.from_env(rest, env))
        return model if kind == "openai" else RouterPlanner(RulePlanner(commerce_rules()), model)
    if kind == "scripted" and rest:
        return ScriptedPlanner.from_file(rest)
    raise PlannerConfigError(f"unknown planner {spec!r}; use one of: {SPECS}")
