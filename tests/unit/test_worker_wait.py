"""A saga that waits for a worker while none is alive says so (``worker_wait``): who is
alive, why a saga waits, and the sentence, as tables."""

from __future__ import annotations

import pytest

from pivotal.sagas.call_state import Lease
from pivotal.sagas.state import SagaState, SagaStatus, StepRecord, StepStatus, UndoStatus
from pivotal.store.base import WorkerInfo
from pivotal.views.worker_wait import alive, no_worker, sentence, waits_for

NOW = 1_796_400_000.0  # 2026-12-04 16:00:00 UTC


def worker(beat_ago: float, every: float | None = 5.0, stopped: bool = False) -> WorkerInfo:
    at = NOW - beat_ago
    return WorkerInfo("w", NOW - 3600, at, at if stopped else None, "1", ("shop",), every)


# heartbeat this long ago, seconds between beats (None: unknown), said it stopped -> alive
ALIVE = [
    (0.0, 5.0, False, True),
    (14.0, 5.0, False, True),  # within three beats
    (16.0, 5.0, False, False),  # silent past three beats: stale
    (1.0, 5.0, True, False),  # it said it stopped
    (50.0, None, False, True),  # no beat recorded: a minute's grace
    (3600.0, None, False, False),
    (-2.0, 5.0, False, True),  # a beat a little ahead of the ledger's clock
]


@pytest.mark.parametrize(("ago", "every", "stopped", "expected"), ALIVE)
def test_alive(ago: float, every: float | None, stopped: bool, expected: bool) -> None:
    assert alive([worker(ago, every, stopped)], NOW) == (["w"] if expected else [])


def saga(status: SagaStatus, *steps: StepRecord) -> SagaState:
    return SagaState("s-1", "shop", "d", "p", status, steps, NOW - 200, NOW - 100)


def step(**fields: object) -> StepRecord:
    return StepRecord(0, "charge", "pivot", **fields)  # type: ignore[arg-type]


RUNNING, S = SagaStatus.RUNNING, StepStatus
RETRY_DUE = step(status=S.RETRY_WAIT, attempts=1, next_attempt_at=NOW - 65)
RETRY_LATER = step(status=S.RETRY_WAIT, attempts=1, next_attempt_at=NOW + 5)
UNDO_DUE = StepRecord(  # only a compensable step is undone
    0,
    "charge",
    "compensable",
    status=S.SUCCEEDED,
    seq=1,
    undo_status=UndoStatus.RETRY_WAIT,
    undo_next_attempt_at=NOW - 3,
)
CALLING = step(status=S.STARTED, attempts=1)

# the saga, its lease, when its open dead letters fell due -> why it waits for a worker
WAITS = [
    (
        saga(SagaStatus.SUBMITTED),
        Lease.NONE,
        (),
        "submitted at 2026-12-04 15:56:40 UTC, it was never claimed",
    ),
    (
        saga(RUNNING, RETRY_DUE),
        Lease.NONE,
        (),
        "the retry of charge (step 0) was due at 2026-12-04 15:58:55 UTC",
    ),
    (saga(RUNNING, RETRY_DUE), Lease.LIVE, (), None),  # its holder retries it
    (
        saga(RUNNING, RETRY_DUE),
        Lease.EXPIRED,
        (),
        "the retry of charge (step 0) was due at 2026-12-04 15:58:55 UTC",
    ),
    (saga(RUNNING, RETRY_LATER), Lease.NONE, (), None),
    (saga(RUNNING, step()), Lease.NONE, (), "it is ready to go on, and no worker holds it"),
    (saga(RUNNING, step()), Lease.LIVE, (), None),
    (saga(SagaStatus.SUBMITTED), Lease.LIVE, (), None),  # being claimed
    (
        saga(SagaStatus.COMPENSATING, UNDO_DUE),
        Lease.NONE,
        (),
        "the retry of charge's undo (step 0) was due at 2026-12-04 15:59:57 UTC",
    ),
    (saga(RUNNING, CALLING), Lease.LIVE, (), None),
    (saga(RUNNING, CALLING), Lease.EXPIRED, (), "the call of charge (step 0) has no live holder"),
    (saga(RUNNING, CALLING), Lease.NONE, (), "the call of charge (step 0) has no live holder"),
    (
        saga(SagaStatus.COMPENSATION_FAILED),
        Lease.NONE,
        (NOW - 30, NOW - 90),
        "a dead letter's retry was due at 2026-12-04 15:58:30 UTC",
    ),
    (saga(SagaStatus.COMPENSATION_FAILED), Lease.NONE, (), None),
    (saga(SagaStatus.AWAITING_APPROVAL, RETRY_DUE), Lease.NONE, (), None),  # waits for a person
    (saga(SagaStatus.NEEDS_HUMAN, CALLING), Lease.NONE, (), None),
    (saga(SagaStatus.COMPLETED), Lease.NONE, (), None),
]


@pytest.mark.parametrize(("state", "lease", "letters", "reason"), WAITS)
def test_waits_for(
    state: SagaState, lease: Lease, letters: tuple[float, ...], reason: str | None
) -> None:
    assert waits_for(state, NOW, lease, letters) == reason


@pytest.mark.parametrize(
    ("reason", "workers", "said"),
    [("why", [], "why"), ("why", ["w-1"], None), (None, [], None), (None, ["w-1"], None)],
)
def test_no_worker(reason: str | None, workers: list[str], said: str | None) -> None:
    assert no_worker(reason, workers) == said


def test_the_sentence_says_what_to_run() -> None:
    assert sentence("why", "run it") == (
        "No worker is alive to run this saga (why): start one with `run it`."
    )
