"""`inline-core move-store`: copy one server's SQLite run store into an empty PostgreSQL one.

    inline-core move-store --data-dir .inline --to postgresql://user@host/inline

Every run, take, event of the history and asset record is copied as it is (ids, seqs and times
kept, so clientRunIds still repeat and sockets reconnect where they left off), in one
transaction: the target is either the whole store or unchanged. Runs the SQLite server left
running (stopped without a graceful shutdown) are queued again, within INLINE_MAX_RETRIES, as
that server's next start would have done. Stop the SQLite server first; the take and asset files
stay where they are: move the data dir's `takes/` and `assets/` folders to the shared storage the
PostgreSQL servers use as their data dir (a take is found by its name there).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from inline_core.config import Config
from inline_core.errors import InlineError, InvalidRequest
from inline_core.server.data_lock import acquire_data_lock
from inline_core.server.stores import open_run_store
from inline_core.server.stores.run_store import RunStore
from inline_core.server.stores.sql import Db

# In the order their references need; each with the key its rows are copied in.
TABLES = (("runs", "seq"), ("takes", "id"), ("events", "seq"), ("assets", "id"))
# Tables whose integer key the target counts on: its counter must start past the copied keys.
COUNTED = ("runs", "events")
BATCH = 500
MOVER = "move-store"


def _columns(db: Db, table: str) -> list[str]:
    return [str(row["name"]) for row in db.all(f"SELECT name FROM pragma_table_info('{table}')")]


def move(source: RunStore, target: RunStore, max_retries: int) -> dict[str, int]:
    """Copy `source` (SQLite) into `target` (an empty PostgreSQL store); rows copied per table."""
    if source.shared or not target.shared:
        raise InvalidRequest("move-store copies a SQLite store into a PostgreSQL one")
    if target.list_runs(limit=1):
        raise InvalidRequest(
            f"the PostgreSQL store at {target.backend.where} already holds runs: move into an "
            "empty database"
        )
    copied: dict[str, int] = {}
    db = target.backend.connect()
    try:
        db.begin()
        with source.backend.reading() as reader:
            for table, key in TABLES:
                columns = _columns(reader, table)
                names = ", ".join(columns)
                marks = ", ".join("?" for _ in columns)
                rows = reader.all(f"SELECT {names} FROM {table} ORDER BY {key}")
                for row in rows:
                    values = tuple(row[c] for c in columns)
                    db.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", values)
                copied[table] = len(rows)
        for table in COUNTED:
            db.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'seq'), "
                f"(SELECT COALESCE(MAX(seq), 0) + 1 FROM {table}), false)"
            )
        db.commit()
    except BaseException:
        db.rollback()
        raise
    finally:
        db.close()
    target.recover_on_start(max_retries, holder=None)  # left running: queued again
    return copied


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="inline-core move-store",
        description="Copy a SQLite run store (runs.db in the data dir) into an empty PostgreSQL "
        "database, for several servers to share.",
    )
    parser.add_argument("--data-dir", default=".inline", help="the SQLite server's data dir")
    parser.add_argument("--to", required=True, help="postgresql://... of the empty database")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    data_dir = Path(args.data_dir)
    if not (data_dir / "runs.db").is_file():
        print(f"inline-core move-store: no runs.db in {data_dir}", file=sys.stderr)
        return 2
    try:
        env_config = Config.from_env({**os.environ, "INLINE_DATABASE_URL": args.to})
        # A server still using the folder would keep running what this queues again.
        lock = acquire_data_lock(Config(data_dir=data_dir))
        source = open_run_store(Config(data_dir=data_dir), MOVER)
        try:
            target = open_run_store(env_config, MOVER)
            try:
                copied = move(source, target, env_config.max_retries)
                where = target.backend.where
            finally:
                target.close()
        finally:
            source.close()
            if lock is not None:
                lock.release()
    except InlineError as exc:
        print(f"inline-core move-store: {exc.message}", file=sys.stderr)
        return 2
    counts = ", ".join(f"{n} {table}" for table, n in copied.items())
    print(f"copied {counts} into {where}")
    print(
        f"next: move {data_dir / 'takes'} and {data_dir / 'assets'} to the shared data dir, and "
        "start every server with --data-dir SHARED --database-url URL"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
