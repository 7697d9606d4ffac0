"""Two tokens created at once for one person (not marked as the same person on purpose)
cannot both be made: the ledger refuses the second in the transaction that would write it,
on both ledgers, however the name is spelt."""

from __future__ import annotations

import asyncio

import pytest

from pivotal import SQLiteStore
from pivotal.errors import NameTaken
from pivotal.people.principals import hash_token
from pivotal.store import Store
from pivotal.store.postgres import PostgresStore


async def another_process(store: Store, request: pytest.FixtureRequest) -> Store:
    """Another process's connection to the same ledger."""
    if isinstance(store, SQLiteStore):
        other: Store = SQLiteStore(store.path)
    else:
        other = PostgresStore(request.getfixturevalue("postgres_url"))
    await other.open()
    return other


@pytest.mark.parametrize("spelling", ["ann", "Ann", "a\u00adnn", "\u0430nn"])
async def test_one_person_gets_one_token_when_two_are_made_at_once(
    store: Store, spelling: str, request: pytest.FixtureRequest
) -> None:
    other = await another_process(store, request)
    try:
        made = await asyncio.gather(
            store.create_token("ann", "approver", hash_token("pvt_1"), 1.0, sole=True),
            other.create_token(spelling, "approver", hash_token("pvt_2"), 1.0, sole=True),
            return_exceptions=True,
        )
    finally:
        await other.close()
    assert sorted(type(m).__name__ for m in made) == ["NameTaken", "Token"], made
    assert len([t for t in await store.list_tokens() if t.revoked_at is None]) == 1


async def test_a_revoked_token_frees_its_name_and_same_person_tokens_may_share_it(
    store: Store,
) -> None:
    first = await store.create_token("ann", "approver", hash_token("pvt_1"), 1.0, sole=True)
    with pytest.raises(NameTaken):
        await store.create_token("ANN", "operator", hash_token("pvt_2"), 2.0, sole=True)
    await store.create_token("ann", "operator", hash_token("pvt_3"), 3.0)  # the same person
    await store.revoke_token(first.id, 4.0)
    await store.revoke_token((await store.list_tokens())[-1].id, 4.0)
    await store.create_token("Ann", "approver", hash_token("pvt_4"), 5.0, sole=True)
