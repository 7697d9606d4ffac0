"""Planning: turning requests into proposed plans, with bounded re-planning.

Planners (rules, a router, OpenAI-compatible models, scripted proposals) return data; the
loop validates every proposal, returns the errors for a re-plan, and escalates to a person
when the cap is reached. Shadow mode scores planners on real requests without executing.

Runs, attempts and escalations are kept by the store itself (``Store.record_run``,
``escalate``, ``escalations``...). The model planner (``OpenAIPlanner``, ``OpenAIConfig``)
is imported on first use, so that importing planning loads no HTTP client.
"""

from typing import TYPE_CHECKING

from pivotal.planning.base import (
    Attempt,
    AttemptError,
    Planner,
    PlannerInfo,
    PlannerTurn,
    PlanRequest,
    Proposal,
)
from pivotal.planning.commerce import commerce_rules
from pivotal.planning.errors import (
    EscalationClosed,
    EscalationNotFound,
    NoRuleMatched,
    PlannerConfigError,
    PlannerError,
    PlannerRefused,
    PlannerReplyMalformed,
    PlannerUnavailable,
    RequestInvalid,
)
from pivotal.planning.escalations import resolve_escalation
from pivotal.planning.ledger import PlanningLedger as PlanningLedger  # compatibility
from pivotal.planning.ledger import planning_ledger as planning_ledger  # compatibility
from pivotal.planning.loop import plan_and_submit, propose_plan
from pivotal.planning.records import (
    Escalation,
    EscalationStatus,
    PlanningMode,
    PlanningOutcome,
    PlanningRun,
)
from pivotal.planning.render import CatalogueView, catalogue_schema, render_catalogue
from pivotal.planning.router import RouterPlanner
from pivotal.planning.rules import Rule, RulePlanner
from pivotal.planning.scripted import ScriptedPlanner
from pivotal.planning.shadow import ShadowReport, read_requests, run_shadow, shadow_report
from pivotal.planning.spec import planner_from_spec

__all__ = [
    "Attempt",
    "AttemptError",
    "CatalogueView",
    "Escalation",
    "EscalationClosed",
    "EscalationNotFound",
    "EscalationStatus",
    "NoRuleMatched",
    "OpenAIConfig",
    "OpenAIPlanner",
    "PlanRequest",
    "Planner",
    "PlannerConfigError",
    "PlannerError",
    "PlannerInfo",
    "PlannerRefused",
    "PlannerReplyMalformed",
    "PlannerTurn",
    "PlannerUnavailable",
    "PlanningMode",
    "PlanningOutcome",
    "PlanningRun",
    "Proposal",
    "RequestInvalid",
    "RouterPlanner",
    "Rule",
    "RulePlanner",
    "ScriptedPlanner",
    "ShadowReport",
    "catalogue_schema",
    "commerce_rules",
    "plan_and_submit",
    "planner_from_spec",
    "propose_plan",
    "read_requests",
    "render_catalogue",
    "resolve_escalation",
    "run_shadow",
    "shadow_report",
]

if TYPE_CHECKING:
    from pivotal.planning.openai import OpenAIConfig, OpenAIPlanner


def __getattr__(name: str) -> object:
    """The model planner, imported when first asked for (it needs an HTTP client)."""
    if name in ("OpenAIConfig", "OpenAIPlanner"):
        from pivotal.planning.openai import OpenAIConfig, OpenAIPlanner

        found: object = OpenAIConfig if name == "OpenAIConfig" else OpenAIPlanner
        globals()[name] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
