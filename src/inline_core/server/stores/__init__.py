"""The run store and its two backends: SQLite (one server, the default) and PostgreSQL (several
servers sharing one database, `INLINE_DATABASE_URL`). See `run_store.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inline_core.errors import InvalidRequest

POSTGRES_EXTRA_HINT = (
    "INLINE_DATABASE_URL (--database-url) needs the postgres extra: "
    "pip install 'inline-core[postgres]' (or ./webui.sh --extra zimage,postgres)"
)

if TYPE_CHECKING:
    from inline_core.config import Config
    from inline_core.server.stores.run_store import RunStore


def open_run_store(config: Config, server_id: str) -> RunStore:
    """The store `config` names: PostgreSQL at `database_url`, else `runs.db` in the data dir.

    Raises an `InlineError` the server cannot start with: the postgres extra missing, the
    database out of reach, its schema newer than this code."""
    # Imported here: the store's modules use the server's JSON shapes, which use this package.
    from inline_core.server.stores.run_store import RunStore
    from inline_core.server.stores.sql import Backend

    backend: Backend
    if config.database_url:
        try:
            from inline_core.server.stores.postgres import PostgresBackend
        except ImportError as exc:
            raise InvalidRequest(POSTGRES_EXTRA_HINT) from exc
        backend = PostgresBackend(config.database_url, server_id, config.database_retry_s)
    else:
        from inline_core.server.stores.sqlite import SqliteBackend

        backend = SqliteBackend(config.runs_db)
    try:
        return RunStore(backend, server_id, retry_s=config.database_retry_s)
    except BaseException:
        backend.close()
        raise
