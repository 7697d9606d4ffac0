"""Plans are data: ordered catalogue calls, optionally a parallel group, and provenance."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from pivotal.declarations.plan_errors import ErrorCode, PlanError
from pivotal.errors import PlanParseError, PlanTooLarge
from pivotal.jsontext import encoder, standard
from pivotal.people.principals import MAX_PERSON, canonical_person
from pivotal.records import quick_init
from pivotal.sagas import saga_ids


class ActorType(StrEnum):
    AGENT = "agent"
    HUMAN = "human"
    SYSTEM = "system"


class Rerun(BaseModel):
    """The saga whose plan a plan runs again, who asked for it and, when they said, why
    (``Orchestrator.rerun``; a bulk rerun's reason)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    saga_id: str = Field(pattern=saga_ids.SCHEMA_PATTERN)
    by: str = Field(min_length=1, max_length=200)
    reason: str | None = Field(default=None, min_length=1, max_length=4000)

    @model_serializer(mode="wrap")
    def _without_no_reason(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Without ``reason`` when none was given: a rerun recorded before it existed keeps
        its stored JSON, its plan digest and its provenance record's id."""
        dumped = handler(self)
        if isinstance(dumped, dict) and dumped.get("reason") is None:
            dumped.pop("reason", None)
        return dumped


class ArgChange(BaseModel):
    """One argument a fork changed: the call (its flat index and name), the argument, what
    it was (None when the plan left it to its default) and what it is now."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int = Field(ge=0)
    name: str = Field(min_length=1, max_length=200)
    argument: str = Field(min_length=1, max_length=200)
    was: Any = None
    now: Any = None


class Fork(BaseModel):
    """The finished saga whose plan a plan runs again with arguments changed, who asked,
    why, and what changed (``Orchestrator.fork``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    saga_id: str = Field(min_length=1, max_length=128)
    by: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=4000)
    changes: tuple[ArgChange, ...] = Field(min_length=1)


class Provenance(BaseModel):
    """Who proposed a plan, and from what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    actor_type: ActorType = ActorType.SYSTEM
    actor_id: str = "unknown"
    run_id: str | None = None
    model: str | None = None
    prompt_version: str | None = None
    source_document_id: str | None = None
    # the person an agent acted for: like the submitter, they cannot approve the saga
    on_behalf_of: str | None = Field(default=None, max_length=MAX_PERSON)
    # what the request this plan serves is about, from a trusted system (the order, the
    # customer who asked): a plan whose calls or facts name anything else is refused
    about: dict[str, str | int | float | bool] | None = Field(default=None, max_length=32)
    # set by ``Orchestrator.rerun`` only: the compensated saga this plan runs again
    rerun_of: Rerun | None = None
    # set by ``Orchestrator.fork`` only: the finished saga whose plan this one edits
    forked_from: Fork | None = None

    def names_whom(self) -> bool:
        """Whether ``on_behalf_of`` names a person: a name that folds to nothing (blanks, a
        soft hyphen, characters that draw as nothing) names no one, as four-eyes reads it."""
        return bool(canonical_person(self.on_behalf_of or ""))

    def ref(self) -> str:
        """A stable short id for this provenance record."""
        digest = hashlib.sha256(self.model_dump_json(exclude=self._unset()).encode()).hexdigest()
        return f"prov_{digest[:16]}"

    @field_validator("about")
    @classmethod
    def _small_subject(
        cls, value: dict[str, str | int | float | bool] | None
    ) -> dict[str, str | int | float | bool] | None:
        for key, item in (value or {}).items():
            if not key.isidentifier() or len(key) > 64:
                raise ValueError(f"about: {key[:70]!r} must be an identifier of 1-64 chars")
            if isinstance(item, str) and len(item) > 1000:
                raise ValueError(f"about: {key!r} is longer than 1000 characters")
        return value

    def _unset(self) -> set[str]:
        """Fields added later, left out while unset so that older records keep their ids."""
        return {name for name in _LATER if getattr(self, name) is None}


_LATER = ("on_behalf_of", "about", "rerun_of", "forked_from")


class StepCall(BaseModel):
    """One call of a catalogue step with its arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="A step name from the catalogue.")
    args: dict[str, Any] = Field(default_factory=dict, description="The step's arguments.")


class ParallelGroup(BaseModel):
    """Compensable calls that run concurrently; all are awaited."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parallel: list[StepCall] = Field(description="Compensable calls to run concurrently.")


class Plan(BaseModel):
    """A proposed plan: which catalogue steps, with which arguments, in which order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    catalogue: str = Field(min_length=1, description="The catalogue the steps come from.")
    steps: list[StepCall | ParallelGroup] = Field(description="Calls in execution order.")
    rationale: str = Field(default="", description="Why this plan; shown to approvers.")
    provenance: Provenance = Field(default_factory=Provenance)

    def calls(self) -> list[FlatCall]:
        """Every call in order with its flat index (the index in idempotency keys)."""
        out: list[FlatCall] = []
        for position, item in enumerate(self.steps):
            if isinstance(item, ParallelGroup):
                for member, call in enumerate(item.parallel):
                    path = f"steps[{position}].parallel[{member}]"
                    out.append(FlatCall(len(out), call, position, path))
            else:
                out.append(FlatCall(len(out), item, None, f"steps[{position}]"))
        return out

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=False)

    def form_errors(self, limits: PlanLimits, calls: list[FlatCall]) -> list[PlanError]:
        """What of the plan's form is refused (``calls``: ``self.calls()``): more calls,
        a longer rationale or a larger argument than ``limits`` allow, no calls at all,
        and a parallel group without calls. Nothing else of a plan with too many calls
        is read."""
        if len(calls) > limits.max_steps:
            return [
                PlanError(
                    ErrorCode.TOO_MANY_STEPS,
                    f"the plan has {len(calls)} calls; at most {limits.max_steps} are allowed",
                    path="steps",
                )
            ]
        out: list[PlanError] = []
        if len(self.rationale) > limits.max_rationale:
            out.append(
                PlanError(
                    ErrorCode.RATIONALE_TOO_LONG,
                    f"the rationale has {len(self.rationale)} characters; at most "
                    f"{limits.max_rationale} are allowed",
                    path="rationale",
                )
            )
        for flat in calls:
            for name, value in flat.call.args.items():
                if surely_fits(value, limits.max_argument):
                    continue
                size = len(json.dumps(value, default=str))
                if size > limits.max_argument:
                    out.append(
                        PlanError(
                            ErrorCode.ARGUMENT_TOO_LARGE,
                            f"{flat.call.name}.{name} is {size} characters of JSON; at most "
                            f"{limits.max_argument} are allowed",
                            flat.index,
                            f"{flat.path}.args.{name}",
                            flat.call.name,
                        )
                    )
        if not calls:
            out.append(PlanError(ErrorCode.EMPTY_PLAN, "the plan has no steps", path="steps"))
        out.extend(
            PlanError(
                ErrorCode.EMPTY_PARALLEL,
                "a parallel group needs at least one call",
                path=f"steps[{position}].parallel",
            )
            for position, item in enumerate(self.steps)
            if isinstance(item, ParallelGroup) and not item.parallel
        )
        return out

    def digest(self) -> str:
        """A hash of the plan's canonical JSON: equal plans have equal digests."""
        dumped = self.model_dump(mode="json")
        for key in self.provenance._unset():  # older plans keep their digests
            dumped["provenance"].pop(key, None)
        return hashlib.sha256(standard(dumped).encode()).hexdigest()


