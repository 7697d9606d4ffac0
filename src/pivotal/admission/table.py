"""The verdicts of admission, declared as a table: what the stages found about a new plan
(``Finding``), and the setting of its catalogue's rollout for what it exposes (``Above``),
decide whether it is recorded as a saga, kept in shadow or refused.

The first row that matches is the verdict; a row whose ``above`` is ``ANY`` matches every
setting. Nothing else decides: ``pivotal.admission.admit`` computes the finding and reads
the verdict here, and the orchestrator writes what it says. The reference page
``reference/admission.md`` is generated from this table."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pivotal.errors import PlanRejected, RolloutRefused, RolloutShadowed


class Finding(StrEnum):
    """What the stages found, in the order they look."""

    INVALID = "invalid"  # the plan does not validate: shape, identities, facts, rules
    RECORDED = "recorded"  # a saga of this id exists: the same plan returns it
    NOT_AN_AGENT = "not_an_agent"  # a person or a system proposed it
    NO_ROLLOUT = "no_rollout"  # its catalogue limits no agent plans
    BELOW = "below"  # what it exposes is below the rollout's limit
    NOT_BELOW = "not_below"  # what it exposes is at or above the limit
    UNCOUNTABLE = "uncountable"  # what it exposes cannot be counted (no rate, too many)


class Above(StrEnum):
    """What the catalogue's rollout does with an agent plan at or above its limit."""

    SHADOW = "shadow"
    REFUSE = "refuse"
    ANY = "*"  # in a row: whatever the setting


class Verdict(StrEnum):
    ADMIT = "admit"  # record the saga, with the subjects and the reservations it holds
    SHADOW = "shadow"  # keep the plan as a shadow planning run; record no saga
    REFUSE = "refuse"  # record no saga


@dataclass(frozen=True, slots=True)
class Row:
    finding: Finding
    above: Above
    verdict: Verdict
    code: str | None  # the error code the submitter hears (None: admitted)
    why: str

    @property
    def id(self) -> str:
        return f"{self.finding.value}/{self.above.value}"


TABLE: tuple[Row, ...] = (
    Row(
        Finding.INVALID,
        Above.ANY,
        Verdict.REFUSE,
        PlanRejected.code,
        "the plan does not validate: each error says where and what to change",
    ),
    Row(
        Finding.RECORDED,
        Above.ANY,
        Verdict.ADMIT,
        None,
        "a resubmission of a recorded saga returns it as it is (another plan under its id "
        "is a conflict)",
    ),
    Row(
        Finding.NOT_AN_AGENT,
        Above.ANY,
        Verdict.ADMIT,
        None,
        "plans from people and systems are never limited by a rollout",
    ),
    Row(Finding.NO_ROLLOUT, Above.ANY, Verdict.ADMIT, None, "agent plans run whatever they expose"),
    Row(
        Finding.BELOW,
        Above.ANY,
        Verdict.ADMIT,
        None,
        "below the rollout's limit: recorded, with what it exposed",
    ),
    Row(
        Finding.NOT_BELOW,
        Above.SHADOW,
        Verdict.SHADOW,
        RolloutShadowed.code,
        "at or above the limit: kept for a person to read, never run",
    ),
    Row(
        Finding.NOT_BELOW,
        Above.REFUSE,
        Verdict.REFUSE,
        RolloutRefused.code,
        "at or above the limit: refused",
    ),
    Row(
        Finding.UNCOUNTABLE,
        Above.SHADOW,
        Verdict.SHADOW,
        RolloutShadowed.code,
        "what cannot be counted is never taken as nothing: kept for a person, never run",
    ),
    Row(
        Finding.UNCOUNTABLE,
        Above.REFUSE,
        Verdict.REFUSE,
        RolloutRefused.code,
        "what cannot be counted is never taken as nothing: refused",
    ),
)


def decide(finding: Finding, above: Above) -> Row:
    """The row of ``TABLE`` for what admission found: the first that matches."""
    for row in TABLE:
        if row.finding is finding and row.above in (above, Above.ANY):
            return row
    raise LookupError(f"admission has no row for {finding.value}/{above.value}")
