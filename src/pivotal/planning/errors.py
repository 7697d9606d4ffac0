"""Errors raised while planning: a planner that produced no usable proposal, and the ledger's
escalation records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pivotal.errors import InvalidInput, PivotalError

# Raised by the ledger when an escalation is closed; defined beside the store's records.
from pivotal.store.planning_records import EscalationClosed as EscalationClosed
from pivotal.store.planning_records import EscalationNotFound as EscalationNotFound

if TYPE_CHECKING:
    from pivotal.planning.base import PlannerInfo


class PlannerError(PivotalError):
    """The planner produced no usable proposal; the attempt counts as failed.

    ``final`` tells the re-plan loop that asking again cannot help (a rule table with no
    matching rule, a rejected API key), so the request is escalated at once. ``raw`` keeps the
    planner's verbatim reply, when there was one, for the record.
    """

    code = "planner_failed"

    def __init__(
        self,
        message: str | None = None,
        *,
        final: bool = False,
        raw: str | None = None,
        by: PlannerInfo | None = None,
    ) -> None:
        super().__init__(message)
        self.final = final
        self.raw = raw
        self.by = by


class PlannerReplyMalformed(PlannerError):
    """The planner's reply is not a JSON plan."""

    code = "planner_reply_malformed"


class PlannerRefused(PlannerError):
    """The model declined to answer."""

    code = "planner_refused"


class PlannerUnavailable(PlannerError):
    """The model endpoint could not be reached, or kept failing, after every retry."""

    code = "planner_unavailable"


class NoRuleMatched(PlannerError):
    """No rule in the table fits the request's structured fields."""

    code = "no_rule_matched"


class PlannerConfigError(PivotalError):
    """The planner is not configured correctly."""

    code = "planner_config_invalid"


class RequestInvalid(InvalidInput):
    """A planning request is malformed; nothing was planned or recorded."""

    code = "request_invalid"


class RunNotFound(PivotalError):
    """No planning run with this id (of the kind asked for)."""

    code = "run_not_found"
