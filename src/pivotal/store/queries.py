"""Every statement the SQL ledger runs, by name, in one place.

``sql.py`` (sagas, leases, views) and ``sql_planning.py`` (planning runs and escalations)
run these for every backend; what differs between SQLite and PostgreSQL is at the end: a
``Dialect`` per backend holds its variants of shared statements, the ``SQLITE_`` statements
are SQLite's own (connection settings, write transactions) and the ``PG_`` ones
PostgreSQL's (notifications, locks, maintenance). Statements use ``?`` placeholders; a
backend with another paramstyle translates them.

A statement whose shape depends on its arguments (an optional filter) is a small function
here that returns the SQL and its parameters, so that no SQL text is assembled elsewhere.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _prefixed(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


# -- columns, in the order the row readers expect ------------------------------------------

SAGA_COLUMNS = (
    "saga_id, catalogue, plan_digest, provenance_ref, status, reason, version, outcomes, "
    "created_at, updated_at"
)
STEP_COLUMNS = (
    "saga_id, idx, name, kind, grp, status, attempts, result, error, next_attempt_at, seq, "
    "undo_status, undo_attempts, undo_error, undo_next_attempt_at, doubt_until, undo_doubt_until, "
    "settle_attempt, effect_from, effect_by"
)
APPROVAL_COLUMNS = (
    "saga_id, step, status, reason, rationale, requested_at, expires_at, decided_at, approver, "
    "note, required, approved_by"
)
EVENT_COLUMNS = "saga_id, seq, type, step, attempt, at, data, provenance_ref"
DEAD_LETTER_COLUMNS = (
    "id, saga_id, step, step_name, undo_key, error, attempts, status, created_at, retries, "
    "next_retry_at, resolved_at, resolution"
)
RUN_COLUMNS = (
    "run_id, mode, batch_id, request_id, request, catalogue, planner, outcome, attempts, "
    "plan, saga_id, created_at"
)
ATTEMPT_COLUMNS = (
    "run_id, n, actor_type, actor_id, model, prompt_version, plan, rationale, errors, "
    "accepted, repeat_of, raw_reply, at"
)
ESCALATION_COLUMNS = (
    "id, run_id, status, reason, created_at, resolved_at, resolved_by, resolution, saga_id"
)

# -- sagas -----------------------------------------------------------------------------------

INSERT_PROVENANCE = "INSERT INTO provenance (ref, body) VALUES (?, ?) ON CONFLICT (ref) DO NOTHING"
INSERT_SAGA = (
    "INSERT INTO sagas (saga_id, catalogue, plan, plan_digest, provenance_ref, status, reason, "
    "version, outcomes, created_at, updated_at, wake_at, traceparent) VALUES (" + _marks(13) + ") "
    "ON CONFLICT (saga_id) DO NOTHING"
)
# A saga created already leased to the process that will run it (its first claim, epoch 1,
# rides on its creation): the 13 columns above, then lease owner, token and expiry.
INSERT_SAGA_LEASED = (
    "INSERT INTO sagas (saga_id, catalogue, plan, plan_digest, provenance_ref, status, reason, "
    "version, outcomes, created_at, updated_at, wake_at, traceparent, lease_owner, lease_token, "
    "lease_expires_at, lease_epoch, idle_passes) VALUES (" + _marks(16) + ", 1, 1) "
    "ON CONFLICT (saga_id) DO NOTHING"
)
SET_COMPENSATING_SINCE = "UPDATE sagas SET compensating_since = ? WHERE saga_id = ?"
INSERT_SUBJECT = (
    "INSERT INTO saga_subjects (name, value, saga_id) VALUES (?, ?, ?) "
    "ON CONFLICT (name, value, saga_id) DO NOTHING"
)
# The sagas naming one entity that are still going, or changed since a time (newest first).
SAGAS_NAMING = (
    "SELECT s.saga_id, s.status, s.updated_at, s.plan FROM saga_subjects j "
    "JOIN sagas s ON s.saga_id = j.saga_id WHERE j.name = ? AND j.value = ? "
    "AND (s.status IN ('submitted', 'running', 'compensating', 'awaiting_approval') "
    "OR s.updated_at >= ?) ORDER BY s.created_at DESC, s.saga_id LIMIT ?"
)
INSERT_RESERVATION = (
    "INSERT INTO exposure (subject, value, saga_id, idx, amount, currency) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (subject, value, saga_id, idx) DO NOTHING"
)
# The value reserved for one subject by sagas still going (parked for a person included),
# or changed since a time, with what became of the step that moves it (newest first).
RESERVATIONS = (
    "SELECT r.saga_id, r.idx, st.name, r.amount, r.currency, s.status, st.status, "
    "st.undo_status FROM exposure r JOIN sagas s ON s.saga_id = r.saga_id "
    "JOIN steps st ON st.saga_id = r.saga_id AND st.idx = r.idx "
    "WHERE r.subject = ? AND r.value = ? AND (s.status IN ('submitted', 'running', "
    "'compensating', 'awaiting_approval', 'needs_human') OR s.updated_at >= ?) "
    "ORDER BY s.created_at DESC, r.saga_id, r.idx LIMIT ?"
)
UPSERT_STEP = (
    f"INSERT INTO steps ({STEP_COLUMNS}) VALUES ({_marks(20)}) "
    "ON CONFLICT (saga_id, idx) DO UPDATE SET status = excluded.status, "
    "attempts = excluded.attempts, result = excluded.result, error = excluded.error, "
    "next_attempt_at = excluded.next_attempt_at, seq = excluded.seq, "
    "undo_status = excluded.undo_status, undo_attempts = excluded.undo_attempts, "
    "undo_error = excluded.undo_error, undo_next_attempt_at = excluded.undo_next_attempt_at, "
    "doubt_until = excluded.doubt_until, undo_doubt_until = excluded.undo_doubt_until, "
    "settle_attempt = excluded.settle_attempt, effect_from = excluded.effect_from, "
    "effect_by = excluded.effect_by"
)
UPSERT_APPROVAL = (
    f"INSERT INTO approvals ({APPROVAL_COLUMNS}) VALUES ({_marks(12)}) "
    "ON CONFLICT (saga_id) DO UPDATE SET step = excluded.step, status = excluded.status, "
    "reason = excluded.reason, rationale = excluded.rationale, "
    "requested_at = excluded.requested_at, expires_at = excluded.expires_at, "
    "decided_at = excluded.decided_at, approver = excluded.approver, note = excluded.note, "
    "required = excluded.required, approved_by = excluded.approved_by"
)
INSERT_EVENT = f"INSERT INTO events ({EVENT_COLUMNS}) VALUES ({_marks(8)})"
# A commit: fenced by the version read (and, from a worker, by its lease epoch); progress
# resets the count of passes without it.
_UPDATE_SAGA_SET = (
    "UPDATE sagas SET status = ?, reason = ?, version = ?, outcomes = ?, updated_at = ?, "
    "wake_at = ?, compensating_since = ?, idle_passes = 0, last_error = NULL"
)
_AT_VERSION = " WHERE saga_id = ? AND version = ?"
UPDATE_SAGA = _UPDATE_SAGA_SET + _AT_VERSION
UPDATE_SAGA_AT_EPOCH = UPDATE_SAGA + " AND lease_epoch = ?"
# The commit that ends a pass (the saga ended or waits for a person) also frees its lease,
# as RELEASE after it would; the epoch stays, so the pass's later writes remain fenced.
UPDATE_SAGA_AND_RELEASE = (
    _UPDATE_SAGA_SET
    + ", lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL"
    + _AT_VERSION
    + " AND lease_epoch = ?"
)

SELECT_SAGA = (
    f"SELECT {SAGA_COLUMNS}, plan, idle_passes, last_error, compensating_since, traceparent "
    "FROM sagas WHERE saga_id = ?"
)
SELECT_STEPS = f"SELECT {STEP_COLUMNS} FROM steps WHERE saga_id = ? ORDER BY idx"
SELECT_APPROVAL = f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE saga_id = ?"
SELECT_VERSION_AND_EPOCH = "SELECT version, lease_epoch FROM sagas WHERE saga_id = ?"
SELECT_EVENTS = f"SELECT {EVENT_COLUMNS} FROM events WHERE saga_id = ? ORDER BY seq"
SELECT_PROVENANCE = "SELECT body FROM provenance WHERE ref = ?"

# -- dead letters: they follow their step's undo status --------------------------------------

UPSERT_DEAD_LETTER = (
    "INSERT INTO dead_letters (saga_id, step, step_name, undo_key, error, attempts, status, "
    "created_at, next_retry_at) VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?) "
    "ON CONFLICT (undo_key) DO UPDATE SET error = excluded.error, "
    "attempts = excluded.attempts, status = 'open', retries = dead_letters.retries + 1, "
    "next_retry_at = excluded.next_retry_at"
)
SETTLE_DEAD_LETTER = (
    "UPDATE dead_letters SET status = 'resolved', resolved_at = ?, resolution = ?, "
    "next_retry_at = NULL WHERE undo_key = ? AND status = 'open'"
)


def select_dead_letters(
    status: str | None, due_by: float | None, id: int | None
) -> tuple[str, tuple[Any, ...]]:
    """Dead letters by status, due time and id (each filter only when given), oldest first."""
    clauses: list[str] = []
    params: list[Any] = []
    for clause, value in (("status = ?", status), ("next_retry_at <= ?", due_by), ("id = ?", id)):
        if value is not None:
            clauses.append(clause)
            params.append(value)
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    return f"SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters{where} ORDER BY id", tuple(params)


# -- leases ----------------------------------------------------------------------------------

# Runnable: active and due, or waiting for an approval that expires; and not leased.
# Parameters: now, now, now.
# The status list comes first and alone, so that both ledgers read only the sagas that are
# still going (an index range on ``sagas(status, wake_at)``), never the finished ones.
RUNNABLE = (
    "status IN ('submitted', 'running', 'compensating', 'awaiting_approval')"
    " AND ((status <> 'awaiting_approval' AND (wake_at IS NULL OR wake_at <= ?))"
    " OR (status = 'awaiting_approval' AND wake_at <= ?))"
    " AND (lease_owner IS NULL OR lease_expires_at < ?)"
)
_TAKE_LEASE = (
    "UPDATE sagas SET lease_owner = ?, lease_token = ?, lease_epoch = lease_epoch + 1, "
    "lease_expires_at = ?, idle_passes = idle_passes + 1 WHERE "
)
# owner, token, expires at, saga id, now
CLAIM = _TAKE_LEASE + "saga_id = ? AND (lease_owner IS NULL OR lease_expires_at < ?)"


def _claim_runnable(lock: str, only: str = "") -> str:
    """owner, token, expires at, now x3, the parameters of ``only`` (more conditions on the
    candidates, after the runnable ones: see ``claim_next``), limit, now x3."""
    return (
        _TAKE_LEASE + "saga_id IN (SELECT saga_id FROM sagas "
        f"WHERE {RUNNABLE}{only} ORDER BY updated_at LIMIT ?{lock}) AND {RUNNABLE}"
    )


# A claim marks what it took with a token of its own, and reads back by that token: a claim
# retried after its reply was lost also gets back what its first try took.
SELECT_CLAIMED = "SELECT saga_id, lease_epoch FROM sagas WHERE lease_token = ? ORDER BY saga_id"
HEARTBEAT = (
    "UPDATE sagas SET lease_expires_at = ? WHERE saga_id = ? AND lease_owner = ? AND "
    "lease_epoch = ? RETURNING saga_id"
)
EXPIRE_LEASES = (
    "UPDATE sagas SET lease_owner = NULL, lease_expires_at = NULL, "
    "lease_epoch = lease_epoch + 1 WHERE lease_owner IS NOT NULL AND "
    "lease_expires_at < ? RETURNING saga_id"
)
_RELEASE = "UPDATE sagas SET lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, "
# A pass that ended well resets the count of passes without progress; one that failed keeps
# it, with its reason.
RELEASE = _RELEASE + "idle_passes = 0, last_error = NULL WHERE saga_id = ? AND lease_epoch = ?"
RELEASE_FAILED = _RELEASE + "last_error = ? WHERE saga_id = ? AND lease_epoch = ?"

# -- operator views --------------------------------------------------------------------------

# A progress report (``record_progress``): the lease renewed with it, if held; the report
# kept, if the lease is still held by its epoch (or unfenced)
RENEW_WITH_PROGRESS = (
    "UPDATE sagas SET lease_expires_at = ? WHERE saga_id = ? AND lease_owner = ? AND "
    "lease_epoch = ?"
)
SET_PROGRESS = "UPDATE steps SET progress = ? WHERE saga_id = ? AND idx = ?"
SET_PROGRESS_FENCED = (
    SET_PROGRESS + " AND EXISTS (SELECT 1 FROM sagas WHERE saga_id = ? AND lease_epoch = ?)"
)
SELECT_PROGRESS = (
    "SELECT idx, progress FROM steps WHERE saga_id = ? AND progress IS NOT NULL ORDER BY idx"
)
SELECT_LEASE = "SELECT lease_owner, lease_epoch, lease_expires_at FROM sagas WHERE saga_id = ?"
_SUMMARIES = "SELECT saga_id, catalogue, status, reason, created_at, updated_at FROM sagas"
_NEWEST = " ORDER BY created_at DESC, saga_id LIMIT ?"
LIST_SAGAS = _SUMMARIES + _NEWEST
LIST_SAGAS_WITH_STATUS = _SUMMARIES + " WHERE status = ?" + _NEWEST
# The sagas of a status that reached it in a period (status, since, until, limit): a review.
LIST_SAGAS_UPDATED = (
    _SUMMARIES + " WHERE status = ? AND updated_at >= ? AND updated_at <= ?"
    " ORDER BY updated_at DESC, saga_id LIMIT ?"
)
# the value the gated step moves, as the saga reserved it (one row per subject, each with
# the same amount): None when it moves none, or the saga reserved nothing (before 17)
_STAKE = (
    "(SELECT e.{} FROM exposure e WHERE e.saga_id = a.saga_id AND e.idx = a.step "
    "ORDER BY e.subject, e.value LIMIT 1)"
)
PENDING_APPROVALS = (
    f"SELECT {_prefixed('a', APPROVAL_COLUMNS)}, s.catalogue, st.name, "
    f"{_STAKE.format('amount')}, {_STAKE.format('currency')} FROM approvals a "
    "JOIN sagas s ON s.saga_id = a.saga_id "
    "JOIN steps st ON st.saga_id = a.saga_id AND st.idx = a.step "
    "WHERE a.status = ? ORDER BY a.requested_at"
)

# -- bearer tokens of the HTTP API ------------------------------------------------------------

TOKEN_COLUMNS = "id, name, role, created_at, revoked_at, require_on_behalf_of"
_TOKEN_ROW = "id, name, role, hash, created_at, require_on_behalf_of, person"
INSERT_TOKEN = f"INSERT INTO tokens ({_TOKEN_ROW}) VALUES (?, ?, ?, ?, ?, ?, ?)"
# the token, unless a live one names the same person (its canonical name): no row is a refusal
INSERT_SOLE_TOKEN = (
    f"INSERT INTO tokens ({_TOKEN_ROW}) SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS "
    "(SELECT 1 FROM tokens WHERE person = ? AND revoked_at IS NULL)"
)
PG_TOKENS_LOCK = "SELECT pg_advisory_xact_lock(?)"  # one creator of a sole token at a time
TOKENS_LOCK_KEY = 0x746F6B6E
SELECT_TOKEN_BY_HASH = f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE hash = ?"
SELECT_TOKEN = f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE id = ?"
LIST_TOKENS = f"SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created_at, id"
REVOKE_TOKEN = "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL"
SCHEDULE_DEAD_LETTER = "UPDATE dead_letters SET next_retry_at = ? WHERE id = ? AND status = 'open'"

# -- planning runs, attempts and escalations -------------------------------------------------

INSERT_RUN = (
    f"INSERT INTO planning_runs ({RUN_COLUMNS}, seq) VALUES ({_marks(12)}, "
    "(SELECT COALESCE(MAX(seq), 0) + 1 FROM planning_runs))"
)
INSERT_ATTEMPT = f"INSERT INTO planning_attempts ({ATTEMPT_COLUMNS}) VALUES ({_marks(13)})"
INSERT_ESCALATION = (
    "INSERT INTO escalations (run_id, status, reason, created_at) VALUES (?, ?, ?, ?) RETURNING id"
)
# status, resolved at, by, resolution, saga id, escalation id, expected status
CLOSE_ESCALATION = (
    "UPDATE escalations SET status = ?, resolved_at = ?, resolved_by = ?, resolution = ?, "
    "saga_id = ? WHERE id = ? AND status = ?"
)
# What tells a run already kept from another run under the same id.
SELECT_RUN_IDENTITY = (
    "SELECT request, outcome, attempts, created_at FROM planning_runs WHERE run_id = ?"
)
SELECT_ESCALATION_STATUS = "SELECT status FROM escalations WHERE id = ?"
LATEST_BATCH = (
    "SELECT batch_id FROM planning_runs WHERE mode = ? AND batch_id IS NOT NULL "
    "ORDER BY created_at DESC, seq DESC, run_id DESC LIMIT 1"
)


class Selection(NamedTuple):
    """Runs (or escalations with their runs) and the attempts of those runs: two statements
    read in one snapshot, both taking the same parameters."""

    rows: str
    attempts: str


def _attempts_of(run_ids: str) -> str:
    """The attempts of the runs whose ids ``run_ids`` (a subquery) selects, per run, in order."""
    return (
        f"SELECT {ATTEMPT_COLUMNS} FROM planning_attempts WHERE run_id IN ({run_ids}) "
        "ORDER BY run_id, n"
    )


_RUN_ORDER = "ORDER BY r.created_at, r.seq, r.run_id"  # oldest first, then as recorded


def _runs(where: str) -> Selection:
    """Runs (``RUN_COLUMNS`` and their escalation's id) chosen by ``where``, oldest first;
    parameters: those of ``where``, then the limit."""
    chosen = f"FROM planning_runs r WHERE {where} {_RUN_ORDER} LIMIT ?"
    return Selection(
        rows=f"SELECT {_prefixed('r', RUN_COLUMNS)}, e.id FROM planning_runs r "
        f"LEFT JOIN escalations e ON e.run_id = r.run_id WHERE {where} {_RUN_ORDER} LIMIT ?",
        attempts=_attempts_of(f"SELECT r.run_id {chosen}"),
    )


RUNS = _runs("r.mode = ?")
RUN = _runs("r.run_id = ?")  # by its primary key
RUNS_OF_BATCH = _runs("r.mode = ? AND r.batch_id = ?")


def _escalations(where: str) -> Selection:
    """Escalations (``ESCALATION_COLUMNS``, then their run's ``RUN_COLUMNS``) chosen by
    ``where`` (on ``escalations e``, with its order and limit)."""
    return Selection(
        rows=f"SELECT {_prefixed('e', ESCALATION_COLUMNS)}, {_prefixed('r', RUN_COLUMNS)} "
        f"FROM escalations e JOIN planning_runs r ON r.run_id = e.run_id {where}",
        attempts=_attempts_of(f"SELECT e.run_id FROM escalations e {where}"),
    )


_NEWEST_ESCALATIONS = "ORDER BY e.created_at DESC, e.id DESC LIMIT ?"
ESCALATIONS = _escalations(_NEWEST_ESCALATIONS)  # limit
ESCALATIONS_WITH_STATUS = _escalations(f"WHERE e.status = ? {_NEWEST_ESCALATIONS}")
ESCALATION = _escalations("WHERE e.id = ?")
ESCALATION_OF_RUN = _escalations("WHERE e.run_id = ?")

# -- what differs between backends -----------------------------------------------------------


@dataclass(frozen=True)
class Dialect:
    """A backend's variants of the shared statements."""

    name: str
    claim_runnable: str  # how candidates are picked (see _claim_runnable for parameters)
    begin_read: str  # starts one read snapshot
    schema_exists: str  # one row, one column: whether schema_version exists
    create_schema_version: str
    claim_lock: str = ""  # how the claim locks its candidates (``claim_next``)
    # how many sagas each status has: SQLite keeps them in a table (migration 16)
    sagas_by_status: str = "SELECT status, COUNT(*) FROM sagas GROUP BY status"


SQLITE = Dialect(
    name="sqlite",
    sagas_by_status="SELECT status, n FROM saga_counts WHERE n > 0",
    claim_runnable=_claim_runnable(""),  # one writer at a time: nothing to skip
    begin_read="BEGIN",  # WAL: a read transaction sees one snapshot
    schema_exists=(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' "
        "AND name = 'schema_version')"
    ),
    create_schema_version=(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
        "applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)"
    ),
)
POSTGRES = Dialect(
    name="postgresql",
    # concurrent claimers pass over candidates another is taking instead of queueing on them
    claim_runnable=_claim_runnable(" FOR UPDATE SKIP LOCKED"),
    claim_lock=" FOR UPDATE SKIP LOCKED",
    begin_read="BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    schema_exists="SELECT to_regclass('schema_version') IS NOT NULL",
    create_schema_version=(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
        "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    ),
)

# Schema bookkeeping and transactions, the same on both.
SCHEMA_VERSION = "SELECT COALESCE(MAX(version), 0) FROM schema_version"
RECORD_SCHEMA_VERSION = "INSERT INTO schema_version (version) VALUES (?)"
COMMIT = "COMMIT"

# SQLite's own: the write connection's settings (sqlite.py's opening). A new ledger gets
# pages of 1 KiB, not SQLite's 4 KiB: a commit writes each page it changed to the WAL whole,
# and a ledger's rows are small, so a saga wrote 3.6 times the bytes (``bench/bytes_written.py``).
# The page size is fixed when the first table is made: a ledger made before keeps its own.
SQLITE_PAGE_SIZE = 1024
SQLITE_PRAGMAS = (
    "PRAGMA busy_timeout = 10000",
    f"PRAGMA page_size = {SQLITE_PAGE_SIZE}",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = FULL",
    "PRAGMA foreign_keys = ON",
)

# PostgreSQL's own.
PG_WORK_CHANNEL = "pivotal_work"
PG_LISTEN = f"LISTEN {PG_WORK_CHANNEL}"
# channel, saga id: wake idle workers when the saga may be runnable (sent at commit)
PG_NOTIFY_WORK = (
    "SELECT pg_notify(?, saga_id) FROM sagas WHERE saga_id = ? AND "
    "status IN ('submitted', 'running', 'compensating')"
)
# Whether a refused commit is in fact our own, landed before its reply was lost.
PG_LANDED = (
    "SELECT s.version, s.lease_epoch, e.type, e.at, e.step, e.attempt, e.data "
    "FROM sagas s JOIN events e "
    "ON e.saga_id = s.saga_id AND e.seq = s.version WHERE s.saga_id = ?"
)
PG_MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(?)"  # one migrator at a time
PG_USER_TABLES = (
    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
    "AND tablename <> 'schema_version'"
)


def pg_truncate(tables: list[str]) -> str:
    """Empty ``tables`` (names read from ``PG_USER_TABLES``), restarting their ids."""
    return f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE"


# -- the outbox: messages inserted with the state change they announce -----------------------

OUTBOX_COLUMNS = (
    "seq, id, saga_id, type, payload, traceparent, created_at, status, attempts, "
    "next_attempt_at, delivered_at, last_error"
)
INSERT_OUTBOX = (
    "INSERT INTO outbox (id, saga_id, type, payload, traceparent, created_at, next_attempt_at) "
    "VALUES (" + _marks(7) + ") ON CONFLICT (id) DO NOTHING"
)

# -- a creation whose reply was lost: whose is the saga? -------------------------------------

# its lease token (unique to one acquisition): ours, when our own creation landed
SELECT_LEASE_TOKEN = "SELECT lease_token FROM sagas WHERE saga_id = ?"

# -- the ledger's own clock: seconds since the epoch, as the ledger's server tells them ---

LEDGER_TIME = {
    "sqlite": "SELECT (julianday('now') - 2440587.5) * 86400.0",
    "postgresql": "SELECT EXTRACT(EPOCH FROM clock_timestamp())::double precision",
}

# -- claims by a worker that serves only some sagas (a rolling deploy) ----------------------

# At most this many saga ids a claim passes over by name (a worker's sagas it cannot serve,
# backing off); more are left out of the statement (they may be claimed, and refused, early).
MAX_SKIPPED = 500


@functools.lru_cache(maxsize=512)
def _claim_only(lock: str, catalogues: int | None, skipped: int) -> str:
    only = ""
    if catalogues is not None:
        only += f" AND catalogue IN ({_marks(catalogues)})"
    if skipped:
        only += f" AND saga_id NOT IN ({_marks(skipped)})"
    return _claim_runnable(lock, only)


def claim_next(
    dialect: Dialect,
    lease: tuple[str, str, float],
    now: float,
    limit: int,
    catalogues: Sequence[str] | None,
    skip: Sequence[str],
) -> tuple[str, tuple[Any, ...]]:
    """The claim of up to ``limit`` runnable sagas for ``lease`` (owner, token, expires at):
    only of ``catalogues`` (None: of any; never empty), never of the ids in ``skip`` (at
    most ``MAX_SKIPPED`` of them). The conditions filter the candidates the index on the
    sagas still going yields, as the claim without them does: none reads finished sagas."""
    skip = skip[:MAX_SKIPPED]
    if catalogues is None and not skip:
        sql = dialect.claim_runnable
    else:
        count = None if catalogues is None else len(catalogues)
        sql = _claim_only(dialect.claim_lock, count, len(skip))
    only = (*(catalogues or ()), *skip)
    return sql, (*lease, now, now, now, *only, limit, now, now, now)


# A pass that ran nothing because the worker cannot serve the saga (``serving.unserved``):
# the lease is given up and the claim's count of a pass without progress taken back (a
# commit or a decision meanwhile may have reset it: never below 0); why is kept.
# Parameters: the reason, saga id, epoch.
RELEASE_UNSERVED = (
    _RELEASE + "idle_passes = CASE WHEN idle_passes > 0 THEN idle_passes - 1 ELSE 0 END, "
    "last_error = ? WHERE saga_id = ? AND lease_epoch = ?"
)
