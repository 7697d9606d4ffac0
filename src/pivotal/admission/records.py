"""The record a rollout leaves of an agent plan it held back: a shadow planning run."""

from __future__ import annotations

import uuid

from pivotal.plan import Plan
from pivotal.store.planning_records import (
    Attempt,
    AttemptError,
    PlannerInfo,
    PlanningMode,
    PlanningOutcome,
    PlanningRun,
    PlanRequest,
)

ROLLOUT_BATCH = "rollout"  # the batch id of the planning runs a rollout records (report.py)


def rollout_run(
    plan: Plan,
    at: float,
    shadow: bool,
    code: str,
    why: str,
    setting: str,
    exposure: object,
) -> PlanningRun:
    """The record of an agent plan a rollout held back: a shadow planning run, accepted
    (validated, kept, never run) or rejected (refused; the plan kept for review only)."""
    prov = plan.provenance
    by = PlannerInfo(
        actor_type=prov.actor_type,
        actor_id=prov.actor_id[:200] or "unknown",
        model=prov.model,
        prompt_version=prov.prompt_version,
    )
    errors = () if shadow else (AttemptError(code=code, message=why),)
    attempt = Attempt(
        n=1,
        by=by,
        plan=plan.model_dump(mode="json"),
        rationale=plan.rationale,
        errors=errors,
        accepted=shadow,
        at=at,
    )
    return PlanningRun(
        run_id=f"ro_{uuid.uuid4().hex}",
        mode=PlanningMode.SHADOW,
        request=PlanRequest(
            text=plan.rationale[:8000],
            context={"rollout": setting, "exposure": str(exposure), "code": code},
            catalogue=plan.catalogue,
            source_document_id=prov.source_document_id,
        ),
        catalogue=plan.catalogue,
        planner=by,
        attempts=(attempt,),
        outcome=PlanningOutcome.ACCEPTED if shadow else PlanningOutcome.REJECTED,
        plan=plan if shadow else None,
        batch_id=ROLLOUT_BATCH,
        created_at=at,
    )
