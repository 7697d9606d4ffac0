"""The one way a new plan becomes a saga: ``admit`` runs the stages over what it is given
(the plan, its catalogue, the app's facts and rates, what the ledger holds reserved) and
reads the verdict from ``pivotal.admission.table``. Every path that records a new saga
passes here (``Orchestrator.submit``, ``submit_aborted``, ``submit_leased``, ``execute``;
through them the HTTP API, the CLI, the MCP tools, the ADK agent, the planning loop, forks
and re-runs). It writes nothing: the orchestrator writes what the verdict says."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal

from pivotal import agent_reasons, saga_ids
from pivotal.admission.records import rollout_run
from pivotal.admission.table import Above, Finding, Row, Verdict, decide
from pivotal.app import App
from pivotal.catalogue import KIND_TEXT, Catalogue
from pivotal.errors import PivotalError, PlanRejected, RolloutRefused, RolloutShadowed
from pivotal.exposure import (
    Exposure,
    Moved,
    NoRate,
    TooMany,
    moved_by,
    reserved_by_others,
    subject_kind,
)
from pivotal.identity import identity_of
from pivotal.plan import ActorType, FlatCall, Plan
from pivotal.policy import Rollout
from pivotal.serving import catalogue_digest
from pivotal.state import Event, EventType, SagaState, apply
from pivotal.store.base import Store
from pivotal.store.planning_records import PlanningRun
from pivotal.validation import Checked, checked_bounded


@dataclass(frozen=True)
class Admission:
    """What admission decided for a plan: the row of the table, and what to write."""

    row: Row
    found: Checked  # what validating the plan found
    state: SagaState | None = None  # the saga to record (ADMIT)
    event: Event | None = None  # its first event: subjects, reservations, the rollout's mark
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


async def admit(
    plan: Plan,
    saga_id: str | None,
    *,
    app: App,
    store: Store,
    now: float,
    trace: Callable[[str], dict[str, str]],
) -> Admission:
    """Run the stages over ``plan`` and return the verdict with what to write (``trace``:
    the saga's trace context for its first event, given its id)."""
    catalogue = app.catalogue(plan.catalogue)
    found = await checked_bounded(plan, catalogue, facts=app.facts)
    if found.errors:
        return Admission(decide(Finding.INVALID, Above.ANY), found)
    given, saga_id = saga_id, saga_id or saga_ids.new()
    event = submitted(plan, catalogue, found, saga_id, now, trace(saga_id))
    rollout = catalogue.rollout
    if rollout is None:
        return _admitted(Finding.NO_ROLLOUT, found, event)
    if plan.provenance.actor_type is not ActorType.AGENT:
        return _admitted(Finding.NOT_AN_AGENT, found, event)
    setting = rollout.describe()
    no_rate = ""
    try:
        moved = tuple(moved_by(found.calls, catalogue, found.args))
        prior = await _reserved(store, rollout, catalogue, moved, saga_id, now)
        exposure: Decimal | None = rollout.measure(Exposure(moved, prior, app.rates), catalogue)
    except (NoRate, TooMany) as exc:
        exposure, no_rate = None, str(exc)
    if exposure is not None and exposure < rollout.execute_below:
        marked = {"exposure": f"{exposure:f}", "setting": setting}
        return _admitted(
            Finding.BELOW, found, replace(event, data={**event.data, "rollout": marked})
        )
    if given is not None and await store.load(given) is not None:  # recorded: returned as is
        return _admitted(Finding.RECORDED, found, event)
    if exposure is None:
        finding = Finding.UNCOUNTABLE
        why = (
            f"what the plan exposes cannot be counted ({no_rate}) for the rollout of "
            f"catalogue {plan.catalogue!r} ({setting})"
        )
    else:
        finding = Finding.NOT_BELOW
        why = (
            f"the plan exposes {exposure:f}, not below the rollout limit "
            f"{rollout.execute_below:f} of catalogue {plan.catalogue!r} ({setting})"
        )
    row = decide(finding, Above(rollout.above))
    assert row.code is not None
    counted = exposure if exposure is not None else "uncountable"
    shadow = row.verdict is Verdict.SHADOW
    run = rollout_run(plan, now, shadow, row.code, why, setting, counted)
    return Admission(row, found, run=run, why=why)


def _admitted(finding: Finding, found: Checked, event: Event) -> Admission:
    return Admission(decide(finding, Above.ANY), found, apply(None, event), event)


async def _reserved(
    store: Store,
    rollout: Rollout,
    catalogue: Catalogue,
    moved: tuple[Moved, ...],
    saga_id: str,
    now: float,
) -> tuple[Moved, ...]:
    """What other sagas hold reserved for the subjects ``moved`` names, over the
    rollout's window (nothing without one). A saga racing this one may not be in the
    ledger yet: the gate reads the reservations again once this saga is (``Gates``)."""
    window = rollout.window_for(catalogue)
    kind = subject_kind(catalogue, window.by) if window is not None else None
    if window is None or kind is None:
        return ()
    since = now - window.seconds
    return await reserved_by_others(store, moved, kind, since, window.limit, saga_id)


def submitted(
    plan: Plan,
    catalogue: Catalogue,
    found: Checked,
    saga_id: str,
    now: float,
    trace: dict[str, str],
) -> Event:
    """The first event of the saga ``plan`` becomes: its steps, the subjects it names and
    the value it reserves, as validating it found them."""
    return Event(
        type=EventType.SAGA_SUBMITTED,
        at=now,
        seq=1,
        data={
            "saga_id": saga_id,
            "catalogue": plan.catalogue,
            "plan_digest": plan.digest(),
            # the build of the catalogue it was planned against (for display; what
            # decides whether a process can run it is ``steps``: ``serving.unserved``)
            "catalogue_digest": catalogue_digest(catalogue),
            "provenance_ref": plan.provenance.ref(),
            "rationale": plan.rationale,
            **trace,
            "steps": [
                {
                    "name": f.call.name,
                    "kind": KIND_TEXT[catalogue[f.call.name].kind],
                    "group": f.group,
                }
                for f in found.calls
            ],
            **subjects(catalogue, found.calls),
            **reserves(catalogue, found),
        },
    )


def subjects(catalogue: Catalogue, calls: list[FlatCall]) -> dict[str, dict[str, list[str]]]:
    """``{"subjects": {argument: [canonical ids]}}``: the entities the plan names, which
    the ledger indexes (for exposure across sagas); nothing when it names none."""
    named: dict[str, set[str]] = {}
    for flat in calls:
        fields = catalogue[flat.call.name].args_model.model_fields
        for name, value in flat.call.args.items():
            identity = identity_of(fields.get(name))
            if identity is not None and isinstance(value, str):
                named.setdefault(name, set()).add(identity.canonical(value))
    if not named:
        return {}
    return {"subjects": {name: sorted(values) for name, values in sorted(named.items())}}


def reserves(catalogue: Catalogue, found: Checked) -> dict[str, list[dict[str, object]]]:
    """``{"reserves": [...]}``: the value the plan moves as its steps declare it, from the
    arguments as parsed (defaults filled in); the ledger reserves it per subject with the
    saga, in the transaction that creates it. Nothing when it moves nothing."""
    moved = moved_by(found.calls, catalogue, found.args)
    return {"reserves": [m.to_json() for m in moved]} if moved else {}
