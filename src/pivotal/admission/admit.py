"""The one way a new plan becomes a saga: ``admit`` runs the stages (``STAGES``), in order,
over what the orchestrator read for it (``Given``), and reads the verdict from
``pivotal.admission.table``. Every path that records a new saga passes here
(``Orchestrator.submit``, ``submit_aborted``, ``submit_leased``, ``execute``; through them
the HTTP API, the CLI, the MCP tools, the ADK agent, the planning loop, forks and re-runs).
It writes nothing: the orchestrator writes what the verdict says."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from pivotal.admission.checks import FactSource, checked_bounded
from pivotal.admission.shape import Checked
from pivotal.admission.table import Above, Finding, Row, Verdict, decide
from pivotal.admission.value import Counted, Ledger, exposure, moved, submitted
from pivotal.declarations.catalogue import Catalogue
from pivotal.declarations.exposure import Rates
from pivotal.declarations.plan import ActorType, Plan
from pivotal.errors import PivotalError, PlanRejected, RolloutRefused, RolloutShadowed
from pivotal.sagas import agent_reasons, saga_ids
from pivotal.sagas.state import Event
from pivotal.store.planning_records import (
    Attempt,
    AttemptError,
    PlannerInfo,
    PlanningMode,
    PlanningOutcome,
    PlanningRun,
    PlanRequest,
)


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of admission: the function that runs it, what it reads, what it finds."""

    name: str
    runs: str  # the function, by its import path
    reads: str
    finds: str


STAGES: tuple[Stage, ...] = (
    Stage(
        "shape",
        "pivotal.admission.shape.shape",
        "the plan, its catalogue (and each step's precondition)",
        "errors of form: size, unknown steps, arguments, one pivot, the kinds in order; "
        "the calls and their arguments as parsed",
    ),
    Stage(
        "names",
        "pivotal.admission.checks.names",
        "the plan's provenance",
        "a name of the person the plan is for that folds to nothing, as four-eyes compares names",
    ),
    Stage(
        "facts and rules",
        "pivotal.admission.checks.check_rules",
        "the plan, its catalogue's rules, the app's trusted facts",
        "rule violations, facts that cannot be read, a call acting on another subject "
        "than the request's",
    ),
    Stage(
        "value moved",
        "pivotal.admission.value.moved",
        "the calls as parsed, the steps' declared moves",
        "the value each call moves, in its currency, never below 0 unless declared signed",
    ),
    Stage(
        "exposure",
        "pivotal.admission.value.exposure",
        "the value moved, what the ledger holds reserved for its subjects, the app's rates",
        "for an agent plan under a rollout: what it exposes, or that it cannot be counted",
    ),
)
"""The stages, in the order ``admit`` runs them; the first three are the validator every
surface uses (``pivotal.admission.validation``). Whether a person must approve is decided by the
gate before the point of no return, with the ledger as it is then (``pivotal.engine``)."""


@dataclass(frozen=True)
class Given:
    """What the orchestrator reads for admission: the plan and its digest, under the id its
    submitter gave (None: admission makes one), the catalogue it names and that catalogue's
    build (its digest), the ledger's time, the app's trusted facts and rates, the two reads
    of the ledger a rollout may make, and the trace context of the saga's first event."""

    plan: Plan
    digest: str
    saga_id: str | None
    catalogue: Catalogue
    build: str
    now: float
    facts: FactSource | None
    rates: Rates
    ledger: Ledger
    trace: Callable[[str], dict[str, str]]


@dataclass(frozen=True)
class Admission:
    """What admission decided for a plan: the row of the table, and what to write."""

    row: Row
    found: Checked  # what validating the plan found
    event: Event | None = None  # ADMIT: the saga's first event (its steps, subjects, reserves)
    run: PlanningRun | None = None  # the record a rollout keeps of a plan it held back
    why: str = ""  # for a person: what the rollout measured (never told to the agent)

    def refusal(self) -> PivotalError:
        """The error the submitter hears when the plan is not admitted."""
        if self.row.finding is Finding.INVALID:
            return PlanRejected(self.found.errors)
        assert self.run is not None
        if self.row.verdict is Verdict.SHADOW:  # the agent is told the outcome, never the limit
            return RolloutShadowed(
                agent_reasons.kept_in_shadow(self.run.run_id), self.run.run_id, detail=self.why
            )
        return RolloutRefused(agent_reasons.refused_by_rollout(self.run.catalogue), detail=self.why)


async def admit(given: Given) -> Admission:
    """Run the stages over what is ``given`` and return the verdict with what to write."""
    plan, catalogue = given.plan, given.catalogue
    found = await checked_bounded(plan, catalogue, facts=given.facts)  # shape, names, rules
    if found.errors:
        return Admission(decide(Finding.INVALID, Above.ANY), found)
    saga_id = given.saga_id or saga_ids.new()
    value = moved(found, catalogue)
    trace = given.trace(saga_id)
    made = (given.digest, given.build, trace)
    event = submitted(plan, catalogue, found, value, saga_id, given.now, made)
    rollout = catalogue.rollout
    if rollout is None:
        return Admission(decide(Finding.NO_ROLLOUT, Above.ANY), found, event)
    if plan.provenance.actor_type is not ActorType.AGENT:
        return Admission(decide(Finding.NOT_AN_AGENT, Above.ANY), found, event)
    ledger, now = given.ledger, given.now
    counted = await exposure(rollout, catalogue, value, saga_id, now, given.rates, ledger)
    if counted.below:
        marked = {"exposure": counted.text, "setting": rollout.describe()}
        event = replace(event, data={**event.data, "rollout": marked})
        return Admission(decide(Finding.BELOW, Above.ANY), found, event)
    if given.saga_id is not None and await given.ledger.load(given.saga_id) is not None:
        # recorded already: the orchestrator returns it as it is (or finds another plan)
        return Admission(decide(Finding.RECORDED, Above.ANY), found, event)
    return _held_back(plan, found, counted, given.now, Above(rollout.above))


def _held_back(plan: Plan, found: Checked, counted: Counted, now: float, above: Above) -> Admission:
    """The verdict for an agent plan at or above its rollout's limit, or that cannot be
    counted, and the planning run that keeps it for a person to read."""
    finding = Finding.UNCOUNTABLE if counted.amount is None else Finding.NOT_BELOW
    row = decide(finding, above)
    assert row.code is not None
    shadow = row.verdict is Verdict.SHADOW
    run = rollout_run(plan, now, shadow, row.code, counted.why, counted.setting, counted.text)
    return Admission(row, found, run=run, why=counted.why)


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
