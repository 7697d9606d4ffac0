"""``Store.search_sagas``: every filter, combined, paged by cursor and sorted, on both
ledgers; hostile values are only ever values."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from pivotal import SagaStatus
from pivotal.store import Store, search
from pivotal.store.search import MAX_TEXT, InvalidCursor, InvalidFilter, SagaFilter
from pivotal.views.report import parse_moment
from search_ledger import DAY, NOW, make, six


def parsed(**given: Any) -> SagaFilter:
    return SagaFilter.parse(given, NOW)


async def ids(store: Store, limit: int = 100, **given: Any) -> list[str]:
    found = await store.search_sagas(parsed(**given), limit)
    return [s.saga_id for s in found.items]


@pytest.fixture(params=["looked-up", "walked"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a filter on another table is read on SQLite (``SagaFilter.probes``): looked up
    (it keeps few sagas), or checked saga by saga (none counts as few)."""
    if request.param == "walked":
        monkeypatch.setattr(search, "FEW", 0)
    return str(request.param)


@pytest.fixture
async def ledger(store: Store, way: str) -> Store:
    return await six(store)


async def test_no_filter_lists_every_saga_newest_first(ledger: Store) -> None:
    assert await ids(ledger) == ["f", "e", "d", "c", "b", "a"]
    assert await ids(ledger, order="asc") == ["a", "b", "c", "d", "e", "f"]
    # b changed late, as late as f was created: ties by id
    assert await ids(ledger, sort="updated") == ["b", "f", "e", "d", "c", "a"]
    assert await ids(ledger, sort="updated", order="asc") == ["a", "c", "d", "e", "b", "f"]
    summary = (await ledger.search_sagas(parsed(catalogue="fulfilment"), 1)).items[0]
    assert (summary.saga_id, summary.status, summary.catalogue) == (
        "e",
        SagaStatus.COMPENSATED,
        "fulfilment",
    )
    assert summary.reason == "reserve_stock failed: out of stock"
    assert (summary.created_at, summary.updated_at) == (NOW - 2 * DAY, NOW - 2 * DAY)


async def test_each_filter(ledger: Store) -> None:
    assert await ids(ledger, status=["compensated"]) == ["e", "b"]
    assert await ids(ledger, status=["compensated", "needs_human"]) == ["e", "c", "b"]
    assert await ids(ledger, status=["running,awaiting_approval"]) == ["f", "d"]
    assert await ids(ledger, status=["resolved"]) == []
    assert await ids(ledger, catalogue="fulfilment") == ["e", "c"]
    assert await ids(ledger, created_since="3d") == ["f", "e", "d"]
    assert await ids(ledger, created_until="5d") == ["b", "a"]
    assert await ids(ledger, created_since="5d", created_until="4d") == ["c", "b"]
    iso = "2027-01-12T08:00:00+00:00"  # NOW is 2027-01-15T08:00:00Z
    assert await ids(ledger, created_since=iso) == ["f", "e", "d"]
    assert await ids(ledger, updated_since="1d") == ["f", "b"]
    assert await ids(ledger, updated_until="2d", updated_since="2d") == ["e"]
    assert await ids(ledger, actor_type="human") == ["d"]
    assert await ids(ledger, actor_type="agent", actor_id="planner-8") == ["b"]
    assert await ids(ledger, model="m-2") == ["c"]
    assert await ids(ledger, run_id="run-1") == ["b"]
    assert await ids(ledger, prompt_version="v2") == ["b"]
    assert await ids(ledger, on_behalf_of="ana@example.com") == ["c"]
    assert await ids(ledger, source_document_id="doc-9") == ["c"]
    assert await ids(ledger, actor_id="nobody") == []
    assert await ids(ledger, failed_step="charge_payment") == ["b"]
    assert await ids(ledger, failed_step="ship") == ["c"]  # ship ended unknown: failed too
    assert await ids(ledger, failed_step="refund") == []
    assert await ids(ledger, reason="declined") == ["b"]  # any case
    assert await ids(ledger, reason="FAILED") == ["e", "b"]
    assert await ids(ledger, reason="ed: ") == ["e", "b"]
    assert await ids(ledger, about=["order_id=4471"]) == ["b", "a"]
    assert await ids(ledger, about=["order_id=4472"]) == ["e", "b"]
    assert await ids(ledger, about=["order_id=4471", "order_id=4472"]) == ["b"]
    assert await ids(ledger, about=["customer_id=4471"]) == []