_COMPACT = encoder(separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """How large a plan may be. A catalogue may set its own (``Catalogue(limits=...)``)."""

    max_bytes: int = 256 * 1024  # the plan's JSON text
    max_steps: int = 100  # calls, parallel members included
    max_rationale: int = 4000  # characters
    max_argument: int = 8192  # characters of JSON for any one argument

    def __post_init__(self) -> None:
        if min(self.max_bytes, self.max_steps, self.max_rationale, self.max_argument) < 1:
            raise ValueError("plan limits must be positive")


DEFAULT_LIMITS = PlanLimits()


@quick_init
@dataclass(frozen=True, slots=True)
class FlatCall:
    index: int
    call: StepCall
    group: int | None  # position of the parallel group it belongs to
    path: str


def parse_plan(data: str | bytes | dict[str, Any], *, limits: PlanLimits = DEFAULT_LIMITS) -> Plan:
    """Parse a plan from JSON text or a mapping; raise ``PlanParseError`` with a clear reason.

    JSON text is read strictly: a key given twice at any level is refused (it would silently
    keep the last value), and so is text larger than ``limits.max_bytes`` (a mapping, by the
    size of its JSON).
    """
    try:
        if isinstance(data, dict):  # measured as the JSON text it would be
            longest = _longest(data)
            if longest is not None:
                raise _too_long(_digits(longest))
            _no_lone_surrogate(data)
            size = len(_COMPACT(data).encode())
            if size > limits.max_bytes:
                raise PlanTooLarge(
                    f"the plan is {size} bytes of JSON; at most {limits.max_bytes} are read"
                )
            return _submitted(Plan.model_validate(data))
        size = len(data.encode() if isinstance(data, str) else data)
        if size > limits.max_bytes:
            raise PlanTooLarge(
                f"the plan is {size} bytes of JSON; at most {limits.max_bytes} are read"
            )
        return _submitted(Plan.model_validate(strict_json(data)))
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "plan"
            problems.append(f"{where}: {err['msg']}")
        raise PlanParseError("malformed plan: " + "; ".join(problems)) from exc


def _submitted(plan: Plan) -> Plan:
    """A plan as a proposer may send it: ``rerun_of`` and ``forked_from`` are Pivotal's to
    set (an operator's rerun of a compensated saga, or fork of a finished one), never the
    sender's, so the audit trail cannot be forged."""
    if plan.provenance.rerun_of is not None:
        raise PlanParseError(
            "malformed plan: provenance.rerun_of is recorded by Pivotal when an operator runs "
            "a compensated saga's plan again (pivotal sagas rerun); a submitted plan cannot "
            "claim it"
        )
    if plan.provenance.forked_from is not None:
        raise PlanParseError(
            "malformed plan: provenance.forked_from is recorded by Pivotal when an operator "
            "forks a finished saga (pivotal sagas fork); a submitted plan cannot claim it"
        )
    return plan


MAX_DIGITS = 1000
"""Digits of the longest integer a plan may hold (a longer one is refused, never read):
money and quantities are far shorter, and a number past this is a mistake or an attack."""
_BEYOND = 10**MAX_DIGITS  # the least integer of more digits


def _too_long(digits: int) -> PlanParseError:
    return PlanParseError(
        f"malformed plan: a number of {digits} digits; at most {MAX_DIGITS} are read "
        "(give a longer number as text)"
    )


def _integer(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_DIGITS:
        raise _too_long(digits)
    return int(text)


def _longest(value: Any) -> int | None:
    """The largest integer in ``value`` (a plan as a mapping) of more than ``MAX_DIGITS``
    digits, as a positive number; None when there is none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) if abs(value) >= _BEYOND else None
    items = value.values() if isinstance(value, dict) else value
    if not isinstance(value, dict | list | tuple):
        return None
    found = [n for n in map(_longest, items) if n is not None]
    return max(found, default=None)


def _digits(n: int) -> int:
    """Decimal digits of ``n`` > 0, without writing it out (which Python refuses past
    4300 digits)."""
    guess = max(1, int(n.bit_length() * 0.30102999566398120))
    while 10**guess <= n:
        guess += 1
    while guess > 1 and 10 ** (guess - 1) > n:
        guess -= 1
    return guess


def _lone_surrogate(value: Any, where: str = "plan") -> str | None:
    """Where in ``value`` (a plan read from JSON, or given as a mapping) a string holds a
    lone surrogate, ``\\ud800`` unpaired: no character, which nothing downstream can
    write as UTF-8; None when none does."""
    if isinstance(value, str):
        if value.isascii():
            return None
        try:
            value.encode()
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _lone_surrogate(key, f"{where} (a key)")
            found = found or _lone_surrogate(item, f"{where}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for n, item in enumerate(value):
            found = _lone_surrogate(item, f"{where}[{n}]")
            if found is not None:
                return found
    return None


def _no_lone_surrogate(value: Any) -> Any:
    where = _lone_surrogate(value)
    if where is not None:
        shown = where.removeprefix("plan.")
        raise PlanParseError(
            f"malformed plan: {shown} holds a lone surrogate (a \\ud800-\\udfff escape "
            "without its pair), which is no character: give the text as it is written"
        )
    return value


def strict_json(text: str | bytes) -> Any:
    """JSON with every duplicate key refused (``PlanParseError`` naming the key and where),
    and every integer longer than ``MAX_DIGITS`` digits."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise PlanParseError(
                    f"malformed plan: the key {key!r} appears twice in one object "
                    f"(values {_brief(out[key])} and {_brief(value)}); give it once"
                )
            out[key] = value
        return out

    try:
        return _no_lone_surrogate(json.loads(text, object_pairs_hook=pairs, parse_int=_integer))
    except UnicodeDecodeError as exc:
        raise PlanParseError(f"malformed plan: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise PlanParseError(f"malformed plan: Invalid JSON: {exc}") from None
    except RecursionError:
        raise PlanParseError("malformed plan: nested too deeply") from None


def _brief(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def surely_fits(value: object, limit: int) -> bool:
    """True when ``value``'s JSON is certainly within ``limit`` characters without encoding
    it: a bool, None, a float, an int of fewer than 20 digits, or a string short enough
    that even escaping every character (12 each: a surrogate pair, \\uXXXX\\uXXXX) and its
    quotes would fit."""
    if value is None or isinstance(value, bool | float):
        return limit >= 24  # the longest float repr, e.g. -1.2345678901234567e-308
    if isinstance(value, int):
        return -(10**19) < value < 10**19 and limit >= 20
    if isinstance(value, str):
        return 12 * len(value) + 2 <= limit
    return False
