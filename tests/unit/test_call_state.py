"""Where a step's call stands, decided from the ledger: a finished call is never shown as
running (``call_state.decide``, and the words ``progress.describe`` gives it)."""

from __future__ import annotations

import pytest

from pivotal.sagas.call_state import CallState, Lease, Verdict, call_of, decide, ended_by, lease_of
from pivotal.sagas.progress import describe
from pivotal.sagas.state import StepRecord, StepStatus, UndoStatus

S, L = StepStatus, Lease
FLIGHT, GONE, DOUBT = CallState.IN_FLIGHT, CallState.UNRECORDED, CallState.IN_DOUBT

# status, lease, doubt window open, report present -> state (None: nothing to say), running
TABLE = [
    (S.STARTED, L.LIVE, True, True, FLIGHT, True),
    (S.STARTED, L.LIVE, True, False, FLIGHT, False),
    (S.STARTED, L.LIVE, False, True, FLIGHT, True),
    (S.STARTED, L.LIVE, False, False, FLIGHT, False),
    (S.STARTED, L.EXPIRED, True, True, DOUBT, False),
    (S.STARTED, L.EXPIRED, True, False, DOUBT, False),
    (S.STARTED, L.EXPIRED, False, True, GONE, False),
    (S.STARTED, L.EXPIRED, False, False, GONE, False),
    (S.STARTED, L.NONE, True, True, DOUBT, False),
    (S.STARTED, L.NONE, True, False, DOUBT, False),
    (S.STARTED, L.NONE, False, True, GONE, False),
    (S.STARTED, L.NONE, False, False, GONE, False),
    (S.RETRY_WAIT, L.LIVE, True, False, DOUBT, False),
    (S.RETRY_WAIT, L.NONE, True, False, DOUBT, False),
    (S.RETRY_WAIT, L.LIVE, False, False, None, False),
    (S.UNKNOWN, L.EXPIRED, True, False, DOUBT, False),
    (S.UNKNOWN, L.NONE, False, False, None, False),
    (S.SUCCEEDED, L.LIVE, False, True, None, False),
    (S.SUCCEEDED, L.NONE, False, False, None, False),
    (S.FAILED, L.EXPIRED, False, False, None, False),
    (S.PENDING, L.LIVE, False, False, None, False),
]


@pytest.mark.parametrize(("status", "lease", "doubt", "report", "state", "running"), TABLE)
def test_decide(
    status: StepStatus,
    lease: Lease,
    doubt: bool,
    report: bool,
    state: CallState | None,
    running: bool,
) -> None:
    expected = None if state is None else Verdict(state, running)
    assert decide(status, lease, doubt, report) == expected


@pytest.mark.parametrize(
    ("owner", "expires_at", "lease"),
    [
        ("w-1", 101.0, L.LIVE),
        ("w-1", 100.0, L.EXPIRED),
        ("w-1", None, L.EXPIRED),
        (None, 9e9, L.NONE),
    ],
)
def test_the_lease_on_the_ledgers_clock(
    owner: str | None, expires_at: float | None, lease: Lease
) -> None:
    assert lease_of(owner, expires_at, 100.0) is lease


def test_the_call_asked_about_is_the_undo_once_it_began() -> None:
    step = StepRecord(0, "hold", "compensable", status=S.SUCCEEDED, attempts=1, doubt_until=5.0)
    assert call_of(step).status is S.SUCCEEDED
    undoing = StepRecord(
        0, "hold", "compensable", status=S.SUCCEEDED, attempts=1,
        undo_status=UndoStatus.STARTED, undo_attempts=2, undo_doubt_until=9.0,
    )  # fmt: skip
    call = call_of(undoing)
    assert (call.status, call.attempt, call.doubt_until, call.undo) == (S.STARTED, 2, 9.0, True)
    done = StepRecord(0, "hold", "compensable", undo_status=UndoStatus.DONE, undo_attempts=1)
    assert call_of(done).status is S.SUCCEEDED


NOW = 1_796_400_000.0  # 2026-12-04 16:00:00 UTC
REPORT = {"message": "copying", "done": 40, "total": 100, "attempt": 1}
REPORT |= {"since": NOW - 313, "at": NOW - 200}


def started(doubt_until: float | None) -> StepRecord:
    return StepRecord(0, "copy", "pivot", status=S.STARTED, attempts=1, doubt_until=doubt_until)


def test_a_call_in_flight_says_how_long_it_runs() -> None:
    shown = describe(started(NOW + 60), REPORT, NOW, "w-1", L.LIVE)
    assert shown is not None
    assert shown.state is FLIGHT
    assert shown.fraction == 0.4
    assert shown.text == (
        "in flight · 40 of 100 (40%) · copying · attempt 1, running 5m 13s · "
        "reported 3m 20s ago · held by w-1"
    )


def test_a_call_whose_holder_is_gone_is_never_running() -> None:
    shown = describe(started(NOW - 30), REPORT, NOW, "w-1", L.EXPIRED, NOW - 90)
    assert shown is not None
    assert shown.state is GONE
    assert shown.fraction is None
    assert "running" not in shown.text
    assert "held by" not in shown.text
    assert shown.text == (
        "ended, unrecorded · attempt 1 · no live holder (w-1's lease expired 1m 30s ago): "
        "it may have ended without its result recorded · "
        "last reported 3m 20s ago: 40 of 100 (40%) · copying"
    )


def test_a_call_that_may_still_land_is_in_doubt_until_a_time_in_words() -> None:
    shown = describe(started(NOW + 125), None, NOW, None, L.NONE)
    assert shown is not None
    assert (shown.state, shown.until) == (DOUBT, NOW + 125)
    assert shown.text == (
        "in doubt until 2026-12-04 16:02:05 UTC (2m 5s from now) · attempt 1 · "
        "no live holder: it may still take effect"
    )
    assert str(int(NOW)) not in shown.text


def test_a_finished_call_says_nothing() -> None:
    done = StepRecord(0, "copy", "pivot", status=S.SUCCEEDED, attempts=1)
    assert describe(done, REPORT, NOW, "w-1", L.LIVE) is None


@pytest.mark.parametrize(
    ("expired_at", "doubt_until", "ended"),
    [
        (90.0, 61.0, 90.0),  # its lease expired after its deadline
        (40.0, 61.0, 61.0),  # its deadline passed after its lease expired
        (None, 61.0, 61.0),  # a lease released: its deadline
        (40.0, None, 40.0),  # no deadline recorded: its lease's expiry
        (None, None, None),  # the ledger does not tell
    ],
)
def test_ended_by(expired_at: float | None, doubt_until: float | None, ended: float | None) -> None:
    assert ended_by(expired_at, doubt_until) == ended
