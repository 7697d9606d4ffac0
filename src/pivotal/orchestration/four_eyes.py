"""Four-eyes: who may not approve a saga, and who a plan must say it is for. One rule for
every surface.

``Orchestrator`` enforces ``check`` in its one decision (``approve``), so the HTTP API, the
approver's pages, the CLI and anything built later share it: a surface only maps
``FourEyesError`` to its answer (the API: 403 ``four_eyes``) and shows ``why_not`` before a
person tries (the page hides its approve form and says why). Rejecting is not restricted:
anyone allowed to decide may say no (it only compensates).

Whoever asked for the saga to run again may not approve it either: the person who asked
for the re-run of a compensated saga (``provenance.rerun_of.by``, which ``Orchestrator.rerun``
records), whoever forked it from a finished saga with arguments changed
(``provenance.forked_from.by``, which ``Orchestrator.fork`` records) and every person who
resumed it after it was parked (the ``saga_resumed`` events' ``by``). Else one could
reject a saga, re-run (or fork) it and approve the new saga alone.

People are compared by ``principals.canonical_person``: "Alice", "alice\\u200b " and
"\\u0430lice" (a Cyrillic "a") are one; a name that folds to nothing names no one.

A plan may have to name the person it is for (``provenance.on_behalf_of``): an agent's token
may require it on every submission (``require_on_behalf_of``, checked by each surface that
authenticates one, with ``require_on_behalf_of`` here), and a catalogue above an amount
(the plan rule ``rules.OnBehalfOfAbove``, checked with every other rule when the plan is
validated).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pivotal.declarations.plan_errors import ErrorCode, PlanError
from pivotal.errors import FourEyesError, OnBehalfOfRequired
from pivotal.people.principals import canonical_person
from pivotal.sagas.state import ApprovalStatus, Event, EventType

if TYPE_CHECKING:
    from pivotal.declarations.plan import Plan
    from pivotal.store.base import StoredSaga


def why_not(approver: str, saga: StoredSaga, events: Iterable[Event]) -> str | None:
    """Why ``approver`` may not approve ``saga`` (four-eyes), or None when they may: the
    principal that submitted it, the person it was asked for on behalf of, whoever asked
    for it to run again (its re-run, its fork, or a resume: read from ``events``, the saga's event
    log) and whoever approved it already (an approval that needs two needs two distinct
    people) may not."""
    who = canonical_person(approver)
    saga_id = saga.state.saga_id
    provenance = saga.plan.provenance
    if who == canonical_person(provenance.actor_id):
        return f"{approver} submitted saga {saga_id} and cannot approve it too"
    if provenance.on_behalf_of is not None and who == canonical_person(provenance.on_behalf_of):
        return f"saga {saga_id} was asked for on behalf of {approver}, who cannot approve it too"
    rerun = provenance.rerun_of
    if rerun is not None and who == canonical_person(rerun.by):
        return (
            f"{approver} asked for saga {saga_id} (the plan of saga {rerun.saga_id} run again) "
            "and cannot approve it too"
        )
    fork = provenance.forked_from
    if fork is not None and who == canonical_person(fork.by):
        return (
            f"{approver} forked saga {saga_id} from saga {fork.saga_id} and cannot approve it too"
        )
    if who in resumed_by(events):
        return f"{approver} resumed saga {saga_id} and cannot approve it too"
    approval = saga.state.approval
    if approval is not None and who in {canonical_person(a) for a in approval.approved_by}:
        other = "a second" if len(approval.approved_by) == 1 else "another"
        return (
            f"{approver} already approved saga {saga_id}, and one person counts once: its "
            f"approval needs {approval.required} distinct approvers, so {other}, different "
            "person must approve it; nothing was recorded"
        )
    return None


def resumed_by(events: Iterable[Event]) -> set[str]:
    """The canonical names of everyone who resumed the saga of ``events``."""
    return {
        canonical_person(str(e.data.get("by", "")))
        for e in events
        if e.type is EventType.SAGA_RESUMED
    } - {""}


def already_decided(saga: StoredSaga, *, raced: bool = False) -> str | None:
    """Why a decision on ``saga`` comes too late, when its approval was decided already
    (approved, rejected, or expired), saying by whom; None while it is pending, or when
    no approval was ever asked. ``raced``: the decision lost its commit to that one."""
    approval = saga.state.approval
    if approval is None or approval.status is ApprovalStatus.PENDING:
        return None
    saga_id = saga.state.saga_id
    step = saga.state.steps[approval.step].name if approval.step < len(saga.state.steps) else ""
    what = f"the approval of {step}" if step else "its approval"
    at = _when(approval.decided_at)
    if approval.status is ApprovalStatus.EXPIRED:
        verdict = f"{what} expired{at} before anyone decided"
    else:
        who = approval.approved_by if approval.status is ApprovalStatus.APPROVED else ()
        names = " and ".join(who) if who else (approval.approver or "someone")
        verdict = f"{what} was {approval.status.value} by {names}{at}"
    opening = (
        f"another person decided saga {saga_id} first"
        if raced
        else f"saga {saga_id} was already decided"
    )
    return f"{opening}: {verdict}; it is {saga.state.status.value} now, and nothing was recorded"


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return " at " + dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def check(approver: str, saga: StoredSaga, events: Iterable[Event]) -> None:
    """``FourEyesError`` with the reason when ``approver`` may not approve ``saga`` (whose
    event log is ``events``)."""
    reason = why_not(approver, saga, events)
    if reason is not None:
        raise FourEyesError(reason)


def names_whom(plan: Plan) -> bool:
    """Whether the plan names the person it is for (``Provenance.names_whom``)."""
    return plan.provenance.names_whom()


def on_behalf_of_missing(plan: Plan, submitter: str) -> PlanError | None:
    """What validation reports, for a token that requires the person a plan is for
    (``pivotal tokens create --require-on-behalf-of``), of a plan that does not name one;
    None when it does."""
    if names_whom(plan):
        return None
    return PlanError(
        ErrorCode.ON_BEHALF_OF_REQUIRED,
        f"the token of {submitter} requires provenance.on_behalf_of on every plan: name the "
        "person this plan is for",
        path="provenance.on_behalf_of",
    )


def require_on_behalf_of(plan: Plan, submitter: str) -> None:
    """``OnBehalfOfRequired`` unless the plan names the person it is for: for a token that
    requires it, on every submission (validation reports it: ``on_behalf_of_missing``)."""
    missing = on_behalf_of_missing(plan, submitter)
    if missing is not None:
        raise OnBehalfOfRequired(f"{missing.message}; nothing was recorded")