async def test_filters_combine(ledger: Store) -> None:
    assert await ids(ledger, status=["compensated"], catalogue="fulfilment") == ["e"]
    assert await ids(ledger, status=["compensated", "needs_human"], reason="failed") == ["e", "b"]
    assert await ids(ledger, about=["order_id=4472"], created_since="3d") == ["e"]
    assert await ids(ledger, model="m-1", catalogue="checkout", status=["running"]) == ["d"]
    assert await ids(ledger, failed_step="ship", on_behalf_of="ana@example.com") == ["c"]
    assert await ids(ledger, failed_step="ship", on_behalf_of="bo") == []
    found = await ids(
        ledger, status=["compensated", "needs_human"], sort="updated", order="asc", limit=2
    )
    assert found == ["c", "e"]


async def test_three_pages_without_duplicates_or_gaps_while_sagas_arrive(store: Store) -> None:
    for n in range(7):
        await make(store, f"s{n}", at=NOW + n, status=SagaStatus.COMPLETED)
    await make(store, "tie-a", at=NOW + 3)  # ties on created_at are ordered by id
    want = parsed(status=["completed"])
    seen: list[str] = []
    first = await store.search_sagas(want, 3)
    seen += [s.saga_id for s in first.items]
    await make(store, "late-1", at=NOW + 100)  # newer than every page: before the first
    second = await store.search_sagas(want, 3, first.next_cursor)
    seen += [s.saga_id for s in second.items]
    await make(store, "late-2", at=NOW + 101)
    third = await store.search_sagas(want, 3, second.next_cursor)
    seen += [s.saga_id for s in third.items]
    assert seen == ["s6", "s5", "s4", "s3", "tie-a", "s2", "s1", "s0"]
    assert third.next_cursor is None
    assert first.next_cursor is not None
    assert second.next_cursor is not None
    # a full last page says there is no more only when nothing follows
    exact = await store.search_sagas(want, 8, None)
    assert exact.next_cursor is not None  # the two late ones follow ... after a fresh start
    assert [s.saga_id for s in exact.items][:2] == ["late-2", "late-1"]
    last = await store.search_sagas(want, 10, None)
    assert len(last.items) == 10
    assert last.next_cursor is None


async def test_pages_in_every_order(ledger: Store) -> None:
    for sort in ("created", "updated"):
        for order in ("desc", "asc"):
            want = parsed(sort=sort, order=order)
            whole = [s.saga_id for s in (await ledger.search_sagas(want, 100)).items]
            paged: list[str] = []
            cursor = None
            while True:
                page = await ledger.search_sagas(want, 2, cursor)
                paged += [s.saga_id for s in page.items]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert paged == whole, (sort, order)
    several = parsed(status=["compensated", "needs_human", "completed"])
    page = await ledger.search_sagas(several, 2)
    rest = await ledger.search_sagas(several, 2, page.next_cursor)
    assert [s.saga_id for s in page.items + rest.items] == ["e", "c", "b", "a"]


HOSTILE = [
    "%",
    "_",
    "!",
    "%_!",
    "'",
    "''; DROP TABLE sagas; --",
    '"',
    "\\",
    "?",
    "%s",
    "ünïcødé ✓ 注文",
    "x" * MAX_TEXT,
]


@pytest.mark.parametrize("value", HOSTILE)
async def test_hostile_values_are_only_values(store: Store, way: str, value: str) -> None:
    await make(store, "plain", at=NOW, reason="nothing special here", catalogue="checkout")
    await make(
        store,
        "odd",
        at=NOW + 1,
        catalogue=value,
        reason=f"before {value} after",
        failed="ship",
        actor_id=value,
        subjects={"order_id": [value]},
    )
    assert await ids(store, reason=value) == ["odd"]
    assert await ids(store, catalogue=value) == ["odd"]
    assert await ids(store, actor_id=value) == ["odd"]
    assert await ids(store, about=[f"order_id={value}"]) == ["odd"]
    assert await ids(store) == ["odd", "plain"]  # nothing was dropped


async def test_ten_kilobytes_are_stored_and_found_by_a_part(store: Store, way: str) -> None:
    huge = "é%_'" * 2560  # 10 KB of characters a careless LIKE or quoting would trip on
    await make(store, "big", at=NOW, reason=huge, actor_id=huge, subjects={"order_id": [huge]})
    await make(store, "small", at=NOW + 1, reason="small")
    assert await ids(store, reason=huge[:MAX_TEXT]) == ["big"]
    assert await ids(store, reason=huge[1:MAX_TEXT]) == ["big"]
    with pytest.raises(InvalidFilter, match="longer than"):
        parsed(actor_id=huge)
    with pytest.raises(InvalidFilter, match="longer than"):
        parsed(about=[f"order_id={huge}"])


