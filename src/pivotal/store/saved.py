"""Saved searches: a search of the sagas kept by name, per person, in the ledger.

A saved search holds the query of a search as typed (``status=compensated&created_since=7d``:
a relative time stays relative, and is read again each time the search runs), checked by the
very parser every surface searches with (``SagaFilter.parse``): a saved search never holds a
filter no search understands, nor paging (``cursor``, ``limit``, ``offset`` are given when it
runs). Its query is kept canonical: only its filters, blank ones left out, in the order given,
URL-encoded as the sagas page's "Link to this search" writes it.

It is a person's own: kept under their canonical name (``principals.canonical_person``, the one
name people are told apart by), so "Ann" and "ann" share theirs and no one else sees them.
Bounded: a name of 1 to ``MAX_NAME`` printable characters (trimmed; never ``/``, it is a part
of a path), a query of at most ``MAX_QUERY`` characters, at most ``MAX_SAVED`` a person. Bad
input is refused with a code, and changes nothing."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode

from pivotal.errors import InvalidInput, PivotalError
from pivotal.people.principals import canonical_person
from pivotal.store.search import FIELDS, PAGING, InvalidFilter, SagaFilter, refuse_unknown

MAX_NAME = 80  # characters of a saved search's name
MAX_QUERY = 4000  # characters of its query (as the sagas page's bulk form carries a search)
MAX_SAVED = 50  # saved searches a person may keep
MAX_PERSON = 200  # characters of the name of the person they are kept for
MAX_PARAMETERS = 100  # parameters of a query
SAVED = "saved"  # the parameter (the option: --saved) that runs a saved search by name


@dataclass(frozen=True, slots=True)
class SavedSearch:
    """A person's search, by name: its query as typed (canonical), and when it was first
    saved and last replaced, on the ledger's clock."""

    person: str  # canonical (``principals.canonical_person``): for comparing, not showing
    name: str
    query: str
    created_at: float
    updated_at: float

    def shown(self) -> dict[str, Any]:
        """As every surface shows it: never the canonical person (it is the one asking)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "person"}


class InvalidSavedSearch(InvalidInput):
    """A saved search's name, or the person it is for, is not one a search may be kept
    under; nothing was saved."""

    code = "invalid_saved_search"


class SavedSearchesFull(InvalidInput):
    """This person keeps as many saved searches as one may; delete one first. Nothing was
    saved."""

    code = "saved_searches_full"


class SavedSearchNotFound(PivotalError):
    """This person has no saved search of this name."""

    code = "saved_search_not_found"


def person_of(name: str) -> str:
    """The canonical name a person's searches are kept under; ``InvalidSavedSearch`` for a
    name that names no one, or a long one."""
    if not isinstance(name, str) or len(name) > MAX_PERSON:
        raise InvalidSavedSearch(f"a person's name is text of at most {MAX_PERSON} characters")
    person = canonical_person(name)
    if not person:
        raise InvalidSavedSearch("the name names no one: saved searches are a person's own")
    return person


def name_of(name: str) -> str:
    """A saved search's name as kept: trimmed, in NFC; ``InvalidSavedSearch`` unless it is 1
    to ``MAX_NAME`` printable characters, without ``/``."""
    if not isinstance(name, str):
        raise InvalidSavedSearch("a saved search's name is text")
    kept = unicodedata.normalize("NFC", name.strip())
    if not 1 <= len(kept) <= MAX_NAME:
        raise InvalidSavedSearch(f"a saved search's name is 1 to {MAX_NAME} characters")
    if not kept.isprintable():
        raise InvalidSavedSearch(
            "a saved search's name holds a control, invisible or formatting character"
        )
    if "/" in kept or kept in (".", ".."):
        raise InvalidSavedSearch("a saved search's name is part of a path: no '/', not . or ..")
    return kept


def given_of(query: str) -> dict[str, list[str]]:
    """The parameters of a query (``status=running&about=order_id%3D4471``), each name with
    the values given for it, in order; blank values left out. ``InvalidFilter`` for a query
    that is no query of filters: too long, not UTF-8, or naming anything else."""
    found: dict[str, list[str]] = {}
    for name, value in _pairs(query):
        found.setdefault(name, []).append(value)
    return found


def canonical_query(query: str, now: float) -> str:
    """``query`` as a saved search keeps it: its filters as given, blank ones left out (a
    leading ``?`` too), URL-encoded as the sagas page's "Link to this search" writes them.
    Refused as ``GET /v1/sagas`` refuses it (``InvalidFilter``), and paging too: a saved
    search holds what to look for, not where a page starts."""
    SagaFilter.parse(given_of(query), now)  # refuses what no search understands
    return urlencode(_pairs(query))


def _pairs(query: str) -> list[tuple[str, str]]:
    """The filters of ``query`` given a value, in order (``InvalidFilter``: see
    ``given_of``)."""
    if not isinstance(query, str):
        raise InvalidFilter("a search's query is text, e.g. status=compensated&created_since=7d")
    if len(query) > MAX_QUERY:
        raise InvalidFilter(f"a saved search's query is at most {MAX_QUERY} characters")
    try:
        pairs = parse_qsl(
            query.removeprefix("?"),
            keep_blank_values=True,  # a misspelt filter is refused, blank or not
            errors="strict",
            max_num_fields=MAX_PARAMETERS,
        )
    except (ValueError, UnicodeError):  # too many fields, or percent-escapes of no UTF-8
        raise InvalidFilter(
            f"the query is no search: at most {MAX_PARAMETERS} parameters, in UTF-8"
        ) from None
    paging = sorted({n for n, _ in pairs if n in PAGING})
    if paging:
        raise InvalidFilter(
            f"a saved search holds filters, not paging ({', '.join(paging)}): those are "
            "given when it runs"
        )
    refuse_unknown(n for n, _ in pairs)
    return [(n, v) for n, v in pairs if v.strip()]


class SavedSearches(Protocol):
    async def saved_search(self, person: str, name: str) -> SavedSearch | None: ...


async def filters_of(
    store: SavedSearches, person: str, name: str, given: Iterable[str] = ()
) -> dict[str, list[str]]:
    """The filters of ``person``'s saved search ``name``, as ``SagaFilter.parse`` reads a
    surface's parameters: what ``saved=NAME`` runs. ``given``: the other parameters the
    surface received; a filter among them is refused (``InvalidFilter``): a saved search
    runs as it was saved (save it again to change it). ``SavedSearchNotFound`` when the
    person has none of that name (another's is never theirs)."""
    beside = sorted({n for n in given if n in FIELDS})
    if beside:
        raise InvalidFilter(
            f"{SAVED} runs a saved search as it was saved: no filter beside it "
            f"({beside[0][:40]}); save it again to change it"
        )
    found = await store.saved_search(person, name)
    if found is None:
        raise not_found(name)
    return given_of(found.query)


def not_found(name: str) -> SavedSearchNotFound:
    """What a person is told of a saved search of theirs that is not there."""
    return SavedSearchNotFound(f"no saved search named {name[:MAX_NAME]!r} is yours")
