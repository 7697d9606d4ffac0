"""Versioned schema migrations for the SQL ledgers."""

from __future__ import annotations

# Each entry upgrades the schema by one version. Never edit a released entry: append.
SQLITE_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE provenance (
        ref TEXT PRIMARY KEY,
        body TEXT NOT NULL
    );
    CREATE TABLE sagas (
        saga_id TEXT PRIMARY KEY,
        catalogue TEXT NOT NULL,
        plan TEXT NOT NULL,
        plan_digest TEXT NOT NULL,
        provenance_ref TEXT NOT NULL REFERENCES provenance(ref),
        status TEXT NOT NULL,
        reason TEXT,
        version INTEGER NOT NULL,
        outcomes INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        wake_at REAL,
        lease_owner TEXT,
        lease_epoch INTEGER NOT NULL DEFAULT 0,
        lease_expires_at REAL
    );
    CREATE INDEX sagas_status ON sagas(status, wake_at);
    CREATE TABLE steps (
        saga_id TEXT NOT NULL REFERENCES sagas(saga_id),
        idx INTEGER NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        grp INTEGER,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        result TEXT,
        error TEXT,
        next_attempt_at REAL,
        seq INTEGER,
        undo_status TEXT NOT NULL,
        undo_attempts INTEGER NOT NULL,
        undo_error TEXT,
        undo_next_attempt_at REAL,
        PRIMARY KEY (saga_id, idx)
    );
    CREATE TABLE approvals (
        saga_id TEXT PRIMARY KEY REFERENCES sagas(saga_id),
        step INTEGER NOT NULL,
        status TEXT NOT NULL,
        reason TEXT NOT NULL,
        rationale TEXT NOT NULL,
        requested_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        decided_at REAL,
        approver TEXT,
        note TEXT
    );
    CREATE INDEX approvals_status ON approvals(status);
    CREATE TABLE dead_letters (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        saga_id TEXT NOT NULL REFERENCES sagas(saga_id),
        step INTEGER NOT NULL,
        step_name TEXT NOT NULL,
        undo_key TEXT NOT NULL UNIQUE,
        error TEXT,
        attempts INTEGER NOT NULL,
        status TEXT NOT NULL,
        created_at REAL NOT NULL,
        retries INTEGER NOT NULL DEFAULT 0,
        next_retry_at REAL,
        resolved_at REAL,
        resolution TEXT
    );
    CREATE INDEX dead_letters_due ON dead_letters(status, next_retry_at);
    CREATE TABLE events (
        saga_id TEXT NOT NULL REFERENCES sagas(saga_id),
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        step INTEGER,
        attempt INTEGER,
        at REAL NOT NULL,
        data TEXT NOT NULL,
        provenance_ref TEXT NOT NULL,
        PRIMARY KEY (saga_id, seq)
    );
    """,
    # 2: planning runs with every attempt, and escalations for a person.
    """
    CREATE TABLE planning_runs (
        run_id TEXT PRIMARY KEY,
        mode TEXT NOT NULL,
        batch_id TEXT,
        request_id TEXT NOT NULL,
        request TEXT NOT NULL,
        catalogue TEXT NOT NULL,
        planner TEXT NOT NULL,
        outcome TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        plan TEXT,
        saga_id TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX planning_runs_batch ON planning_runs(mode, batch_id, created_at);
    CREATE TABLE planning_attempts (
        run_id TEXT NOT NULL REFERENCES planning_runs(run_id),
        n INTEGER NOT NULL,
        actor_type TEXT NOT NULL,
        actor_id TEXT NOT NULL,
        model TEXT,
        prompt_version TEXT,
        plan TEXT,
        rationale TEXT NOT NULL,
        errors TEXT NOT NULL,
        accepted INTEGER NOT NULL,
        repeat_of INTEGER,
        raw_reply TEXT,
        at REAL NOT NULL,
        PRIMARY KEY (run_id, n)
    );
    CREATE TABLE escalations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE REFERENCES planning_runs(run_id),
        status TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_at REAL NOT NULL,
        resolved_at REAL,
        resolved_by TEXT,
        resolution TEXT,
        saga_id TEXT
    );
    CREATE INDEX escalations_status ON escalations(status, created_at);
    """,
    # 3: the order runs were recorded in, portably (planning runs have no id of their own;
    # runs sharing a created_at are listed in this order). Older runs are numbered by
    # (created_at, run_id).
    """
    ALTER TABLE planning_runs ADD COLUMN seq INTEGER;
    UPDATE planning_runs SET seq = (
        SELECT COUNT(*) FROM planning_runs p
        WHERE p.created_at < planning_runs.created_at
           OR (p.created_at = planning_runs.created_at AND p.run_id <= planning_runs.run_id)
    );
    CREATE INDEX planning_runs_seq ON planning_runs(seq);
    """,
    # 4: leases get a token per acquisition (a claim whose reply was lost is found again by
    # it), and each saga counts the passes in a row that ended without progress (poison).
    """
    ALTER TABLE sagas ADD COLUMN lease_token TEXT;
    ALTER TABLE sagas ADD COLUMN idle_passes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sagas ADD COLUMN last_error TEXT;
    CREATE INDEX sagas_lease_token ON sagas(lease_token);
    """,
    # 5: bearer tokens of the HTTP API: a principal's name and role, and only the hash of the
    # secret (the token itself is shown once, when created, and never kept).
    """
    CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        role TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        created_at REAL NOT NULL,
        revoked_at REAL
    );
    """,
    # 6: approvals that need two distinct approvers: how many are required and who has
    # approved so far (a JSON list). An approval decided before keeps its one approver.
    """
    ALTER TABLE approvals ADD COLUMN required INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE approvals ADD COLUMN approved_by TEXT NOT NULL DEFAULT '[]';
    UPDATE approvals SET approved_by = '["' || approver || '"]'
    WHERE status = 'approved' AND approver IS NOT NULL
      AND approver NOT LIKE '%"%' ESCAPE '!' AND approver NOT LIKE '%\\%' ESCAPE '!';
    """,
    # 7: operations. Each saga keeps when its compensation started (time to compensate) and
    # the trace context it was submitted under. The outbox holds messages committed with the
    # state change they announce, until a relay delivered them; ``seq`` orders them. Workers
    # record a heartbeat of their own, idle or not, so "no worker alive" can be seen.
    """
    ALTER TABLE sagas ADD COLUMN compensating_since REAL;
    ALTER TABLE sagas ADD COLUMN traceparent TEXT;
    CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        saga_id TEXT NOT NULL,
        type TEXT NOT NULL,
        payload TEXT NOT NULL,
        traceparent TEXT,
        created_at REAL NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        delivered_at REAL,
        last_error TEXT,
        lease_owner TEXT,
        lease_expires_at REAL
    );
    CREATE INDEX outbox_due ON outbox(status, next_attempt_at, seq);
    CREATE INDEX outbox_saga ON outbox(saga_id, status, seq);
    CREATE TABLE workers (
        name TEXT PRIMARY KEY,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL,
        stopped_at REAL
    );
    """,
    # 8: claims and sweeps read only the sagas still going and the leases held, whatever the
    # size of the ledger (the finished sagas are most of it): partial indexes on both.
    """
    CREATE INDEX sagas_active ON sagas(updated_at)
        WHERE status IN ('submitted', 'running', 'compensating', 'awaiting_approval');
    CREATE INDEX sagas_lease_expiry ON sagas(lease_expires_at) WHERE lease_owner IS NOT NULL;
    """,
    # 9: the entities each saga's plan names (argument name, canonical id), written with the
    # saga: the other sagas for one order are found by index, whatever the ledger's size
    # (exposure across sagas). Sagas created before this version are not listed.
    """
    CREATE TABLE saga_subjects (
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        saga_id TEXT NOT NULL REFERENCES sagas(saga_id),
        PRIMARY KEY (name, value, saga_id)
    );
    """,
    # 10: until when an earlier attempt of each step's action (and of its undo) may still
    # take effect: nothing settles the step as "no effect" before then; and the attempt
    # that settled it forward before its undo.
    """
    ALTER TABLE steps ADD COLUMN doubt_until REAL;
    ALTER TABLE steps ADD COLUMN undo_doubt_until REAL;
    ALTER TABLE steps ADD COLUMN settle_attempt INTEGER;
    """,
    # 11: a token may require every plan submitted with it to name the person it is for
    # (provenance.on_behalf_of); the tokens made before do not (0).
    """
    ALTER TABLE tokens ADD COLUMN require_on_behalf_of INTEGER NOT NULL DEFAULT 0;
    """,
    # 12: when each step's effect may first and last have been made (its first attempt's
    # start; its last outcome, or how long an attempt may still land): a hold that lapses on
    # its own is known to cover the point of no return, or to have lapsed, from these.
    """
    ALTER TABLE steps ADD COLUMN effect_from REAL;
    ALTER TABLE steps ADD COLUMN effect_by REAL;
    """,
    # 13: what each worker is: the Pivotal version it runs, the catalogues it serves (a JSON
    # list) and the seconds between its heartbeats (it is taken for gone after a few missed
    # beats). The workers recorded before say none of these.
    """
    ALTER TABLE workers ADD COLUMN version TEXT;
    ALTER TABLE workers ADD COLUMN catalogues TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE workers ADD COLUMN beat_every REAL;
    """,
    # 14: searching the sagas (``store.search``) answers from indexes whatever the ledger's
    # size: each order a page is read in, alone and after a status or a catalogue; the
    # sagas with a reason (the failed ones, few); the sagas of a provenance record, and the
    # records by the fields of their JSON a search names (each ledger's own expression:
    # ``_provenance_indexes``); the steps that failed, by name.
    """
    CREATE INDEX sagas_created ON sagas(created_at, saga_id);
    CREATE INDEX sagas_updated ON sagas(updated_at, saga_id);
    CREATE INDEX sagas_status_created ON sagas(status, created_at, saga_id);
    CREATE INDEX sagas_status_updated ON sagas(status, updated_at, saga_id);
    CREATE INDEX sagas_catalogue_created ON sagas(catalogue, created_at, saga_id);
    CREATE INDEX sagas_with_reason ON sagas(created_at, saga_id) WHERE reason IS NOT NULL;
    CREATE INDEX sagas_provenance ON sagas(provenance_ref);
    CREATE INDEX steps_failed ON steps(name, saga_id) WHERE status IN ('failed', 'unknown');
    {provenance_indexes}
    """,
    # 15: the last progress report of each step's call in progress (``pivotal.sagas.progress``):
    # JSON with its attempt, when the call began and when it reported.
    """
    ALTER TABLE steps ADD COLUMN progress TEXT;
    """,
    # 16: how many sagas each status has, for the gauges, without counting the whole ledger
    # on every scrape (a million sagas took 100 ms, on the serving thread): kept by triggers
    # on SQLite, whose one writer meets no contention on these rows. PostgreSQL counts as
    # before (its rows would serialize every worker's commits that change a status).
    "{saga_counts}",
    # 17: the value each saga's plan moves, reserved per subject (an order, a customer:
    # entity kind and canonical id) with the saga, in the transaction that creates it: the
    # amount as written (decimal text) in its currency, by the step that moves it. What a
    # reservation still holds is read with the step's record (``exposure.still_reserved``).
    # Sagas created before this version reserved nothing.
    """
    CREATE TABLE exposure (
        subject TEXT NOT NULL,
        value TEXT NOT NULL,
        saga_id TEXT NOT NULL REFERENCES sagas(saga_id),
        idx INTEGER NOT NULL,
        amount TEXT NOT NULL,
        currency TEXT NOT NULL,
        PRIMARY KEY (subject, value, saga_id, idx)
    );
    """,
    # 18: the person each token names (``principals.canonical_person``), so that a token
    # that must be a person's only one is refused in the transaction that would write it
    # (``create_token(sole=True)``). Tokens made before have none (NULL).
    """
    ALTER TABLE tokens ADD COLUMN person TEXT;
    CREATE INDEX tokens_person ON tokens(person);
    """,
    # 19: searches of the sagas a person saved by name (``store.saved``): the query as typed
    # (its filters only, checked by the search's parser), kept under the person's canonical
    # name (``principals.canonical_person``); first saved and last replaced on the ledger's
    # clock. The key serves both a person's list and one search by name.
    """
    CREATE TABLE saved_searches (
        person TEXT NOT NULL,
        name TEXT NOT NULL,
        query TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (person, name)
    );
    """,
)


# migration 14 indexes these fields of a provenance record (the ones a search names,
# ``search.PROPOSER``), written out so that the released migration never changes. Even an
# actor type (one of three) is indexed: its index counts a rare one quickly
# (``SagaFilter.probes``).
_INDEXED_PROVENANCE = (
    "actor_type",
    "actor_id",
    "model",
    "run_id",
    "prompt_version",
    "on_behalf_of",
    "source_document_id",
)


def _provenance_indexes(dialect: str) -> str:
    """Migration 14's index per field, on the expression that reads it in this dialect: the
    one the search's SQL uses (``search.provenance_field``)."""
    from pivotal.store.search import provenance_field

    return ";\n    ".join(
        f"CREATE INDEX provenance_{field} ON provenance(({provenance_field(dialect, field)}))"
        for field in _INDEXED_PROVENANCE
    )