async def test_wildcards_match_only_themselves(store: Store) -> None:
    await make(store, "pct", at=NOW, reason="took 100% of it")
    await make(store, "under", at=NOW + 1, reason="a_b")
    await make(store, "plain", at=NOW + 2, reason="ab and 100 of it")
    assert await ids(store, reason="%") == ["pct"]
    assert await ids(store, reason="a_b") == ["under"]
    assert await ids(store, reason="100%") == ["pct"]
    assert await ids(store, reason="ünï") == []


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"status": ["finished"]}, "submitted, running, awaiting_approval"),
        ({"status": ["running,bogus"]}, "'bogus' is not one of"),
        ({"actor_type": "robot"}, "agent, human, system"),
        ({"sort": "name"}, "created, updated"),
        ({"order": "up"}, "desc, asc"),
        ({"created_since": "yesterday"}, "neither a duration"),
        ({"created_since": "1d", "created_until": "3d"}, "after"),
        ({"reason": "x" * (MAX_TEXT + 1)}, f"longer than {MAX_TEXT}"),
        ({"reason": "x" * 10_000}, f"longer than {MAX_TEXT}"),
        ({"catalogue": "a\nb"}, "control character"),
        ({"actor_id": "a\x00b"}, "control character"),
        ({"reason": "lone \udc80 surrogate"}, "not UTF-8"),
        ({"about": ["order_id"]}, "NAME=VALUE"),
        ({"about": ["=4471"]}, "NAME=VALUE"),
        ({"about": ["order id=4471"]}, "not an argument name"),
        ({"about": [f"k{n}=v" for n in range(9)]}, "at most 8"),
        ({"colour": "red"}, "filters are: status, catalogue"),
        ({"catalogue": ["a", "b"]}, "once"),
        ({"catalogue": 7}, "text"),
    ],
)
def test_every_filter_is_checked(given: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidFilter) as refused:
        SagaFilter.parse(given, NOW)
    assert says in refused.value.message


def test_blank_values_are_absent_and_the_query_reads_back() -> None:
    blank = {"catalogue": "", "reason": "  ", "status": [""], "about": ["", " "]}
    assert SagaFilter.parse(blank, NOW) == SagaFilter()
    assert SagaFilter().plain
    assert parsed(status=["running"]).plain
    assert not parsed(status=["running", "completed"]).plain
    assert not parsed(order="asc").plain
    full = parsed(
        status=["running", "compensated"],
        catalogue="c",
        created_since="7d",
        updated_until="2026-11-01",
        actor_id="a",
        reason="r",
        about=["order_id=1"],
        sort="updated",
        order="asc",
    )
    assert not full.plain
    assert SagaFilter.parse(full.query(), NOW) == full


@pytest.mark.parametrize(
    "text",
    ["7d", " 24h ", "30m", "45s", "2w", "999999d", "2026-11-01", "2026-11-01T10:00:00+02:00"],
)
def test_times_read_as_the_report_reads_them(text: str) -> None:
    assert parsed(created_since=text).created_since == parse_moment(text, NOW)


def tampered(body: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage",
        "%%%",
        "x" * 10_000,
        tampered({"k": 1}),
        tampered(["created", "desc", "NaN", "s1"]),
        tampered(["created", "desc", 1e999, "s1"]),
        tampered(["created", "desc", True, "s1"]),
        tampered(["created", "desc", 1.0, 7]),
        tampered(["created", "desc", 1.0]),
        tampered(["created", "desc", 1.0, "nul\x00id"]),
        tampered(["created", "desc", 1.0, "\ud800"]),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
async def test_a_malformed_cursor_is_refused(ledger: Store, cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        await ledger.search_sagas(parsed(), 2, cursor)


async def test_a_cursor_keeps_its_order_and_limits_are_checked(ledger: Store) -> None:
    page = await ledger.search_sagas(parsed(), 2)
    assert page.next_cursor is not None
    with pytest.raises(InvalidCursor, match="keep the order"):
        await ledger.search_sagas(parsed(sort="updated"), 2, page.next_cursor)
    # a cursor is a position, not a filter: another filter may page from it
    more = await ledger.search_sagas(parsed(status=["compensated"]), 2, page.next_cursor)
    assert [s.saga_id for s in more.items] == ["b"]
    for limit in (0, -1, 10_001):
        with pytest.raises(InvalidFilter, match="limit"):
            await ledger.search_sagas(parsed(), limit)
