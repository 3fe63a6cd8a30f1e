"""The durable run store: runs and their takes in SQLite (WAL mode).

Every write goes through one writer thread that commits with `synchronous=FULL`, so a write is
durable when its future resolves. Writes that arrive together share one transaction and one fsync
(group commit); a write that fails does not take the others down with it.
Reads use one connection per thread and never wait on the writer (WAL readers see the last commit).
Checkpoints (copying the WAL back into the database file) run on their own thread and connection,
so their fsyncs never stall a commit that a client is waiting for.
"""

from __future__ import annotations

import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from inline_core.errors import Conflict, InlineError
from inline_core.media import MediaKind
from inline_core.server.run_state import NewRun, NodeState, RunRecord, RunStatus
from inline_core.takes import Take

log = logging.getLogger(__name__)

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], Any]

SCHEMA_VERSION = 1
# How many pending writes one transaction takes at most.
MAX_GROUP = 512
# How often the checkpointer looks for new WAL frames to fold back.
CHECKPOINT_EVERY_S = 0.5

# Write locality matters more than anything else here: every commit is an fsync of the pages it
# touched. So rows append (integer key, time-ordered run ids), and the indexes hold only what
# they must: unfinished runs (for recovery) and runs that carry a clientRunId.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    client_run_id TEXT,
    request_hash TEXT NOT NULL,
    graph TEXT NOT NULL,
    target TEXT NOT NULL,
    status TEXT NOT NULL
        CHECK (status IN ('queued', 'running', 'done', 'error', 'cancelled')),
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    error TEXT,
    nodes TEXT NOT NULL,
    fraction REAL NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS runs_by_client_run_id ON runs (client_run_id)
    WHERE client_run_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS runs_unfinished ON runs (status, seq)
    WHERE status IN ('queued', 'running');
CREATE TABLE IF NOT EXISTS takes (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id),
    node_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    hash TEXT NOT NULL,
    uri TEXT NOT NULL,
    path TEXT NOT NULL,
    params TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS takes_by_run ON takes (run_id);
