"""Searching the ledger's sagas: one filter, parsed once, for the CLI, the API and the pages.

``SagaFilter.parse`` reads what an operator typed (every surface hands it the same names,
``FIELDS``) and refuses anything it does not understand with ``InvalidFilter``, naming what
it accepts; ``Store.search_sagas`` runs it, one page at a time, newest first by default.

A page ends with an opaque cursor: the sort key and id of its last saga, as base64url JSON.
The next page starts strictly after it (keyset paging), so sagas created meanwhile never
shift a page (in ``created`` order they land before the first), nothing is shown twice and
nothing is skipped. A cursor is bound to its order: one made for another sort is refused.

Every value is bound as a parameter, never written into the SQL; the SQL here is written
for both ledgers (``?`` placeholders), but for how each reads a field of a provenance
record's JSON (``provenance_field``, the same expression the indexes of migration 14 are
built on).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from pivotal.declarations.plan import ActorType
from pivotal.errors import InvalidInput
from pivotal.moments import BadMoment, parse_moment
from pivotal.sagas.state import SagaStatus

MAX_TEXT = 200  # characters of any text filter
MAX_ABOUT = 8  # argument values one search may name
MAX_CURSOR = 600  # characters of a cursor
MAX_LIMIT = 10_000  # sagas one search may return
# up to this many sagas let through by the filters on other tables are read and sorted;
# more, and the sagas are walked in order instead (``SagaFilter.probes``)
FEW = 2_000
SORTS = ("created", "updated")
ORDERS = ("desc", "asc")
# the fields of a provenance record a search may name, each exactly (an agent, a model)
PROPOSER = (
    "actor_type",
    "actor_id",
    "model",
    "run_id",
    "prompt_version",
    "on_behalf_of",
    "source_document_id",
)
# a step that failed: it took no effect (failed), or its retries ran out in doubt (unknown)
FAILED_STEP_STATUSES = ("failed", "unknown")
# the ledgers on which a filter on another table is checked saga by saga unless it keeps
# few sagas (``SagaFilter.probes``)
_WALKED = ("sqlite",)
_SUMMARY = "s.saga_id, s.catalogue, s.status, s.reason, s.created_at, s.updated_at"
_ESCAPE = "!"


class InvalidFilter(InvalidInput):
    """A search filter is not understood; it names what it accepts."""

    code = "invalid_filter"


class InvalidCursor(InvalidInput):
    """A cursor was not made by this search (malformed, or for another order)."""

    code = "invalid_cursor"


def provenance_field(dialect: str, field: str, table: str = "") -> str:
    """How ``dialect`` reads ``field`` of a provenance record's JSON ``body`` (as text; NULL
    when unset): the very expression migration 14 indexes, so that the lookup uses it."""
    if field not in PROPOSER:  # never a field name from outside
        raise ValueError(f"not a provenance field: {field!r}")
    body = f"{table}.body" if table else "body"
    if dialect == "sqlite":
        return f"json_extract({body}, '$.{field}')"
    return f"(({body}::jsonb) ->> '{field}')"


@dataclass(frozen=True, slots=True)
class SagaFilter:
    """What a search keeps: every field given must hold (None and empty: any)."""

    status: tuple[SagaStatus, ...] = ()  # any of these
    catalogue: str | None = None
    created_since: float | None = None  # created_since <= created_at <= created_until
    created_until: float | None = None
    updated_since: float | None = None
    updated_until: float | None = None
    actor_type: str | None = None
    actor_id: str | None = None
    model: str | None = None
    run_id: str | None = None
    prompt_version: str | None = None
    on_behalf_of: str | None = None
    source_document_id: str | None = None
    failed_step: str | None = None  # the name of a step that failed
    reason: str | None = None  # a part of the saga's reason, in any case
    about: tuple[tuple[str, str], ...] = ()  # (argument name, canonical id): each named
    sort: Literal["created", "updated"] = "created"
    order: Literal["desc", "asc"] = "desc"

    @classmethod
    def parse(cls, given: Mapping[str, Any], now: float) -> SagaFilter:
        """The filter from the raw values a surface received, by the names of ``FIELDS``
        (a repeatable one as a list); times as ``moments.parse_moment`` reads them (``7d``,
        ``24h``, an ISO date or date-time, UTC unless it says). Blank values are absent.
        ``InvalidFilter`` for anything else, naming what is accepted."""
        refuse_unknown(given)
        values: dict[str, Any] = {}
        statuses = [_text(s, "status") for s in _many(given.get("status"), "status")]
        values["status"] = tuple(dict.fromkeys(_status(s) for s in _split(statuses)))
        for name in ("catalogue", *PROPOSER, "failed_step", "reason"):
            text = _one(given.get(name), name)
            if text is not None:
                values[name] = _text(text, name)
        if values.get("actor_type") is not None:
            values["actor_type"] = _choice(values["actor_type"], "actor_type", _ACTOR_TYPES)
        for name in ("created_since", "created_until", "updated_since", "updated_until"):
            text = _one(given.get(name), name)
            if text is not None:
                values[name] = _moment(_text(text, name), name, now)
        for start, end in (("created_since", "created_until"), ("updated_since", "updated_until")):
            if start in values and end in values and values[start] > values[end]:
                raise InvalidFilter(f"{start} is after {end}: nothing could match")
        about = [_about(_text(a, "about", 65)) for a in _many(given.get("about"), "about")]
        if len(about) > MAX_ABOUT:
            raise InvalidFilter(f"about: at most {MAX_ABOUT} argument values per search")
        values["about"] = tuple(dict.fromkeys(about))
        sort = _one(given.get("sort"), "sort")
        if sort is not None:
            values["sort"] = _choice(sort, "sort", SORTS)
        order = _one(given.get("order"), "order")
        if order is not None:
            values["order"] = _choice(order, "order", ORDERS)
        return cls(**values)

    @staticmethod
    def given(params: Mapping[str, Any]) -> dict[str, Any]:
        """What a surface received, for ``parse``: its parameters named as the filters
        (``FIELDS``), each of which it must have; its other parameters are left out."""
        return {name: params[name] for name in FIELDS}

    @property
    def plain(self) -> bool:
        """Whether it is the listing ``list_sagas`` gives: at most one status, nothing else,
        newest first (what paging by offset, and a count of the whole, still serve)."""
        return len(self.status) <= 1 and replace(self, status=()) == SagaFilter()

    def query(self) -> dict[str, str | list[str]]:
        """The filter as the query of a link (``parse`` reads it back as given): for the
        pages' "next page" link. Times are written as ISO date-times."""
        found: dict[str, str | list[str]] = {}
        if self.status:
            found["status"] = [s.value for s in self.status]
        for name in ("catalogue", *PROPOSER, "failed_step", "reason"):
            value = getattr(self, name)
            if value is not None:
                found[name] = value
        for name in ("created_since", "created_until", "updated_since", "updated_until"):
            value = getattr(self, name)
            if value is not None:
                found[name] = _iso(value)
        if self.about:
            found["about"] = [f"{n}={v}" for n, v in self.about]
        if self.sort != "created":
            found["sort"] = self.sort
        if self.order != "desc":
            found["order"] = self.order
        return found

    # -- the SQL ------------------------------------------------------------------------------
    #
    # The sagas' own columns (status, catalogue, times, the order) are served by the sagas'
    # indexes of migration 14, walked in the page's order: a page reads a few rows past its
    # last. A filter on another table (the proposer's provenance record, a failed step, an
    # argument value) is either checked saga by saga on that walk (by key: cheap, and what
    # a filter that keeps many sagas wants), or, when it keeps few sagas (``probes``),
    # those few are looked up by its index and sorted (``sql(lookup=n)``). That choice is
    # made here for SQLite, whose planner keeps no statistics unless told to ANALYZE; to
    # PostgreSQL's planner, which does, every such filter is given as a lookup (``IN``), and
    # it chooses itself (measured: 3 to 10 times faster there than walking by key).

    def probes(self, dialect: str) -> list[tuple[str, tuple[Any, ...]]]:
        """For each filter on another table, in the order of ``_lookups``, how many sagas
        it keeps, counted up to ``FEW`` on its index (a few hundred microseconds each)."""
        found: list[tuple[str, tuple[Any, ...]]] = []
        if dialect not in _WALKED:
            return found  # its planner keeps statistics of its own: it chooses
        for clause, params in self._lookups(dialect, correlated=False, bounded=True):
            inner = f"SELECT 1 FROM sagas s WHERE {clause} LIMIT ?"
            found.append((f"SELECT COUNT(*) FROM ({inner}) AS few", (*params, FEW)))
        return found

    def sql(
        self,
        dialect: str,
        limit: int,
        after: tuple[float, str] | None,
        *,
        lookup: int | None = None,
    ) -> tuple[str, tuple[Any, ...]]:
        """The statement listing at most ``limit`` sagas of this filter after ``after`` (the
        cursor's sort key and saga id), and its parameters. ``lookup``: the filter on
        another table (by its place in ``probes``) that keeps few sagas: they are read by
        its index, the other conditions only checked (written so that no index serves
        them), and sorted. Otherwise several statuses are read as one ordered branch per
        status (each walks its own ``(status, time)`` index), merged: the ledger never
        sorts all the sagas of a common status."""
        key = "created_at" if self.sort == "created" else "updated_at"
        direction = "DESC" if self.order == "desc" else "ASC"
        # ties in time by id, in either order (as ``list_sagas`` has always listed them)
        order_by = f" ORDER BY {key} {direction}, saga_id LIMIT ?"
        indexed = lookup is None
        where, params = self._where(key, after, indexed=indexed)
        lookups = self._lookups(dialect, correlated=dialect in _WALKED)
        if lookup is not None:
            lookups[lookup] = self._lookups(dialect, correlated=False)[lookup]
        where += [c for c, _ in lookups]
        params += [v for _, p in lookups for v in p]
        statuses = [s.value for s in self.status]
        if not indexed and statuses:  # few sagas: one read, whatever their statuses
            where.insert(0, f"s.status || '' IN ({', '.join('?' * len(statuses))})")
            params[:0] = statuses
        elif len(statuses) == 1:
            where.insert(0, "s.status = ?")
            params[:0] = statuses
        if indexed and len(statuses) > 1:
            branches, all_params = [], []
            for n, status in enumerate(statuses):
                branch = f"SELECT {_SUMMARY} FROM sagas s{_and(['s.status = ?', *where])}"
                branches.append(f"SELECT * FROM ({branch}{_prefixed(order_by)}) AS b{n}")
                all_params += [status, *params, limit]
            return " UNION ALL ".join(branches) + order_by, (*all_params, limit)
        sql = f"SELECT {_SUMMARY} FROM sagas s{_and(where)}" + _prefixed(order_by)
        return sql, (*params, limit)

    def _where(
        self, key: str, after: tuple[float, str] | None, *, indexed: bool
    ) -> tuple[list[str], list[Any]]:
        """The conditions on the sagas' own columns (but the status); not ``indexed``:
        written so that no index serves them (``x || ''``, ``x + 0``), only checked."""
        text, number = ("s.{}", "s.{}") if indexed else ("s.{} || ''", "(s.{} + 0)")
        clauses: list[str] = []
        params: list[Any] = []
        if self.catalogue is not None:
            clauses.append(f"{text.format('catalogue')} = ?")
            params.append(self.catalogue)
        for column in ("created", "updated"):
            since, until = getattr(self, f"{column}_since"), getattr(self, f"{column}_until")
            if since is not None:
                clauses.append(f"{number.format(column + '_at')} >= ?")
                params.append(since)
            if until is not None:
                clauses.append(f"{number.format(column + '_at')} <= ?")
                params.append(until)
        if self.reason is not None:
            # by the partial index of the sagas with a reason (the failed ones); LOWER on
            # both sides: one case (SQLite lowers ASCII letters only, PostgreSQL every one)
            if indexed:
                clauses.append("s.reason IS NOT NULL")
            clauses.append(f"LOWER(s.reason) LIKE LOWER(?) ESCAPE '{_ESCAPE}'")
            params.append(f"%{_like(self.reason)}%")
        if after is not None:
            at, saga = number.format(key), text.format("saga_id")
            if self.order == "asc":
                clauses.append(f"({at}, {saga}) > (?, ?)")
                params += list(after)
            else:  # earlier, or as early and a later id
                clauses.append(f"{at} <= ? AND ({at} < ? OR {saga} > ?)")
                params += [after[0], after[0], after[1]]
        return clauses, params

    def _lookups(
        self, dialect: str, *, correlated: bool, bounded: bool = False
    ) -> list[tuple[str, list[Any]]]:
        """The conditions on other tables, each with its parameters: the proposer (fields
        of the provenance record), a failed step's name, each argument value. Each as the
        sagas an index of its table names (``s.saga_id IN (...)``; ``bounded``: at most
        ``FEW`` of its rows), or ``correlated``: checked saga by saga, by key."""
        found: list[tuple[str, list[Any]]] = []
        cap = " LIMIT ?" if bounded else ""
        more = [FEW] if bounded else []
        proposer = [(f, getattr(self, f)) for f in PROPOSER if getattr(self, f) is not None]
        if proposer:
            terms = " AND ".join(f"{provenance_field(dialect, f, 'p')} = ?" for f, _ in proposer)
            found.append(
                (
                    f"EXISTS (SELECT 1 FROM provenance p WHERE p.ref = s.provenance_ref "
                    f"AND {terms})"
                    if correlated
                    else f"s.provenance_ref IN (SELECT p.ref FROM provenance p WHERE {terms}{cap})",
                    [v for _, v in proposer] + more,
                )
            )
        if self.failed_step is not None:
            failed = ", ".join(f"'{s}'" for s in FAILED_STEP_STATUSES)
            terms = f"st.name = ? AND st.status IN ({failed})"
            found.append(
                (
                    f"EXISTS (SELECT 1 FROM steps st WHERE st.saga_id = s.saga_id AND {terms})"
                    if correlated
                    else f"s.saga_id IN (SELECT st.saga_id FROM steps st WHERE {terms}{cap})",
                    [self.failed_step, *more],
                )
            )
        for name, value in self.about:
            terms = "j.name = ? AND j.value = ?"
            found.append(
                (
                    f"EXISTS (SELECT 1 FROM saga_subjects j WHERE {terms} "
                    "AND j.saga_id = s.saga_id)"
                    if correlated
                    else f"s.saga_id IN (SELECT j.saga_id FROM saga_subjects j WHERE {terms}{cap})",
                    [name, value, *more],
                )
            )
        return found

    # -- cursors ------------------------------------------------------------------------------

    def cursor_after(self, created_at: float, updated_at: float, saga_id: str) -> str:
        """The cursor of a page ending with this saga."""
        key = created_at if self.sort == "created" else updated_at
        raw = json.dumps([self.sort, self.order, key, saga_id], separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def position(self, cursor: str | None) -> tuple[float, str] | None:
        """Where a page after ``cursor`` starts: (sort key, saga id); ``InvalidCursor`` when
        it was not made by a search in this order."""
        if cursor is None or cursor == "":
            return None
        if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR:
            raise InvalidCursor(f"the cursor is not one a page of sagas ended with ({_LONG})")
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            sort, order, key, saga_id = json.loads(raw.decode())
        except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
            raise InvalidCursor(
                "the cursor is not one a page of sagas ended with: pass next_cursor as given"
            ) from None
        if (
            not isinstance(key, int | float)
            or isinstance(key, bool)
            or not math.isfinite(key)
            or not isinstance(saga_id, str)
            or len(saga_id) > MAX_CURSOR
            or not _clean(saga_id)
        ):
            raise InvalidCursor("the cursor is not one a page of sagas ended with")
        if (sort, order) != (self.sort, self.order):
            raise InvalidCursor(
                f"the cursor was made for sort={str(sort)[:10]} order={str(order)[:10]}, "
                f"not sort={self.sort} order={self.order}: keep the order while paging"
            )
        return float(key), saga_id


FIELDS = tuple(f.name for f in fields(SagaFilter))
PAGING = ("cursor", "limit", "offset")  # what a surface pages a search by, beside FIELDS


def refuse_unknown(names: Iterable[str], paging: Iterable[str] = ()) -> None:
    """``InvalidFilter`` for the first of ``names`` that is neither a filter (``FIELDS``)
    nor one of ``paging``: a misspelt filter is refused, never quietly ignored (which
    would answer every saga)."""
    known = {*FIELDS, *paging}
    unknown = sorted(n for n in names if n not in known)
    if unknown:
        raise InvalidFilter(f"unknown filter {unknown[0][:40]!r}; filters are: {', '.join(FIELDS)}")


_ACTOR_TYPES = tuple(a.value for a in ActorType)
_STATUSES = tuple(s.value for s in SagaStatus)
_LONG = f"at most {MAX_CURSOR} characters"


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidFilter(f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return limit


def _and(clauses: Sequence[str]) -> str:
    return " WHERE " + " AND ".join(clauses) if clauses else ""


def _prefixed(order_by: str) -> str:
    """``order_by`` on the columns of table ``s`` (inside a branch, before the merge)."""
    return order_by.replace("BY ", "BY s.").replace(", saga_id", ", s.saga_id")


def _like(text: str) -> str:
    """``text`` matched literally by LIKE: its wildcards and the escape escaped."""
    for char in (_ESCAPE, "%", "_"):
        text = text.replace(char, _ESCAPE + char)
    return text


def _many(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list | tuple):
        if len(value) > 64:
            raise InvalidFilter(f"{name}: given too many times")
        return [v for v in value if not isinstance(v, str) or v.strip()]  # blank: absent
    raise InvalidFilter(f"{name} must be text")


def _one(value: Any, name: str) -> str | None:
    if isinstance(value, list | tuple):
        if len(value) > 1:
            raise InvalidFilter(f"{name} may be given once")
        value = value[0] if value else None
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidFilter(f"{name} must be text")
    return value if value.strip() else None


def _text(value: Any, name: str, more: int = 0) -> str:
    """``value`` as text of at most ``MAX_TEXT`` characters (``more`` beyond it: a name)."""
    if not isinstance(value, str):
        raise InvalidFilter(f"{name} must be text")
    if len(value) > MAX_TEXT + more:
        raise InvalidFilter(f"{name} is longer than {MAX_TEXT + more} characters")
    if not _clean(value):
        raise InvalidFilter(f"{name} holds a control character or is not UTF-8 text")
    return value


def _clean(value: str) -> bool:
    """No control character (NUL included), and text every ledger can store."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (undecodable bytes on a command line)
        return False
    return True


def _split(values: Sequence[str]) -> list[str]:
    """Statuses given one by one or comma-separated (``status=running,compensating``)."""
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def _choice(value: str, name: str, allowed: Sequence[str]) -> Any:
    if value not in allowed:
        raise InvalidFilter(f"{name} {value[:40]!r} is not one of: {', '.join(allowed)}")
    return value


def _status(value: str) -> SagaStatus:
    return SagaStatus(_choice(value, "status", _STATUSES))


# a moment as ``pivotal.moments`` reads it (a duration back from now, or an ISO date or
# date-time, UTC unless it says), refused as a filter's error
def _moment(text: str, name: str, now: float) -> float:
    try:
        return parse_moment(text, now)
    except BadMoment as exc:
        raise InvalidFilter(f"{name}: {exc}") from None


def _about(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not equals or not name or not value:
        raise InvalidFilter(f"about {text[:40]!r} must be NAME=VALUE, e.g. order_id=4471")
    if not name.isidentifier():
        raise InvalidFilter(f"about: {name[:40]!r} is not an argument name")
    return name, value


def _iso(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).isoformat()
