"""What a provider check found: a row per promise, per step, and what the catalogue should
declare; the findings a catalogue records, and how its declared settings drift from them."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pivotal.declarations.retry import RetryPolicy
from pivotal.errors import InvalidInput

if TYPE_CHECKING:
    from pivotal.declarations.catalogue import Catalogue, Step


MAX_FILE = 1 << 20  # bytes read at most from a sandbox or findings file


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """A small UTF-8 file's text; ``InvalidInput`` says why it cannot be had."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(MAX_FILE + 1)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInput(f"{what}: {reason}") from None
    if len(data) > MAX_FILE:
        raise InvalidInput(f"{what} is larger than {MAX_FILE} bytes, the most read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None


def first_error(exc: ValidationError, whole: str) -> str:
    """Where pydantic's first error is (``whole`` when at the top) and what it says."""
    first = exc.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc']) or whole}: {first['msg']}"


class Verdict(StrEnum):
    """How a provider stands by one promise."""

    KEPT = "kept"  # observed kept
    BROKEN = "broken"  # observed broken, and the catalogue relies on it
    COVERED = "covered"  # observed broken, and the catalogue's settings already allow for it
    UNKNOWN = "unknown"  # not observed: no lookup, no refusal given, the budget spent, ...


class Promise(StrEnum):
    """The promises a catalogue relies on, each checked by one probe."""

    REPLAY = "one key, one effect (called in turn)"
    CONCURRENT = "one key, one effect (called at once)"
    LOOKUP = "a lookup finds the effect made with a key"
    LOOKUP_UNMADE = "a lookup finds nothing for a key never used"
    WINDOW = "a key is remembered as long as the catalogue may reuse it"
    UNDO_TWICE = "an undo called twice with its key reverses once"
    UNDO_UNMADE = "an undo of an effect never made is done, not an error"
    CUT_OFF = "a call cut off by its client lands by a known time, or never"
    REFUSAL = "a refusal declared as no effect made none"

    @property
    def label(self) -> str:
        """A name short enough for a table's column."""
        return LABEL[self]


LABEL = {
    Promise.REPLAY: "key, in turn",
    Promise.CONCURRENT: "key, at once",
    Promise.LOOKUP: "lookup lag",
    Promise.LOOKUP_UNMADE: "lookup, unmade",
    Promise.WINDOW: "key window",
    Promise.UNDO_TWICE: "undo twice",
    Promise.UNDO_UNMADE: "undo, unmade",
    Promise.CUT_OFF: "cut-off call",
    Promise.REFUSAL: "refusal",
}
ORDER = {promise: n for n, promise in enumerate(Promise)}


def duration(seconds: float) -> str:
    """Seconds as a person reads them: 0.25 s, 6.5 min, 26.3 h."""
    if seconds < 120:
        return f"{seconds:.2g} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class Row(BaseModel):
    """One promise of one step: the verdict, what was observed, what it implies."""

    model_config = ConfigDict(frozen=True)

    step: str
    promise: Promise
    verdict: Verdict
    observed: str
    implies: str = ""  # the catalogue setting it implies; "" when nothing to change


class StepReport(BaseModel):
    step: str
    kind: str
    rows: list[Row] = Field(default_factory=list)
    # keys of effects the check made and could not undo (they stay in the sandbox)
    left: list[str] = Field(default_factory=list)
    skipped: str | None = None  # why the step was not probed at all
    # what the check observed, as the findings a catalogue records (see ``Findings``)
    observed: StepFindings


class StepFindings(BaseModel):
    """Figures a check observed for one step (None: not observed)."""

    model_config = ConfigDict(extra="forbid")

    lookup_lag: float | None = None  # seconds from the effect to its lookup finding it
    lands_after_cut_off: float | None = None  # seconds from a cut-off to its effect landing
    forgets_key_within: float | None = None  # a key was forgotten this long after its use
    replays: bool | None = None  # one key made one effect, in turn and at once


class Findings(BaseModel):
    """What ``pivotal check-provider --record FILE`` keeps for a catalogue: read back by
    ``Catalogue(checked=FILE)``, so that every process that runs its sagas warns at start
    when the catalogue declares less than the check observed."""

    model_config = ConfigDict(extra="forbid")

    catalogue: str
    checked_at: str  # ISO 8601, UTC
    steps: dict[str, StepFindings]

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Findings:
        text = read_text(path, f"the provider check's findings {str(path)!r}")
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise InvalidInput(
                f"the provider check's findings {str(path)!r} are not what "
                f"`pivotal check-provider --record` writes: {first_error(exc, 'the file')}"
            ) from None

    def write(self, path: str | Path) -> None:
        Path(path).write_text(
            json.dumps(self.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8"
        )


class CheckReport(BaseModel):
    """A whole check: the app, the catalogue, each step's rows, and the calls it spent."""

    app: str
    catalogue: str
    checked_at: str
    budget: int
    spent: int
    steps: list[StepReport]

    @property
    def rows(self) -> list[Row]:
        return [row for step in self.steps for row in step.rows]

    @property
    def broken(self) -> list[Row]:
        return [row for row in self.rows if row.verdict is Verdict.BROKEN]

    def findings(self) -> Findings:
        return Findings(
            catalogue=self.catalogue,
            checked_at=self.checked_at,
            steps={step.step: step.observed for step in self.steps},
        )

    def assert_kept(self) -> None:
        """Raise ``AssertionError`` naming every promise the catalogue relies on that the
        provider broke (for a team's own tests against its sandbox)."""
        if self.broken:
            lines = [f"{r.step}: {r.promise.value}: {r.observed}; {r.implies}" for r in self.broken]
            raise AssertionError(
                f"the providers of catalogue {self.catalogue!r} break promises it relies on:\n"
                + "\n".join(lines)
            )


def reuse_span(catalogue: Catalogue, step: Step) -> float:
    """The longest the catalogue may go on using a key of ``step`` after its first use:
    its retries (every delay at its cap, every attempt its whole timeout), the doubt grace
    and lookup lag before an attempt's "not found" counts, an approval's wait between a
    compensable step and its undo, and the undo's retries and dead-letter retries (an undo
    finds the effect by the action's key). A person resuming a parked saga may reuse it
    later still: no check can bound that."""
    timeout = catalogue.timeout_of(step)
    span = _retry_span(step.policy.max_attempts, step.policy, timeout)
    span += catalogue.doubt_grace + step.lookup_lag
    if step.undo is not None:
        span += float(getattr(catalogue.approval, "expires_in", 0.0) or 0.0)
        span += _retry_span(step.undo_retry.max_attempts, step.undo_retry, timeout)
        span += _retry_span(step.dead_letter_retry.max_attempts, step.dead_letter_retry, timeout)
    return span


def _retry_span(attempts: int, policy: RetryPolicy, timeout: float) -> float:
    """Every attempt its whole timeout, every delay between them at its cap."""
    total = attempts * timeout
    for n in range(1, attempts):
        try:
            grown = policy.base_delay * policy.multiplier ** (n - 1)
        except OverflowError:
            grown = math.inf
        total += min(policy.max_delay, grown)
    return float(total)


def drift(catalogue: Catalogue, findings: Findings) -> list[str]:
    """Where ``catalogue`` declares less than ``findings`` observed, one sentence each."""
    said: list[str] = []
    if findings.catalogue != catalogue.name:
        return [
            f"catalogue {catalogue.name!r}: its recorded provider check is of catalogue "
            f"{findings.catalogue!r}"
        ]
    for name, seen in sorted(findings.steps.items()):
        step = catalogue.get(name)
        if step is None:
            continue
        where = f"catalogue {catalogue.name!r}, step {name!r}"
        if seen.lookup_lag is not None and step.lookup_lag < seen.lookup_lag:
            said.append(
                f"{where} declares lookup_lag={step.lookup_lag:g}, but the provider check of "
                f"{findings.checked_at} saw its lookup find an effect {duration(seen.lookup_lag)} "
                f"after it was made: declare lookup_lag={suggested(seen.lookup_lag)}"
            )
        landed = seen.lands_after_cut_off
        if landed is not None and catalogue.doubt_grace < landed:
            said.append(
                f"{where}: the catalogue's doubt_grace is {duration(catalogue.doubt_grace)}, but "
                f"the provider check of {findings.checked_at} saw a cut-off call land "
                f"{duration(landed)} later: declare doubt_grace={suggested(landed)}"
            )
        forgets = seen.forgets_key_within
        if forgets is not None and reuse_span(catalogue, step) > forgets:
            said.append(
                f"{where} may reuse a key up to {duration(reuse_span(catalogue, step))} after its "
                f"first use, but the provider check of {findings.checked_at} saw the "
                f"provider forget a key within {duration(forgets)}"
            )
        if seen.replays is False and step.repeatable:
            said.append(
                f"{where} is declared repeatable, but the provider check of "
                f"{findings.checked_at} saw one key make two effects: declare repeatable=False"
            )
    return said


def suggested(seconds: float) -> str:
    """A setting to declare for an observed figure: rounded up, with a margin of half."""
    return f"{math.ceil(seconds * 1.5 * 10) / 10:g}"


def recorded_drift(catalogues: Iterable[Catalogue]) -> list[str]:
    """For each catalogue that names its last provider check (``checked``), where it
    declares less than that check observed; a check that cannot be read is said too."""
    said: list[str] = []
    for catalogue in catalogues:
        if catalogue.checked is None:
            continue
        try:
            findings = Findings.read(catalogue.checked)
        except InvalidInput as exc:
            said.append(f"catalogue {catalogue.name!r}: {exc}")
            continue
        said.extend(drift(catalogue, findings))
    return said


StepReport.model_rebuild()
