"""A catalogue described for the people and agents that read it: its steps (name, kind,
the first line of its description, the JSON Schema of its arguments), its approval policy,
its rollout and its rules, each in words.

One description for every surface: the HTTP API's ``GET /v1/catalogues`` (and one by
name) and MCP's ``list_catalogues`` (which keeps, of it, the name, the description and the
step names). As in ``planning.render``, nothing about how a step is reversed, looked up or
checked is described: only forward steps, and the argument schemas a planner is shown."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.policy import ExposurePolicy, ThresholdPolicy, Window
from pivotal.planning.render import catalogue_schema


@dataclass(frozen=True, slots=True)
class StepDescription:
    name: str
    kind: str
    description: str
    args_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CatalogueDescription:
    name: str
    description: str
    steps: tuple[StepDescription, ...]
    approval: str
    rollout: str
    rules: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"steps": [asdict(s) for s in self.steps], "rules": list(self.rules)}


def describe_catalogue(catalogue: Catalogue) -> CatalogueDescription:
    """``catalogue`` described: what ``GET /v1/catalogues`` lists and MCP's
    ``list_catalogues`` shows."""
    schema = catalogue_schema(catalogue)
    defs: dict[str, Any] = schema["$defs"]
    steps = []
    for step in catalogue:
        args = dict(defs[f"call_{step.name}"]["properties"]["args"])
        prefix = f"args_{step.name}__"
        own = {k: v for k, v in defs.items() if k.startswith(prefix)}
        if own:  # the nested models its arguments refer to, where the refs point
            args["$defs"] = own
        first = step.description.strip().splitlines()[0] if step.description.strip() else ""
        steps.append(StepDescription(step.name, step.kind.value, first, args))
    return CatalogueDescription(
        name=catalogue.name,
        description=catalogue.description,
        steps=tuple(steps),
        approval=describe_approval(catalogue.approval),
        rollout=catalogue.rollout.describe()
        if catalogue.rollout is not None
        else "agent plans execute whatever they expose (no rollout limit)",
        rules=tuple(rule.describe() for rule in catalogue.rules),
    )


def _steps(names: frozenset[str] | None, default: str) -> str:
    return default if names is None else " and ".join(sorted(names))


def _tiers(by_tier: Any) -> str:
    if not by_tier:
        return ""
    shown = ", ".join(f"{limit:g} for tier {tier!r}" for tier, limit in sorted(by_tier.items()))
    return f" ({shown})"


def _across(window: Window | None) -> str:
    if window is None:
        return ""
    return f"; other sagas naming the same {window.by} within {window.seconds / 3600:g}h count too"


def describe_approval(policy: object) -> str:
    """The approval policy in one sentence (a policy of the app's own: its class's first
    docstring line, or its name)."""
    if policy is None:
        return "no approval policy: no step waits for a person"
    if isinstance(policy, ThresholdPolicy):
        what = _steps(policy.steps, "a pivot")
        text = (
            f"a person approves {what} when its {policy.field} exceeds "
            f"{policy.threshold:g}{_tiers(policy.by_tier)}"
        )
        if policy.two_approvers_above is not None:
            text += f"; above {policy.two_approvers_above:g} two people approve"
        return text + _across(policy.across)
    if isinstance(policy, ExposurePolicy):
        parts = []
        if policy.threshold is not None:
            counted = _steps(policy.counted, "every step")
            parts.append(
                f"a person approves a plan whose total {policy.field} over {counted} exceeds "
                f"{policy.threshold:g}{_tiers(policy.by_tier)}"
            )
        if policy.always:
            parts.append(f"a person always approves a plan calling {_steps(policy.always, '')}")
        if policy.two_approvers_above is not None:
            parts.append(f"above {policy.two_approvers_above:g} in all two people approve")
        return "; ".join(parts) + _across(policy.across)
    doc = (type(policy).__doc__ or "").strip()
    return doc.splitlines()[0] if doc else f"decided by {type(policy).__name__}"
