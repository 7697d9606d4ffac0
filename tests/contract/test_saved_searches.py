"""Saved searches on both ledgers: a person's own, by name; saving again replaces; bounded
(name, query, how many); a query is checked by the search's own parser and kept as typed,
canonical; anything refused writes nothing."""

from __future__ import annotations

import asyncio
import re

import pytest

from pivotal import SQLiteStore
from pivotal.store import Store
from pivotal.store.postgres import PostgresStore
from pivotal.store.saved import (
    MAX_NAME,
    MAX_QUERY,
    MAX_SAVED,
    InvalidSavedSearch,
    SavedSearchesFull,
)
from pivotal.store.search import InvalidFilter, SagaFilter


async def names(store: Store, person: str) -> list[str]:
    return [s.name for s in await store.saved_searches(person)]


async def test_a_search_is_saved_by_name_with_the_ledgers_time(store: Store) -> None:
    before = await store.ledger_time()
    saved = await store.save_search(
        "ann", "failed this week", "status=compensated&created_since=7d"
    )
    after = await store.ledger_time()
    assert saved.name == "failed this week"
    assert saved.query == "status=compensated&created_since=7d"  # relative: stays relative
    assert before <= saved.created_at == saved.updated_at <= after
    assert await store.saved_search("ann", "failed this week") == saved
    assert await store.saved_searches("ann") == [saved]
    assert await store.saved_search("ann", "another") is None


async def test_saving_a_name_again_replaces_its_query_and_keeps_when_it_was_first_saved(
    store: Store,
) -> None:
    first = await store.save_search("ann", "mine", "status=running")
    again = await store.save_search("ann", "  mine ", "status=needs_human&catalogue=checkout")
    assert again.name == "mine"
    assert again.query == "status=needs_human&catalogue=checkout"
    assert again.created_at == first.created_at
    assert again.updated_at >= first.updated_at
    assert await store.saved_searches("ann") == [again]


async def test_each_person_sees_only_their_own_under_their_canonical_name(store: Store) -> None:
    await store.save_search("ann", "stuck", "status=needs_human")
    await store.save_search("bob", "stuck", "status=running")
    await store.save_search("bob", "checkouts", "catalogue=checkout")
    assert await names(store, "ann") == ["stuck"]
    assert await names(store, "bob") == ["checkouts", "stuck"]
    # one person however the name is spelt (principals.canonical_person)
    for spelling in ("Ann", "ANN", "a\u00adnn", "\u0430nn", " ann "):
        assert await names(store, spelling) == ["stuck"]
        found = await store.saved_search(spelling, "stuck")
        assert found is not None
        assert found.query == "status=needs_human"
    assert await store.saved_search("carl", "stuck") is None
    assert not await store.delete_search("carl", "stuck")  # not carl's to delete
    assert await names(store, "ann") == ["stuck"]


async def test_delete_removes_only_that_search(store: Store) -> None:
    await store.save_search("ann", "one", "status=running")
    await store.save_search("ann", "two", "status=completed")
    await store.save_search("bob", "one", "status=running")
    assert await store.delete_search("Ann", "one")
    assert not await store.delete_search("ann", "one")  # gone already
    assert await names(store, "ann") == ["two"]
    assert await names(store, "bob") == ["one"]


async def test_the_query_is_kept_canonical_as_typed(store: Store) -> None:
    saved = await store.save_search(
        "ann",
        "typed",
        "?status=compensated&catalogue=&reason=card+declined&about=order_id%3D4471"
        "&status=needs_human&created_since=%207d",
    )
    # blank filters left out; the others in their order, as typed, URL-encoded as the page
    assert saved.query == (
        "status=compensated&reason=card+declined&about=order_id%3D4471&status=needs_human"
        "&created_since=+7d"
    )


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("status=compensated&colour=red", "unknown filter 'colour'"),
        ("colour=", "unknown filter 'colour'"),  # a misspelt filter, blank or not
        ("saved=other", "unknown filter 'saved'"),
        ("status=compensated&cursor=abc", "not paging (cursor)"),
        ("limit=10", "not paging (limit)"),
        ("status=nope", "status 'nope' is not one of"),
        ("created_since=last+week", "created_since"),
        ("created_since=1d&created_until=3d", "nothing could match"),
        ("catalogue=a&catalogue=b", "catalogue may be given once"),
        ("reason=%00", "control character"),
        ("reason=%FF", "in UTF-8"),
        ("status=running&" * 101, "at most 100 parameters"),
        ("reason=" + "x" * MAX_QUERY, f"at most {MAX_QUERY} characters"),
    ],
)
async def test_a_query_no_search_understands_is_refused_and_nothing_is_written(
    store: Store, query: str, says: str
) -> None:
    await store.save_search("ann", "kept", "status=running")
    for name in ("new", "kept"):  # neither a new search nor a replacement
        with pytest.raises(InvalidFilter, match=re.escape(says)):
            await store.save_search("ann", name, query)
    [kept] = await store.saved_searches("ann")
    assert (kept.name, kept.query) == ("kept", "status=running")


