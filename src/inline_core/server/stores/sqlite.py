"""The SQLite backend (WAL mode): one server's runs in one file, the default.

The writer commits with `synchronous=FULL`, so a write is durable when its future resolves. Reads
use one connection per thread and never wait on the writer (WAL readers see the last commit).
Checkpoints (copying the WAL back into the database file) run on their own thread and connection,
so their fsyncs never stall a commit that a client is waiting for.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Generator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from inline_core.server.stores.sql import Db, Dialect

log = logging.getLogger(__name__)

# How often the checkpointer looks for new WAL frames to fold back.
CHECKPOINT_EVERY_S = 0.5

DIALECT = Dialect(
    name="sqlite",
    fragments={
        "serial_key": "INTEGER PRIMARY KEY",
        "real": "REAL",
        "bigint": "INTEGER",
        "now": "((julianday('now') - 2440587.5) * 86400.0)",
        "json_values": "SELECT value FROM json_each(?)",
        # Every need of the run is among the capabilities (a JSON list of strings).
        "needs_met": (
            "NOT EXISTS (SELECT 1 FROM json_each(runs.needs) AS need "
            "WHERE need.value NOT IN (SELECT value FROM json_each(?)))"
        ),
        "skip_locked": "",  # one writer: nothing to skip
        "greatest": "MAX",
    },
    schema_lock=(),  # BEGIN IMMEDIATE already holds the write lock
    read_version="SELECT user_version AS version FROM pragma_user_version",
    write_version=("PRAGMA user_version = {version}",),
)


class SqliteDb(Db):
    synchronous: str = "FULL"  # what the connection was last set to

    @property
    def sqlite(self) -> sqlite3.Connection:
        return cast(sqlite3.Connection, self.conn)

    def begin(self, durable: bool = True) -> None:
        # In WAL mode NORMAL appends the commit to the log without an fsync: it survives a
        # crash of this process at once, and the next FULL commit's fsync makes it (and
        # everything before it, the log being in order) survive a power cut too.
        wanted = "FULL" if durable else "NORMAL"
        if wanted != self.synchronous:
            self.sqlite.execute(f"PRAGMA synchronous = {wanted}")  # only outside a transaction
            self.synchronous = wanted
        self.sqlite.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.sqlite.execute("COMMIT")

    def rollback(self) -> None:
        if self.sqlite.in_transaction:
            self.sqlite.execute("ROLLBACK")


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves. check_same_thread=False only so
    # close() can close every connection; each one is used by the thread that opened it.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class SqliteBackend:
    """One file, one server: nothing expires and nobody else claims its runs."""

    dialect = DIALECT
    shared = False

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # (thread, its read connection): threads come and go (the thread pool retires idle
        # workers), so connections whose thread has ended are closed as new ones open.
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self._stop_checkpoints = threading.Event()
        self._checkpointer: threading.Thread | None = None

    @property
    def where(self) -> str:
        return str(self.path)

    def connect(self) -> Db:
        conn = _connect(self.path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # the checkpointer thread does it
        return SqliteDb(conn, DIALECT)

    def is_outage(self, exc: BaseException) -> bool:
        return False  # a local file: an error is the write's own

    def listen(self, dispatch: Callable[[str, str], None]) -> None:
        # Only this process writes here: its own commits are all the notices there are. Start
        # folding the WAL back now that the schema exists.
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="run-store-checkpoint", daemon=True
        )
        self._checkpointer.start()

    @contextmanager
    def reading(self) -> Generator[Db]:
        yield SqliteDb(self._reader(), DIALECT)

    def _reader(self) -> sqlite3.Connection:
        conn = cast(sqlite3.Connection | None, getattr(self._local, "conn", None))
        if conn is None:
            if self._closed:
                raise RuntimeError("the run store is closed")
            conn = _connect(self.path)
            self._local.conn = conn
            with self._readers_lock:
                alive: list[tuple[threading.Thread, sqlite3.Connection]] = []
                for thread, other in self._readers:
                    if thread.is_alive():
                        alive.append((thread, other))
                    else:
                        other.close()
                alive.append((threading.current_thread(), conn))
                self._readers = alive
        return conn

    def reader_count(self) -> int:
        """Open read connections (one per live thread that has read)."""
        with self._readers_lock:
            return len(self._readers)

    def integrity_check(self) -> str:
        """`PRAGMA integrity_check`: "ok" for a sound database, else the problems found."""
        found = self._reader().execute("PRAGMA integrity_check").fetchall()
        return "\n".join(str(r[0]) for r in found)

    def _wal_state(self) -> tuple[int, int]:
        try:
            st = os.stat(f"{self.path}-wal")
        except OSError:
            return (0, 0)
        return (st.st_size, st.st_mtime_ns)

    def _checkpoint_loop(self) -> None:
        conn = _connect(self.path)
        checkpointed = self._wal_state()
        try:
            while not self._stop_checkpoints.wait(CHECKPOINT_EVERY_S):
                state = self._wal_state()
                if state == checkpointed:  # nothing committed since the last checkpoint
                    continue
                checkpointed = state
                try:
                    # PASSIVE: copy what it can without blocking the writer or readers.
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    log.warning("WAL checkpoint failed; retrying later", exc_info=True)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error:
            log.warning("final WAL checkpoint failed", exc_info=True)
        finally:
            conn.close()

    def close(self) -> None:
        """After the writer stopped: fold the WAL back, then close every read connection."""
        self._closed = True
        self._stop_checkpoints.set()
        if self._checkpointer is not None:
            self._checkpointer.join(timeout=10.0)
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for _thread, conn in readers:
            try:
                conn.close()
            except sqlite3.Error:
                pass
