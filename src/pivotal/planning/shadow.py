"""Shadow mode: plan real requests, score them with the validator, execute nothing."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from pivotal.clock import Clock, SystemClock
from pivotal.declarations.app import App
from pivotal.errors import InvalidInput, PlanRejected
from pivotal.planning.base import Planner, PlanRequest
from pivotal.planning.errors import RequestInvalid
from pivotal.planning.loop import DEFAULT_MAX_REPLANS, propose_plan, resolve_catalogue
from pivotal.planning.records import PlanningMode, PlanningRun
from pivotal.planning.render import render_catalogue
from pivotal.store.base import Store


def new_batch_id() -> str:
    return f"shadow_{uuid.uuid4().hex[:12]}"


def read_requests(path: str | Path, app: App) -> list[PlanRequest]:
    """Requests from a JSONL file, one object per line; blank lines and ``#`` lines skipped.

    Every line is checked first, catalogue included: a bad line raises ``RequestInvalid``
    naming it, before anything is planned or recorded.
    """
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise RequestInvalid(f"cannot read {path}: {exc.strerror}") from None
    requests = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            request = PlanRequest.model_validate_json(line)
            resolve_catalogue(app, request.catalogue)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'request'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise RequestInvalid(f"{path}:{number}: {problems}") from None
        except PlanRejected as exc:
            raise RequestInvalid(f"{path}:{number}: {exc.errors[0].message}") from None
        except InvalidInput as exc:
            raise RequestInvalid(f"{path}:{number}: {exc}") from None
        requests.append(request)
    return requests


async def run_shadow(
    requests: Sequence[PlanRequest],
    planner: Planner,
    app: App,
    ledger: Store,
    *,
    max_replans: int = DEFAULT_MAX_REPLANS,
    batch_id: str | None = None,
    clock: Clock | None = None,
) -> list[PlanningRun]:
    """Plan and validate each request, recording every attempt under one batch id.

    Nothing is submitted, executed or escalated: people keep handling the requests.
    """
    clock = clock or SystemClock()
    batch_id = batch_id or new_batch_id()
    views = {c.name: render_catalogue(c) for c in app}
    runs = []
    for request in requests:
        catalogue = resolve_catalogue(app, request.catalogue)
        run = await propose_plan(
            request,
            planner,
            catalogue,
            max_replans=max_replans,
            clock=clock,
            view=views[catalogue.name],
            facts=app.facts,
        )
        run = run.model_copy(update={"mode": PlanningMode.SHADOW, "batch_id": batch_id})
        await ledger.record_run(run)
        runs.append(run)
    return runs


@dataclass(frozen=True, slots=True)
class Reason:
    """Errors of one code at one step, with the first message that said it (the
    validator's, or the planner's own words when it gave nothing usable)."""

    code: str
    step: str | None
    count: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class Unaccepted:
    """A request the planner did not get a valid plan for: its run (``shadow show RUN``
    reads it whole), how many attempts, and the last attempt's first message."""

    run_id: str
    attempts: int
    message: str


@dataclass(frozen=True, slots=True)
class ShadowReport:
    """How a planner did on a batch of requests."""

    batch_id: str | None
    requests: int
    accepted: int
    first_try: int  # accepted on the first attempt
    attempts: int
    reasons: tuple[Reason, ...]  # every error of every failed attempt, grouped
    unaccepted: tuple[Unaccepted, ...] = ()  # the runs without a valid plan, in order

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.requests if self.requests else 0.0

    @property
    def mean_attempts(self) -> float:
        return self.attempts / self.requests if self.requests else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "batch_id": self.batch_id,
            "requests": self.requests,
            "accepted": self.accepted,
            "first_try": self.first_try,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "mean_attempts": round(self.mean_attempts, 4),
            "reasons": [
                {"code": r.code, "step": r.step, "count": r.count, "message": r.message}
                for r in self.reasons
            ],
            "unaccepted": [
                {"run_id": u.run_id, "attempts": u.attempts, "message": u.message}
                for u in self.unaccepted
            ],
        }


def shadow_report(runs: Iterable[PlanningRun], batch_id: str | None = None) -> ShadowReport:
    """Acceptance rate, mean attempts, and rejection reasons by error code and step name."""
    runs = list(runs)
    reasons: Counter[tuple[str, str | None]] = Counter()
    said: dict[tuple[str, str | None], str] = {}
    for run in runs:
        for attempt in run.attempts:
            for error in attempt.errors:
                reasons[(error.code, error.step)] += 1
                said.setdefault((error.code, error.step), error.message)
    ordered = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or ""))
    return ShadowReport(
        batch_id=batch_id,
        requests=len(runs),
        accepted=sum(r.accepted for r in runs),
        first_try=sum(r.accepted and len(r.attempts) == 1 for r in runs),
        attempts=sum(len(r.attempts) for r in runs),
        reasons=tuple(Reason(code, step, n, said[code, step]) for (code, step), n in ordered),
        unaccepted=tuple(
            Unaccepted(r.run_id, len(r.attempts), _last_message(r)) for r in runs if not r.accepted
        ),
    )


def _last_message(run: PlanningRun) -> str:
    """What the run's last attempt was told first (empty when it was told nothing)."""
    last = run.attempts[-1] if run.attempts else None
    return last.errors[0].message if last is not None and last.errors else ""
