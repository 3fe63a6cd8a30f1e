"""The run store's schema, as numbered migrations written once for both databases.

Each migration is a list of statements with `{type}` fragments the dialect fills in (SQLite's
`REAL` is PostgreSQL's `DOUBLE PRECISION`, and so on). Opening a store applies, in one transaction,
the migrations its database has not seen yet, and refuses a database whose schema is newer than
this code knows: an older server must never write rows it does not understand.

Version 1 is the schema of the first release (SQLite only), so an existing `runs.db` upgrades in
place. Write locality matters: every commit is an fsync of the pages it touched, so rows append
(integer keys, time-ordered ids) and indexes hold only what they must.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from inline_core.errors import InlineError
from inline_core.server.stores.sql import Db

log = logging.getLogger(__name__)


class SchemaTooNew(InlineError):
    """The database was migrated by a newer Inline Core than this one."""

    code = "schema_too_new"
    status = 503


@dataclass(frozen=True)
class Migration:
    version: int
    summary: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs and their takes",
        (
            """CREATE TABLE IF NOT EXISTS runs (
                seq {serial_key},
                id TEXT NOT NULL UNIQUE,
                client_run_id TEXT,
                request_hash TEXT NOT NULL,
                graph TEXT NOT NULL,
                target TEXT NOT NULL,
                status TEXT NOT NULL
                    CHECK (status IN ('queued', 'running', 'done', 'error', 'cancelled')),
                attempts INTEGER NOT NULL DEFAULT 0,
                created_at {real} NOT NULL,
                started_at {real},
                finished_at {real},
                error TEXT,
                nodes TEXT NOT NULL,
                fraction {real} NOT NULL DEFAULT 0
            )""",
            """CREATE UNIQUE INDEX IF NOT EXISTS runs_by_client_run_id ON runs (client_run_id)
                WHERE client_run_id IS NOT NULL""",
            """CREATE INDEX IF NOT EXISTS runs_unfinished ON runs (status, seq)
                WHERE status IN ('queued', 'running')""",
            """CREATE TABLE IF NOT EXISTS takes (
                id TEXT PRIMARY KEY,
                run_id TEXT NOT NULL REFERENCES runs (id),
                node_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                hash TEXT NOT NULL,
                uri TEXT NOT NULL,
                path TEXT NOT NULL,
                params TEXT NOT NULL,
                created_at {real} NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS takes_by_run ON takes (run_id)",
        ),
    ),
    Migration(
        2,
        "leases, the event history, servers and asset metadata (several servers, one store)",
        (
            # What a server must have to run it: node types, named models, a device kind.
            "ALTER TABLE runs ADD COLUMN needs TEXT NOT NULL DEFAULT '[]'",
            # The lease: who runs it, until when (the database's clock), and a fencing token
            # that every claim increments, so a server that lost the run cannot write to it.
            "ALTER TABLE runs ADD COLUMN lease_owner TEXT",
            "ALTER TABLE runs ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN lease_expires_at {real}",
            "ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0",
            # The running run as its holder last wrote it: takes announced so far, and the last
            # event folded into `nodes` (a snapshot's cursor into the event history; dropped by
            # migration 3).
            "ALTER TABLE runs ADD COLUMN live_takes TEXT NOT NULL DEFAULT '[]'",
            "ALTER TABLE runs ADD COLUMN event_seq {bigint} NOT NULL DEFAULT 0",
            "CREATE INDEX IF NOT EXISTS runs_queued ON runs (seq) WHERE status = 'queued'",
            """CREATE INDEX IF NOT EXISTS runs_leased ON runs (lease_owner, lease_expires_at)
                WHERE status = 'running'""",
            """CREATE TABLE IF NOT EXISTS events (
                seq {serial_key},
                run_id TEXT NOT NULL,
                attempt INTEGER NOT NULL,
                server_id TEXT NOT NULL,
                type TEXT NOT NULL,
                body TEXT NOT NULL,
                created_at {real} NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS events_by_run ON events (run_id, seq)",
            """CREATE TABLE IF NOT EXISTS servers (
                id TEXT PRIMARY KEY,
                started_at {real} NOT NULL,
                heartbeat_at {real} NOT NULL,
                leases INTEGER NOT NULL DEFAULT 0,
                info TEXT NOT NULL DEFAULT '{}'
            )""",
            """CREATE TABLE IF NOT EXISTS assets (
                id TEXT PRIMARY KEY,
                kind TEXT NOT NULL,
                content_type TEXT NOT NULL,
                bytes {bigint} NOT NULL,
                created_at {real} NOT NULL
            )""",
        ),
    ),
    Migration(
        3,
        "a run's snapshot cursor read from its event history, not kept in its row",
        # The last event folded into a run's state is the last of its events: read beside the
        # row in one statement (one snapshot), it costs no write per event append.
        ("ALTER TABLE runs DROP COLUMN event_seq",),
    ),
    Migration(
        4,
        "a run's options (how it is delivered: its step previews)",
        ("ALTER TABLE runs ADD COLUMN options TEXT NOT NULL DEFAULT '{}'",),
    ),
    Migration(
        5,
        "a take's media facts (content type, size; a video's frames and fps)",
        ("ALTER TABLE takes ADD COLUMN facts TEXT NOT NULL DEFAULT '{}'",),
    ),
    Migration(
        6,
        "a running run's interactions (changes applied at a chunk boundary), kept for replay",
        (
            """CREATE TABLE IF NOT EXISTS interactions (
                seq {serial_key},
                run_id TEXT NOT NULL,
                id TEXT NOT NULL UNIQUE,
                chunk INTEGER NOT NULL,
                body TEXT NOT NULL,
                created_at {real} NOT NULL
            )""",
            "CREATE INDEX IF NOT EXISTS interactions_by_run ON interactions (run_id, seq)",
        ),
    ),
)

LATEST = MIGRATIONS[-1].version


def read_version(db: Db) -> int:
    row = db.one(db.dialect.read_version)
    return 0 if row is None or row["version"] is None else int(row["version"])


def migrate(db: Db, *, up_to: int = LATEST) -> tuple[int, int]:
    """Bring the schema to `up_to` in one transaction; return (version found, version now).

    Raises `SchemaTooNew` if the database is past what this code knows. Safe to call from
    several servers at once (the dialect's `schema_lock` serialises them)."""
    db.begin()
    try:
        for statement in db.dialect.schema_lock:
            db.execute(statement)
        found = read_version(db)
        if found > LATEST:
            raise SchemaTooNew(
                f"the run database's schema is version {found}, newer than this Inline Core "
                f"knows (up to {LATEST}): another server was upgraded. Upgrade this one too "
                "(or point it at another database); it will not write rows it cannot read."
            )
        for migration in MIGRATIONS:
            if found < migration.version <= up_to:
                for statement in migration.statements:
                    db.execute(statement)
                log.info(
                    "run store schema: applied migration %d (%s)",
                    migration.version,
                    migration.summary,
                )
        now = max(found, min(up_to, LATEST))
        if now != found:
            for statement in db.dialect.write_version:
                db.execute(statement.format(version=int(now)))
        db.commit()
    except BaseException:
        db.rollback()
        raise
    return found, now
