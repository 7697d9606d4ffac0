"""Shadow mode: plan and score a fixed request set; record every attempt; execute nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pivotal.planning import (
    PlanningMode,
    RequestInvalid,
    RulePlanner,
    commerce_rules,
    read_requests,
    run_shadow,
    shadow_report,
)

REQUESTS = [  # for orders of the order system, which plans are bound to (4490: one sku-1)
    # accepted on the first try
    {"text": "ship it", "catalogue": "fulfilment",
     "context": {"order_id": "4490", "amount": "120", "sku": "sku-1"}},
    # no rule fits: final at once, one attempt
    {"text": "where is my parcel?", "catalogue": "fulfilment", "context": {"order_id": "4471"}},
    # above the catalogue's limit of 500: rejected, then repeated twice
    {"text": "credit me 500", "catalogue": "fulfilment",
     "context": {"order_id": "4471", "amount": "900", "sku": "lamp"}},
    # the other catalogue, accepted on the first try
    {"catalogue": "checkout",
     "context": {"order_id": "order-1", "amount": "49.90", "sku": "sku-1", "quantity": 2}},
    # a warehouse that does not stock the product: a precondition, then repeated twice
    {"text": "ship from Z", "catalogue": "fulfilment",
     "context": {"order_id": "4490", "amount": "120", "sku": "sku-1", "warehouse": "Z"}},
]  # fmt: skip


def write_requests(path: Path, items: list[dict]) -> Path:
    lines = ["# shadow requests", *(json.dumps(i) for i in items), ""]
    path.write_text("\n".join(lines))
    return path


@pytest.fixture
def requests_file(tmp_path: Path) -> Path:
    return write_requests(tmp_path / "requests.jsonl", REQUESTS)


async def test_the_report_on_a_fixed_request_set(
    requests_file, app, store, ledger, services, clock
) -> None:
    requests = read_requests(requests_file, app)
    planner = RulePlanner(commerce_rules())
    runs = await run_shadow(requests, planner, app, ledger, batch_id="b-1", clock=clock)

    report = shadow_report(runs, "b-1")
    assert (report.requests, report.accepted, report.first_try, report.attempts) == (5, 2, 2, 9)
    assert report.acceptance_rate == pytest.approx(0.4)
    assert report.mean_attempts == pytest.approx(1.8)
    assert [(r.code, r.step, r.count) for r in report.reasons] == [
        ("repeated_proposal", None, 4),
        ("invalid_args", "authorize_payment", 3),
        ("invalid_args", "capture_payment", 3),
        ("precondition_failed", "reserve_stock", 3),
        ("no_rule_matched", None, 1),
    ]

    # every attempt is in the ledger, and the report from the ledger is the same
    kept = await ledger.runs(PlanningMode.SHADOW, "b-1")
    assert kept == runs
    assert [len(r.attempts) for r in kept] == [1, 1, 3, 1, 3]
    assert shadow_report(kept, "b-1") == report
    assert await ledger.latest_batch() == "b-1"

    # nothing executed, nothing submitted, nobody paged
    assert services.calls() == []
    assert await store.list_sagas() == []
    assert await ledger.escalations(None) == []
    assert all(r.saga_id is None for r in kept)


async def test_batches_are_reported_apart(requests_file, app, ledger, clock) -> None:
    requests = read_requests(requests_file, app)
    planner = RulePlanner(commerce_rules())
    await run_shadow(requests[:1], planner, app, ledger, batch_id="first", clock=clock)
    clock.advance(10)
    await run_shadow(requests[1:3], planner, app, ledger, batch_id="second", clock=clock)

    assert await ledger.latest_batch() == "second"
    first = shadow_report(await ledger.runs(PlanningMode.SHADOW, "first"), "first")
    second = shadow_report(await ledger.runs(PlanningMode.SHADOW, "second"), "second")
    every = shadow_report(await ledger.runs(PlanningMode.SHADOW))
    assert (first.requests, first.accepted) == (1, 1)
    assert (second.requests, second.accepted, second.attempts) == (2, 0, 4)
    assert every.requests == 3


def test_an_empty_report_divides_by_nothing() -> None:
    report = shadow_report([])
    assert (report.acceptance_rate, report.mean_attempts, report.reasons) == (0.0, 0.0, ())


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "requests.jsonl:3:"),
        (json.dumps({"text": "x"}), "must name a catalogue"),
        (json.dumps({"text": "x", "catalogue": "returns"}), "no catalogue named 'returns'"),
        (json.dumps({"text": "x", "catalogue": "checkout", "priority": 1}), "priority"),
        (json.dumps({"catalogue": "checkout", "context": {"a b": 1}}), "identifier"),
    ],
)
def test_a_bad_line_is_named_before_anything_runs(tmp_path, app, line, says) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(["# header", json.dumps(REQUESTS[0]), line]))
    with pytest.raises(RequestInvalid) as caught:
        read_requests(path, app)
    assert says in str(caught.value)
    assert caught.value.code == "request_invalid"