# migration 16 on SQLite: the counts, filled from the sagas there are, then kept by triggers
_SAGA_COUNTS = """
    CREATE TABLE saga_counts (status TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO saga_counts (status, n) SELECT status, COUNT(*) FROM sagas GROUP BY status;
    CREATE TRIGGER saga_counts_created AFTER INSERT ON sagas BEGIN
        INSERT INTO saga_counts (status, n) VALUES (NEW.status, 1)
            ON CONFLICT (status) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER saga_counts_moved AFTER UPDATE OF status ON sagas
        WHEN OLD.status IS NOT NEW.status BEGIN
        UPDATE saga_counts SET n = n - 1 WHERE status = OLD.status;
        INSERT INTO saga_counts (status, n) VALUES (NEW.status, 1)
            ON CONFLICT (status) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER saga_counts_deleted AFTER DELETE ON sagas BEGIN
        UPDATE saga_counts SET n = n - 1 WHERE status = OLD.status;
    END;
"""


def _for_sqlite(ddl: str) -> str:
    ddl = ddl.replace("{saga_counts}", _SAGA_COUNTS)
    return ddl.replace("{provenance_indexes}", _provenance_indexes("sqlite"))


def _for_postgres(ddl: str) -> str:
    """The same schema in PostgreSQL's types (the DDL above is written to allow it)."""
    ddl = ddl.replace("{saga_counts}", "")  # counted as asked (Dialect.sagas_by_status)
    ddl = ddl.replace("{provenance_indexes}", _provenance_indexes("postgresql"))
    return ddl.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY").replace(
        " REAL", " DOUBLE PRECISION"
    )


POSTGRES_MIGRATIONS: tuple[str, ...] = tuple(_for_postgres(m) for m in SQLITE_MIGRATIONS)
SQLITE_MIGRATIONS = tuple(_for_sqlite(m) for m in SQLITE_MIGRATIONS)