"""

# Repeats the partial index's condition so SQLite uses that index.
_UNFINISHED = "status IN ('queued', 'running')"

_RUN_COLUMNS = (
    "id, client_run_id, request_hash, graph, target, status, attempts, created_at, started_at, "
    "finished_at, error, nodes, fraction"
)
_TAKE_COLUMNS = "id, run_id, node_id, kind, hash, uri, path, params, created_at"


@dataclass(frozen=True)
class RunSummary:
    """The few columns a run listing needs (no graph decoding)."""

    id: str
    status: RunStatus
    target: str
    fraction: float
    created_at: float


def _dumps(value: object) -> str:
    # default=str: a runner's odd param value must never make a terminal commit fail.
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _nodes_json(nodes: dict[str, NodeState]) -> str:
    return _dumps({k: v.to_json() for k, v in nodes.items()})


def _record(row: sqlite3.Row) -> RunRecord:
    raw_nodes = cast(dict[str, dict[str, Any]], json.loads(row["nodes"]))
    error = row["error"]
    return RunRecord(
        id=row["id"],
        client_run_id=row["client_run_id"],
        request_hash=row["request_hash"],
        graph=cast(dict[str, Any], json.loads(row["graph"])),
        target=row["target"],
        status=RunStatus(row["status"]),
        attempts=row["attempts"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=None if error is None else cast(dict[str, Any], json.loads(error)),
        nodes={k: NodeState.from_json(v) for k, v in raw_nodes.items()},
        fraction=row["fraction"],
    )


def _take(row: sqlite3.Row) -> Take:
    return Take(
        id=row["id"],
        run_id=row["run_id"],
        node_id=row["node_id"],
        kind=MediaKind(row["kind"]),
        uri=row["uri"],
        hash=row["hash"],
        params=cast(dict[str, Any], json.loads(row["params"])),
        created_at=row["created_at"],
        path=row["path"],
    )


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves. check_same_thread=False only so
    # close() can close every connection; each one is used by the thread that opened it.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class RunStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # (thread, its read connection): threads come and go (the thread pool retires idle
        # workers), so connections whose thread has ended are closed as new ones open.
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._readers_lock = threading.Lock()
        self._writes: queue.SimpleQueue[tuple[Op, Future[Any]] | None] = queue.SimpleQueue()
        self._closed = False
        self._submit_lock = threading.Lock()
        self._commits = 0
        self._writes_done = 0
        self._commit_s = 0.0
        self._slowest_commit_s = 0.0
        self._sync_s = 0.0  # of which COMMIT itself (the WAL write and fsync)
        writer = _connect(path)
        writer.execute("PRAGMA journal_mode = WAL")
        writer.execute("PRAGMA synchronous = FULL")
        writer.execute("PRAGMA wal_autocheckpoint = 0")  # the checkpointer thread does it
        writer.executescript(_SCHEMA)
        writer.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self._writer_conn = writer
        self._writer = threading.Thread(
            target=self._write_loop, name="run-store-writer", daemon=True
        )
        self._writer.start()
        self._stop_checkpoints = threading.Event()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="run-store-checkpoint", daemon=True
        )
        self._checkpointer.start()

    # ---- the writer ----------------------------------------------------------------------------

    def _submit(self, op: Callable[[sqlite3.Connection], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._submit_lock:  # so nothing is queued behind the writer's stop sentinel
            if self._closed:
                future.set_exception(RuntimeError("the run store is closed"))
                return future
            self._writes.put((op, cast(Future[Any], future)))
        return future

    def _write_loop(self) -> None:
        conn = self._writer_conn
        while True:
            first = self._writes.get()
            if first is None:
                break
            batch = [first]
            stop = False
            while len(batch) < MAX_GROUP:
                try:
                    item = self._writes.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            began = time.perf_counter()
            self._commit_group(conn, batch)
            self._commits += 1
            self._writes_done += len(batch)
            spent = time.perf_counter() - began
            self._commit_s += spent
            self._slowest_commit_s = max(self._slowest_commit_s, spent)
            if stop:
                break
        conn.close()

    def _checkpoint_loop(self) -> None:
        conn = _connect(self.path)
        checkpointed = 0
        try:
            while not self._stop_checkpoints.wait(CHECKPOINT_EVERY_S):
                if self._commits == checkpointed:
                    continue
                checkpointed = self._commits
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

    def _commit_group(self, conn: sqlite3.Connection, batch: list[tuple[Op, Future[Any]]]) -> None:
        """Run `batch` in one transaction and resolve its futures once it is durable.

        A write refuses by raising an `InlineError` before it changes anything (every op here
        checks first), so the group goes on without it. Any other error rolls the group back and
        each write is then retried in a transaction of its own, so one bad write fails alone.
        """
        if len(batch) > 1:
            try:
                outcomes = self._transaction(conn, batch)
            except Exception:
                log.warning("a group commit failed; retrying its writes one by one", exc_info=True)
                for item in batch:
                    self._commit_group(conn, [item])
                return
        else:
            try:
                outcomes = self._transaction(conn, batch)
            except Exception as exc:
                log.exception("run store write failed")
                batch[0][1].set_exception(exc)
                return
        # Only now, with the group durable, does anyone hear about it.
        for future, result, error in outcomes:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    def _transaction(
        self, conn: sqlite3.Connection, batch: list[tuple[Op, Future[Any]]]
    ) -> list[tuple[Future[Any], object, InlineError | None]]:
        outcomes: list[tuple[Future[Any], object, InlineError | None]] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for op, future in batch:
                try:
                    outcomes.append((future, op(conn), None))
                except InlineError as refusal:  # refused before writing: the group goes on
                    outcomes.append((future, None, refusal))
            synced = time.perf_counter()
            conn.execute("COMMIT")
            self._sync_s += time.perf_counter() - synced
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return outcomes

    def stats(self) -> dict[str, float]:
        """Group-commit figures: transactions, writes, writes per transaction, ms per commit."""
        commits, writes, spent = self._commits, self._writes_done, self._commit_s
        return {
            "commits": commits,
            "writes": writes,
            "meanGroup": round(writes / commits, 2) if commits else 0.0,
            "meanCommitMs": round(spent / commits * 1000, 3) if commits else 0.0,
            "meanSyncMs": round(self._sync_s / commits * 1000, 3) if commits else 0.0,
            "slowestCommitMs": round(self._slowest_commit_s * 1000, 3),
        }

    # ---- reads ---------------------------------------------------------------------------------

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

    def get_run(self, run_id: str) -> RunRecord | None:
        row = (
            self._reader()
            .execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
            .fetchone()
        )
        return None if row is None else _record(row)

    def find_by_client_run_id(self, client_run_id: str) -> RunRecord | None:
        row = (
            self._reader()
            .execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE client_run_id = ?", (client_run_id,))
            .fetchone()
        )
        return None if row is None else _record(row)

    def list_runs(self, limit: int = 50) -> list[RunSummary]:
        """The most recent runs, newest first."""
        query = (
            "SELECT id, status, target, fraction, created_at FROM runs ORDER BY seq DESC LIMIT ?"
        )
        rows = self._reader().execute(query, (limit,)).fetchall()
        return [
            RunSummary(r["id"], RunStatus(r["status"]), r["target"], r["fraction"], r["created_at"])
            for r in rows
        ]

    def unfinished_runs(self, status: RunStatus) -> list[RunRecord]:
        """Queued or running runs in `status`, oldest first (the order they were accepted in)."""
        if status.finished:
            raise ValueError(f"{status} is a finished status")
        rows = (
            self._reader()
            .execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE {_UNFINISHED} AND status = ? ORDER BY seq",
                (status.value,),
            )
            .fetchall()
        )
        return [_record(r) for r in rows]

    def get_take(self, take_id: str) -> Take | None:
        row = (
            self._reader()
            .execute(f"SELECT {_TAKE_COLUMNS} FROM takes WHERE id = ?", (take_id,))
            .fetchone()
        )
        return None if row is None else _take(row)

    def takes_for_run(self, run_id: str) -> list[Take]:
        rows = (
            self._reader()
            .execute(
                f"SELECT {_TAKE_COLUMNS} FROM takes WHERE run_id = ? ORDER BY created_at, id",
                (run_id,),
            )
            .fetchall()
        )
        return [_take(r) for r in rows]

    def all_takes(self) -> list[Take]:
        rows = self._reader().execute(f"SELECT {_TAKE_COLUMNS} FROM takes ORDER BY id").fetchall()
        return [_take(r) for r in rows]

    def take_ids(self) -> set[str]:
        """The id of every recorded take (the start-up sweep keeps exactly their files)."""
        rows = self._reader().execute("SELECT id FROM takes").fetchall()
        return {str(r[0]) for r in rows}

    def integrity_check(self) -> str:
        """`PRAGMA integrity_check`: "ok" for a sound database, else the problems found."""
        rows = self._reader().execute("PRAGMA integrity_check").fetchall()
        return "\n".join(str(r[0]) for r in rows)

    # ---- writes (each durable when it returns or its future resolves) ---------------------------

    def insert_run_future(self, new: NewRun) -> Future[tuple[RunRecord, bool]]:
        """Insert `new`, or return the run already stored under its clientRunId (created False).

        Raises `Conflict` (through the future) if that clientRunId names a different request.
        """

        def op(conn: sqlite3.Connection) -> tuple[RunRecord, bool]:
            if new.client_run_id is not None:
                row = conn.execute(
                    f"SELECT {_RUN_COLUMNS} FROM runs WHERE client_run_id = ?",
                    (new.client_run_id,),
                ).fetchone()
                if row is not None:
                    existing = _record(row)
                    if existing.request_hash != new.request_hash:
                        raise Conflict(
                            f"clientRunId {new.client_run_id!r} was already used for another "
                            f"graph (run {existing.id})"
                        )
                    return existing, False
            nodes = {node_id: NodeState() for node_id in new.node_ids}
            conn.execute(
                "INSERT INTO runs (id, client_run_id, request_hash, graph, target, status, "
                "created_at, nodes, fraction) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, 0)",
                (
                    new.id,
                    new.client_run_id,
                    new.request_hash,
                    _dumps(new.graph),
                    new.target,
                    new.created_at,
                    _nodes_json(nodes),
                ),
            )
            record = RunRecord(
                id=new.id,
                target=new.target,
                graph=new.graph,
                status=RunStatus.QUEUED,
                created_at=new.created_at,
                request_hash=new.request_hash,
                client_run_id=new.client_run_id,
                nodes=nodes,
            )
            return record, True

        return self._submit(op)

    def insert_run(self, new: NewRun) -> tuple[RunRecord, bool]:
        return self.insert_run_future(new).result()

    def mark_running_future(self, run_id: str, started_at: float) -> Future[bool]:
        """queued -> running, counting the attempt; resolves False if the run was not queued."""

        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE runs SET status = 'running', attempts = attempts + 1, started_at = ? "
                "WHERE id = ? AND status = 'queued'",
                (started_at, run_id),
            )
            return cur.rowcount == 1

        return self._submit(op)

    def mark_running(self, run_id: str) -> bool:
        return self.mark_running_future(run_id, time.time()).result()

    def finish_future(
        self,
        run_id: str,
        status: RunStatus,
        *,
        nodes: dict[str, NodeState],
        fraction: float,
        error: dict[str, Any] | None = None,
        takes: Iterable[Take] = (),
        finished_at: float | None = None,
    ) -> Future[None]:
        """`finish`, resolving once the terminal state and takes are durable."""
        ended = time.time() if finished_at is None else finished_at
        if not status.finished:
            raise ValueError(f"{status} is not a terminal status")
        take_rows = [
            (
                t.id,
                t.run_id,
                t.node_id,
                t.kind.value,
                t.hash,
                t.uri,
                t.path,
                _dumps(t.params),
                t.created_at,
            )
            for t in takes
        ]

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE runs SET status = ?, finished_at = ?, error = ?, nodes = ?, fraction = ? "
                "WHERE id = ? AND status IN ('queued', 'running')",
                (
                    status.value,
                    ended,
                    None if error is None else _dumps(error),
                    _nodes_json(nodes),
                    fraction,
                    run_id,
                ),
            )
            if cur.rowcount != 1:
                raise Conflict(f"run {run_id} is not queued or running")
            # A take id is a function of (run, node, index): the primary key refuses a second row.
            conn.executemany(
                f"INSERT INTO takes ({_TAKE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                take_rows,
            )

        return self._submit(op)

    def requeue(self, run_id: str, *, nodes: dict[str, NodeState], refund_attempt: bool) -> bool:
        """running -> queued (a graceful shutdown interrupted it; it resumes on the next start)."""

        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE runs SET status = 'queued', started_at = NULL, nodes = ?, fraction = 0, "
                "attempts = MAX(attempts - ?, 0) WHERE id = ? AND status = 'running'",
                (_nodes_json(nodes), 1 if refund_attempt else 0, run_id),
            )
            return cur.rowcount == 1

        return self._submit(op).result()

    def recover_on_start(self, max_retries: int) -> list[RunRecord]:
        """Make the store consistent after a stop or crash; return the runs to execute, oldest
        first. Queued runs stay queued; a run left running is queued again if it has been tried
        at most `max_retries` times, otherwise it ends as an error."""

        def op(conn: sqlite3.Connection) -> None:
            rows = conn.execute(
                f"SELECT id, attempts, nodes FROM runs WHERE {_UNFINISHED} AND status = 'running'"
            ).fetchall()
            now = time.time()
            for row in rows:
                raw_nodes = cast(dict[str, dict[str, Any]], json.loads(row["nodes"]))
                if row["attempts"] <= max_retries:
                    fresh = {k: NodeState() for k in raw_nodes}
                    conn.execute(
                        "UPDATE runs SET status = 'queued', started_at = NULL, nodes = ?, "
                        "fraction = 0 WHERE id = ?",
                        (_nodes_json(fresh), row["id"]),
                    )
                else:
                    error = {
                        "code": "interrupted",
                        "message": f"interrupted {row['attempts']} times; not retried again",
                    }
                    conn.execute(
                        "UPDATE runs SET status = 'error', finished_at = ?, error = ? WHERE id = ?",
                        (now, _dumps(error), row["id"]),
                    )

        self._submit(op).result()
        return self.unfinished_runs(RunStatus.QUEUED)

    def cancel_queued(self, run_id: str) -> bool:
        """queued -> cancelled. False if the run was not queued."""

        def op(conn: sqlite3.Connection) -> bool:
            cur = conn.execute(
                "UPDATE runs SET status = 'cancelled', finished_at = ? "
                "WHERE id = ? AND status = 'queued'",
                (time.time(), run_id),
            )
            return cur.rowcount == 1

        return self._submit(op).result()

    def close(self) -> None:
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
            self._writes.put(None)
        self._writer.join(timeout=10.0)
        self._stop_checkpoints.set()
        self._checkpointer.join(timeout=10.0)
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for _thread, conn in readers:
            try:
                conn.close()
            except sqlite3.Error:
                pass
