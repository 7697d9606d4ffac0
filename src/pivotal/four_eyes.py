"""Four-eyes: who may not approve a saga, and who a plan must say it is for. One rule for
every surface.

``Orchestrator`` enforces ``check`` in its one decision (``approve``), so the HTTP API, the
approver's pages, the CLI and anything built later share it: a surface only maps
``FourEyesError`` to its answer (the API: 403 ``four_eyes``) and shows ``why_not`` before a
person tries (the page hides its approve form and says why). Rejecting is not restricted:
anyone allowed to decide may say no (it only compensates).

People are compared by ``principals.canonical_person``: "Alice" and "alice\\u200b " are one.

A plan may have to name the person it is for (``provenance.on_behalf_of``): an agent's token
may require it on every submission (``require_on_behalf_of``, checked by each surface that
authenticates one, with ``require_on_behalf_of`` here), and a catalogue above an amount
(the plan rule ``rules.OnBehalfOfAbove``, checked with every other rule when the plan is
validated).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from pivotal.errors import FourEyesError, OnBehalfOfRequired
from pivotal.principals import canonical_person
from pivotal.state import ApprovalStatus

if TYPE_CHECKING:
    from pivotal.plan import Plan
    from pivotal.store.base import StoredSaga


def why_not(approver: str, saga: StoredSaga) -> str | None:
    """Why ``approver`` may not approve ``saga`` (four-eyes), or None when they may: the
    principal that submitted it, the person it was asked for on behalf of, and whoever
    approved it already (an approval that needs two needs two distinct people) may not."""
    who = canonical_person(approver)
    saga_id = saga.state.saga_id
    provenance = saga.plan.provenance
    if who == canonical_person(provenance.actor_id):
        return f"{approver} submitted saga {saga_id} and cannot approve it too"
    if provenance.on_behalf_of is not None and who == canonical_person(provenance.on_behalf_of):
        return f"saga {saga_id} was asked for on behalf of {approver}, who cannot approve it too"
    approval = saga.state.approval
    if approval is not None and who in {canonical_person(a) for a in approval.approved_by}:
        other = "a second" if len(approval.approved_by) == 1 else "another"
        return (
            f"{approver} already approved saga {saga_id}, and one person counts once: its "
            f"approval needs {approval.required} distinct approvers, so {other}, different "
            "person must approve it; nothing was recorded"
        )
    return None


def already_decided(saga: StoredSaga) -> str | None:
    """Why a decision on ``saga`` comes too late, when its approval was decided already
    (approved, rejected, or expired), saying by whom; None while it is pending, or when
    no approval was ever asked."""
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
    return (
        f"saga {saga_id} was already decided: {verdict}; it is {saga.state.status.value} "
        "now, and nothing was recorded"
    )


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return " at " + dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def check(approver: str, saga: StoredSaga) -> None:
    """``FourEyesError`` with the reason when ``approver`` may not approve ``saga``."""
    reason = why_not(approver, saga)
    if reason is not None:
        raise FourEyesError(reason)


def names_whom(plan: Plan) -> bool:
    """Whether the plan names the person it is for (a name of only blanks names no one)."""
    return bool(canonical_person(plan.provenance.on_behalf_of or ""))


def require_on_behalf_of(plan: Plan, submitter: str) -> None:
    """``OnBehalfOfRequired`` unless the plan names the person it is for: for a token that
    requires it (``pivotal tokens create --require-on-behalf-of``), on every submission."""
    if not names_whom(plan):
        raise OnBehalfOfRequired(
            f"the token of {submitter} requires provenance.on_behalf_of on every plan: name "
            "the person this plan is for; nothing was recorded"
        )