def test_every_query_a_saved_search_keeps_is_one_the_search_reads_back() -> None:
    from pivotal.store.saved import canonical_query, given_of

    typed = "status=compensated&about=order_id%3D4471&reason=50%25+off&created_since=7d"
    kept = canonical_query(typed, 1_800_000_000.0)
    assert kept == typed
    wanted = SagaFilter.parse(given_of(kept), 1_800_000_000.0)
    assert wanted.about == (("order_id", "4471"),)
    assert wanted.reason == "50% off"
    assert wanted.created_since == 1_800_000_000.0 - 7 * 86_400


@pytest.mark.parametrize(
    "name",
    ["", "   ", "x" * (MAX_NAME + 1), "a/b", "..", ".", "tab\there", "nul\x00", "rtl\u202eevil"],
)
async def test_a_bad_name_is_refused_and_nothing_is_written(store: Store, name: str) -> None:
    with pytest.raises(InvalidSavedSearch) as refused:
        await store.save_search("ann", name, "status=running")
    assert refused.value.code == "invalid_saved_search"
    assert await store.saved_searches("ann") == []


async def test_a_name_of_the_longest_length_and_any_script_is_kept(store: Store) -> None:
    for name in ("x" * MAX_NAME, "Zahlungen \u2013 abgelehnt", "支付失败", "50% off? #1"):
        saved = await store.save_search("ann", name, "status=compensated")
        assert await store.saved_search("ann", name) == saved


@pytest.mark.parametrize("person", ["", "   ", "\u200b\u00ad", "x" * 201])
async def test_no_person_has_saved_searches(store: Store, person: str) -> None:
    with pytest.raises(InvalidSavedSearch):
        await store.save_search(person, "mine", "status=running")
    with pytest.raises(InvalidSavedSearch):
        await store.saved_searches(person)


async def test_a_person_keeps_at_most_the_bound_and_may_still_replace_one(store: Store) -> None:
    for n in range(MAX_SAVED):
        await store.save_search("ann", f"s{n:02}", "status=running")
    with pytest.raises(SavedSearchesFull) as full:
        await store.save_search("ANN", "one more", "status=completed")
    assert full.value.code == "saved_searches_full"
    assert "one more" not in await names(store, "ann")
    assert len(await names(store, "ann")) == MAX_SAVED
    replaced = await store.save_search("ann", "s07", "status=completed")  # a name kept: fine
    assert replaced.query == "status=completed"
    await store.save_search("bob", "his own", "status=running")  # another person's bound
    assert await store.delete_search("ann", "s00")
    await store.save_search("ann", "one more", "status=completed")
    assert len(await names(store, "ann")) == MAX_SAVED


async def another_process(store: Store, request: pytest.FixtureRequest) -> Store:
    """Another process's connection to the same ledger."""
    if isinstance(store, SQLiteStore):
        other: Store = SQLiteStore(store.path)
    else:
        other = PostgresStore(request.getfixturevalue("postgres_url"))
    await other.open()
    return other


async def test_two_saves_at_once_never_pass_the_bound(
    store: Store, request: pytest.FixtureRequest
) -> None:
    for n in range(MAX_SAVED - 1):
        await store.save_search("ann", f"s{n:02}", "status=running")
    other = await another_process(store, request)
    try:
        made = await asyncio.gather(
            *(
                (store if n % 2 else other).save_search("ann", f"new {n}", "status=running")
                for n in range(6)
            ),
            return_exceptions=True,
        )
    finally:
        await other.close()
    assert sorted(type(m).__name__ for m in made) == ["SavedSearch"] + ["SavedSearchesFull"] * 5
    assert len(await names(store, "ann")) == MAX_SAVED
