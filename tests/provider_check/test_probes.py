"""The provider check against simulated providers: the honest one keeps every promise and
is left as it was found; each provider that breaks one promise is caught by that promise's
row, and only by it; what the catalogue already allows for is covered, not broken; the
budget, the sandbox marking and bad arguments are held before any call is made."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from sandbox_providers import DOUBT_GRACE, LOOKUP_LAG, SANDBOX, Knobs, Provider, payments

from pivotal import FakeClock
from pivotal.errors import InvalidInput
from pivotal.provider_check import (
    CheckReport,
    NotASandbox,
    Options,
    Promise,
    Verdict,
    check_provider,
    reuse_span,
)


def options(app: Any, **given: Any) -> Options:
    """Waits long enough to see all a provider does: the window the catalogue reuses a
    key for, and past the doubt grace for a cut-off call (on the fake clock: instant)."""
    catalogue = app.catalogues["payments"]
    chosen: dict[str, Any] = {
        "wait": 10.0,
        "poll": 0.1,
        "window": reuse_span(catalogue, catalogue["charge"]),
    }
    chosen.update(given)
    return Options(**chosen)


async def checked(knobs: Knobs, **settings: Any) -> tuple[CheckReport, Provider]:
    clock = FakeClock()
    provider = Provider(clock, knobs)
    app = payments(provider, **settings)
    report = await check_provider(
        app, "payments", sandbox=SANDBOX, options=options(app), clock=clock
    )
    return report, provider


def verdicts(report: CheckReport) -> dict[Promise, Verdict]:
    return {row.promise: row.verdict for row in report.rows}


async def test_the_honest_provider_keeps_every_promise_and_is_left_as_found() -> None:
    report, provider = await checked(Knobs())

    assert verdicts(report) == dict.fromkeys(Promise, Verdict.KEPT)
    assert [row.observed for row in report.rows if row.promise is Promise.LOOKUP] == [
        "found at once"
    ]
    assert provider.in_place() == []  # every effect made was refunded
    assert report.steps[0].left == []
    assert provider.calls - len(provider.effects) <= report.spent  # clean-up on top
    report.assert_kept()


BROKEN = [
    # (the knob that breaks it, the promise whose row catches it)
    (Knobs(replays=False), Promise.REPLAY),
    (Knobs(replays_at_once=False), Promise.CONCURRENT),
    (Knobs(lag=LOOKUP_LAG * 3), Promise.LOOKUP),
    (Knobs(lookup_finds=False), Promise.LOOKUP),
    (Knobs(lookup_invents=True), Promise.LOOKUP_UNMADE),
    (Knobs(forgets_after=60.0), Promise.WINDOW),
    (Knobs(undo_again_raises=True), Promise.UNDO_TWICE),
    (Knobs(undo_unmade_raises=True), Promise.UNDO_UNMADE),
    (Knobs(lands_after=DOUBT_GRACE * 2), Promise.CUT_OFF),
    (Knobs(refusal_charges=True), Promise.REFUSAL),
]


@pytest.mark.parametrize(("knobs", "caught_by"), BROKEN, ids=[f"{k.name}" for _, k in BROKEN])
async def test_a_provider_breaking_one_promise_is_caught_by_its_row(
    knobs: Knobs, caught_by: Promise
) -> None:
    report, _ = await checked(knobs)

    assert {row.promise for row in report.broken} == {caught_by}, report.rows
    with pytest.raises(AssertionError, match=re.escape(caught_by.value)):
        report.assert_kept()


@pytest.mark.parametrize(
    ("knobs", "promise", "implies"),
    [
        # what was seen (a poll's step late at most), and half as much again
        (Knobs(replays=False), Promise.REPLAY, r"declare repeatable=False$"),
        (Knobs(lag=LOOKUP_LAG * 3), Promise.LOOKUP, r"declare lookup_lag=2\.[34]$"),
        (Knobs(lands_after=DOUBT_GRACE * 2), Promise.CUT_OFF, r"declare doubt_grace=6(\.[12])? "),
        (Knobs(refusal_charges=True), Promise.REFUSAL, r"take Declined out of no_effect_on"),
    ],
)
async def test_a_broken_row_names_the_setting_to_declare(
    knobs: Knobs, promise: Promise, implies: str
) -> None:
    report, _ = await checked(knobs)

    [row] = [row for row in report.rows if row.promise is promise]
    assert row.verdict is Verdict.BROKEN
    assert re.match(implies, row.implies), row.implies


async def test_what_the_catalogue_already_allows_for_is_covered_not_broken() -> None:
    report, _ = await checked(Knobs(replays=False, replays_at_once=False), repeatable=False)

    found = verdicts(report)
    assert found[Promise.REPLAY] is Verdict.COVERED
    assert found[Promise.CONCURRENT] is Verdict.COVERED
    assert report.findings().steps["charge"].replays is False


async def test_the_findings_hold_what_was_observed() -> None:
    report, _ = await checked(Knobs(lag=1.0, lands_after=3.0, forgets_after=60.0))

    seen = report.findings().steps["charge"]
    assert seen.lookup_lag == pytest.approx(1.0, abs=0.11)
    assert seen.lands_after_cut_off == pytest.approx(3.0, abs=0.11)
    assert seen.forgets_key_within is not None
    assert seen.forgets_key_within > 60.0


@pytest.mark.parametrize(("lands_after", "verdict"), [(1.0, Verdict.KEPT), (4.0, Verdict.BROKEN)])
async def test_a_call_that_takes_time_is_cut_off_partway(
    lands_after: float, verdict: Verdict
) -> None:
    # the first call took 40 ms (on the check's clock); the calls cut off at 20 ms and
    # 36 ms (real waits) never answer on their own: each is cut, and lands later
    knobs = Knobs(takes=0.04, slow_keys=frozenset({4, 5}), lands_after=lands_after)
    report, provider = await checked(knobs)

    [row] = [row for row in report.rows if row.promise is Promise.CUT_OFF]
    assert row.verdict is verdict, row
    assert row.observed.startswith("cut off after 0.0"), row.observed
    # found at the poll after it landed (a tenth of a second later at most)
    assert re.search(rf"landed {lands_after:.0f}(\.1)? s later", row.observed), row.observed
    assert provider.in_place() == []  # both cut-off calls landed, and were refunded


async def test_a_call_that_swallows_its_cancellation_is_waited_for_only_its_bound() -> None:
    # cut off at its first wait, it goes on waiting: the check waits its step's bound
    # (0.2 s) for it, then watches for its effect, which landed when it was cut off
    clock = FakeClock()
    provider = Provider(clock, Knobs(slow_keys=frozenset({4}), deaf=True))
    app = payments(provider, timeout=0.2)
    report = await check_provider(
        app, "payments", sandbox=SANDBOX, options=options(app), clock=clock
    )
    provider.released.set()  # the stuck call ends with the test

    [row] = [row for row in report.rows if row.promise is Promise.CUT_OFF]
    assert row.verdict is Verdict.KEPT, row
    assert row.observed.startswith("cut off at its first wait, it landed 0 s later")
    assert provider.in_place() == []


async def test_a_lookup_that_raises_leaves_what_it_serves_unknown_not_kept() -> None:
    report, provider = await checked(Knobs(lookup_raises=True))

    found = verdicts(report)
    for promise in (Promise.LOOKUP, Promise.LOOKUP_UNMADE, Promise.CUT_OFF, Promise.REFUSAL):
        assert found[promise] is Verdict.UNKNOWN, (promise, report.rows)
    [row] = [row for row in report.rows if row.promise is Promise.LOOKUP]
    assert "RuntimeError: lookup: 502 from the sandbox" in row.observed
    assert found[Promise.UNDO_TWICE] is Verdict.KEPT  # the probes after it still ran
    assert provider.in_place() == []


async def test_a_small_budget_stops_the_probes_and_says_so() -> None:
    clock = FakeClock()
    provider = Provider(clock)
    app = payments(provider)
    report = await check_provider(
        app, "payments", sandbox=SANDBOX, options=options(app, budget=3), clock=clock
    )

    assert report.spent == 3
    unknown = [row for row in report.rows if row.verdict is Verdict.UNKNOWN]
    assert unknown
    assert all("budget of 3 calls" in row.observed for row in unknown)
    assert {row.promise for row in report.rows} == set(Promise)
    assert provider.in_place() == []  # the clean-up still ran


async def test_an_app_not_declared_a_sandbox_is_refused_before_any_call() -> None:
    provider = Provider(FakeClock())
    with pytest.raises(NotASandbox, match="not declared a sandbox"):
        await check_provider(payments(provider, sandbox=False), "payments", sandbox=SANDBOX)
    assert provider.calls == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s["steps"]["charge"].update(args={"amount": "-1"}), "amount"),
        (lambda s: s["steps"]["charge"].update(args={"amount": "1", "x": 1}), "x"),
        (lambda s: s["steps"]["charge"]["refused"][0].update(args={"amount": 0}), "refusal 1"),
        (lambda s: s["steps"].update(refund={"args": {}}), "refund"),
        (lambda s: s.update(other=1), "other"),
    ],
    ids=["bad-args", "extra-arg", "bad-refusal", "unknown-step", "unknown-field"],
)
async def test_bad_sandbox_arguments_are_refused_before_any_call(change: Any, message: str) -> None:
    provider = Provider(FakeClock())
    given = copy.deepcopy(SANDBOX)
    change(given)
    with pytest.raises(InvalidInput, match=message):
        await check_provider(payments(provider), "payments", sandbox=given)
    assert provider.calls == 0


async def test_unknown_catalogue_and_step_are_named() -> None:
    app = payments(Provider(FakeClock()))
    with pytest.raises(InvalidInput, match="no catalogue 'pay'; it has: payments"):
        await check_provider(app, "pay")
    with pytest.raises(InvalidInput, match="no step 'refund'; its steps: charge"):
        await check_provider(app, "payments", steps=["refund"])


async def test_without_sandbox_arguments_the_models_example_is_used() -> None:
    clock = FakeClock()
    provider = Provider(clock)
    app = payments(provider)
    report = await check_provider(app, "payments", options=options(app), clock=clock)

    assert report.steps[0].skipped is None
    assert {e.result["amount"] for e in provider.effects} == {"20"}  # the model's example
    found = verdicts(report)
    assert found[Promise.REFUSAL] is Verdict.UNKNOWN  # no refusal was given
