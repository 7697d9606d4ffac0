"""Saved searches in any SQL ledger (``store.saved``): save (insert or replace by person and
name), list a person's, read one, delete one.

Part of every ``SQLStore``, written once over the backend primitives. A save is one guarded
statement: it inserts only while the person keeps fewer than ``MAX_SAVED`` searches, or
replaces one of that name (keeping when it was first saved), so the bound holds in the
transaction that writes. On PostgreSQL, whose transactions run side by side, the saves of one
person take a lock of theirs first (SQLite's writer runs one transaction at a time already).
The time is the ledger's own, read once for the check of the query and the write."""

from __future__ import annotations

import hashlib
from typing import ClassVar

from pivotal.store.primitives import Row, SQLPrimitives, Stmt
from pivotal.store.queries import LEDGER_TIME, Dialect
from pivotal.store.saved import (
    MAX_SAVED,
    SavedSearch,
    SavedSearchesFull,
    canonical_query,
    name_of,
    person_of,
)

COLUMNS = "person, name, query, created_at, updated_at"
# inserted while the person keeps fewer than the bound, or replacing one of that name;
# no row returned: refused. Parameters: the row; the person, the bound; the person, the name.
SAVE = (
    f"INSERT INTO saved_searches ({COLUMNS}) SELECT ?, ?, ?, ?, ? "
    "WHERE (SELECT COUNT(*) FROM saved_searches WHERE person = ?) < ? "
    "OR EXISTS (SELECT 1 FROM saved_searches WHERE person = ? AND name = ?) "
    "ON CONFLICT (person, name) DO UPDATE SET query = excluded.query, "
    f"updated_at = excluded.updated_at RETURNING {COLUMNS}"
)
LIST = f"SELECT {COLUMNS} FROM saved_searches WHERE person = ?"
ONE = f"SELECT {COLUMNS} FROM saved_searches WHERE person = ? AND name = ?"
DELETE = "DELETE FROM saved_searches WHERE person = ? AND name = ?"
PG_LOCK = "SELECT pg_advisory_xact_lock(?)"  # one save of a person's at a time


def lock_key(person: str) -> int:
    """The advisory lock of ``person``'s saves on PostgreSQL (a signed 64-bit number)."""
    digest = hashlib.sha256(f"saved_searches:{person}".encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


def _search(row: Row) -> SavedSearch:
    person, name, query, created_at, updated_at = row
    return SavedSearch(str(person), str(name), str(query), float(created_at), float(updated_at))


class SQLSaved(SQLPrimitives):
    """A person's saved searches over the backend primitives."""

    dialect: ClassVar[Dialect]  # the store's (``SQLStore`` sets it)

    async def save_search(self, person: str, name: str, query: str) -> SavedSearch:
        """Keep ``query`` as ``person``'s search ``name``, replacing one of that name;
        ``SavedSearchesFull`` when they keep ``MAX_SAVED`` already. Nothing is written when
        anything is refused."""
        who, kept = person_of(person), name_of(name)
        now = float((await self._fetch(LEDGER_TIME[self.dialect.name]))[0][0])
        canonical = canonical_query(query, now)
        lock = [Stmt(PG_LOCK, (lock_key(who),))] if self.dialect.name != "sqlite" else []
        params = (who, kept, canonical, now, now, who, MAX_SAVED, who, kept)
        result = await self._batch([*lock, Stmt(SAVE, params, returning=True)])
        saved = result.rows[-1] if result.rows else []
        if not saved:
            raise SavedSearchesFull(
                f"at most {MAX_SAVED} saved searches a person: delete one to save "
                f"{kept[:80]!r}; nothing was saved"
            )
        return _search(saved[0])

    async def saved_searches(self, person: str) -> list[SavedSearch]:
        """``person``'s saved searches, by name."""
        found = [_search(r) for r in await self._fetch(LIST, (person_of(person),))]
        return sorted(found, key=lambda s: (s.name.casefold(), s.name))

    async def saved_search(self, person: str, name: str) -> SavedSearch | None:
        """``person``'s saved search ``name`` (None: they have none of that name)."""
        found = await self._fetch(ONE, (person_of(person), name_of(name)))
        return _search(found[0]) if found else None

    async def delete_search(self, person: str, name: str) -> bool:
        """Delete ``person``'s saved search ``name``; False when they had none."""
        stmt = Stmt(DELETE, (person_of(person), name_of(name)), guard=True)
        return not (await self._batch([stmt])).stopped
