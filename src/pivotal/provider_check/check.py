"""Running a check: which app (a sandbox, or nothing runs), which steps, with which
arguments, and the report."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pivotal.clock import Clock
from pivotal.declarations.app import App
from pivotal.declarations.catalogue import Catalogue, Step
from pivotal.errors import InvalidInput
from pivotal.provider_check.model import (
    CheckReport,
    StepFindings,
    StepReport,
    first_error,
    read_text,
)
from pivotal.provider_check.probes import Options, Refusal, Session, StepCheck


class NotASandbox(InvalidInput):
    """The app was not declared a sandbox: a check makes real effects, and runs only
    against providers the app says are sandboxes."""

    code = "not_a_sandbox"


class SandboxRefusal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: dict[str, Any]
    why: str = ""


class SandboxStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: dict[str, Any] | None = None  # None: the argument model's first example
    refused: list[SandboxRefusal] = Field(default_factory=list)


class SandboxFile(BaseModel):
    """What ``--sandbox ARGS.json`` holds: per step, arguments the sandbox accepts, and
    arguments it refuses (each with why), e.g. ``{"steps": {"charge_payment": {"args":
    {"order_id": "4471", "amount": "180"}, "refused": [{"args": {...}, "why": "..."}]}}}``."""

    model_config = ConfigDict(extra="forbid")

    steps: dict[str, SandboxStep] = Field(default_factory=dict)

    @classmethod
    def read(cls, path: str | Path) -> SandboxFile:
        what = f"the sandbox file {str(path)!r}"
        return cls.parse(read_text(path, what), what)

    @classmethod
    def parse(cls, given: str | Mapping[str, Any], what: str = "the sandbox") -> SandboxFile:
        """``given`` (JSON text, or its value) read strictly; ``InvalidInput`` says where
        it is not what a sandbox file holds."""
        try:
            if isinstance(given, str):
                return cls.model_validate_json(given)
            return cls.model_validate(given)
        except ValidationError as exc:
            raise InvalidInput(f"{what}: {first_error(exc, 'the file')}") from None


class MonotonicClock:
    """Seconds from a clock no one steps: what a check measures lags and waits on."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


def example_args(step: Step) -> dict[str, Any] | None:
    """The first example the step's argument model declares (``json_schema_extra``'s
    ``examples``), if any."""
    extra = step.args_model.model_config.get("json_schema_extra")
    examples = extra.get("examples") if isinstance(extra, Mapping) else None
    if isinstance(examples, list) and examples and isinstance(examples[0], dict):
        return dict(examples[0])
    return None


def _parsed(step: Step, raw: Mapping[str, Any], what: str) -> BaseModel:
    try:
        return step.parse_args(raw)
    except ValidationError as exc:
        where = first_error(exc, "the arguments")
        raise InvalidInput(f"step {step.name!r}: {what}: {where}") from None


def _chosen(catalogue: Catalogue, names: Iterable[str]) -> list[Step]:
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return list(catalogue)
    unknown = [n for n in wanted if n not in catalogue]
    if unknown:
        raise InvalidInput(
            f"catalogue {catalogue.name!r} has no step {', '.join(map(repr, unknown))}; its "
            f"steps: {', '.join(s.name for s in catalogue)}"
        )
    return [catalogue[n] for n in wanted]


async def check_provider(
    app: App,
    catalogue: str,
    *,
    steps: Iterable[str] = (),
    sandbox: SandboxFile | Mapping[str, Any] | None = None,
    options: Options | None = None,
    clock: Clock | None = None,
) -> CheckReport:
    """Probe the providers behind ``catalogue``'s steps (all, or ``steps``) through their
    own actions, lookups and undos, with the arguments ``sandbox`` gives (else each
    argument model's first example), and report each promise the catalogue relies on.

    Refused unless ``app.sandbox`` is true: the probes make real effects (and undo them)."""
    if not app.sandbox:
        raise NotASandbox(
            f"app {app.name!r} is not declared a sandbox: a provider check makes real "
            "effects, so it runs only against an app built over its providers' sandboxes "
            "and declared so (App(..., sandbox=True))"
        )
    found = app.catalogues.get(catalogue)
    if found is None:
        known = ", ".join(sorted(app.catalogues)) or "none"
        raise InvalidInput(f"app {app.name!r} has no catalogue {catalogue!r}; it has: {known}")
    given = sandbox if isinstance(sandbox, SandboxFile) else SandboxFile.parse(sandbox or {})
    unknown = sorted(set(given.steps) - {s.name for s in found})
    if unknown:
        raise InvalidInput(
            f"the sandbox file names steps catalogue {catalogue!r} does not have: "
            f"{', '.join(unknown)}"
        )
    chosen = _chosen(found, steps)
    planned: list[tuple[Step, BaseModel | None, list[Refusal]]] = []
    for step in chosen:  # every argument is checked before any call is made
        entry = given.steps.get(step.name, SandboxStep())
        raw = entry.args if entry.args is not None else example_args(step)
        args = None if raw is None else _parsed(step, raw, "its sandbox arguments")
        refusals = [
            Refusal(_parsed(step, r.args, f"refusal {n + 1}'s arguments"), r.why)
            for n, r in enumerate(entry.refused)
        ]
        planned.append((step, args, refusals))
    chosen_options = options or Options()
    session = Session(found, clock or MonotonicClock(), chosen_options, secrets.token_hex(4))
    reports: list[StepReport] = []
    for step, args, refusals in planned:
        if args is None:
            reports.append(
                StepReport(
                    step=step.name,
                    kind=step.kind.value,
                    skipped="no sandbox arguments: give them in the sandbox file, or "
                    "declare an example on the argument model",
                    observed=StepFindings(),
                )
            )
            continue
        reports.append(await StepCheck(session, step, args, refusals).run())
    return CheckReport(
        app=app.name,
        catalogue=found.name,
        checked_at=datetime.now(UTC).isoformat(timespec="seconds"),
        budget=chosen_options.budget,
        spent=session.spent,
        steps=reports,
    )
