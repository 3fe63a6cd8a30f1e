"""`RunStore`: runs, takes, leases, the event history and asset metadata, on SQLite or PostgreSQL.

Every query is written once, over a `Backend` (`sqlite.py`: one server, the default;
`postgres.py`: several servers sharing one database): here, in `leasing.py` (claims, leases,
recovery) and in `history.py` (the event history). Writes go through one `GroupWriter` (group
commit, patience during an outage) and are durable when their future resolves; reads never wait
on the writer.

Several servers, one store:
- a server claims queued runs it can serve, oldest first (`FOR UPDATE SKIP LOCKED` on
  PostgreSQL), and holds each with a lease it renews by heartbeat;
- every write a holder makes for its run carries the lease's fencing token (`Lease`): once another
  claim took the run, the write matches no row and is refused with `LeaseLost`, so a server that
  lost a run writes nothing for it;
- a lease not renewed in time expires, and any server puts its run back in the queue (run again
  from the start, seeds fixed at submit) or ends it once it has no retries left;
- events are appended to the history (and the run's row mirrors the state they lead to), and a
  notice carrying only the run id tells every server to read what follows its cursor.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, cast

from inline_core.errors import Conflict, Unavailable
from inline_core.server.run_state import NewRun, NodeState, RunRecord, RunStatus
from inline_core.server.stores import history, leasing, rows
from inline_core.server.stores.migrations import migrate
from inline_core.server.stores.records import (
    CANCEL,
    QUEUED,
    AssetRow,
    Claimed,
    ClaimRequest,
    EventLike,
    JournalEntry,
    Lease,
    Renewal,
    RunSummary,
    RunView,
    ServerSeen,
    StoredEvent,
)
from inline_core.server.stores.sql import Backend, Db, Later
from inline_core.server.stores.writer import GroupWriter, unreachable
from inline_core.takes import Take

log = logging.getLogger(__name__)

# Columns a view of a run reads beyond a record's: its takes so far, and the last event its
# state includes (read in the same statement, so from the same snapshot).
_VIEW_COLUMNS = (
    f"{rows.RUN_COLUMNS}, live_takes, "
    "(SELECT COALESCE(MAX(seq), 0) FROM events WHERE events.run_id = runs.id) AS event_seq"
)
# A running run's row, matched only while `Lease` still holds it.
_HELD = "id = ? AND status = 'running' AND lease_owner = ? AND lease_epoch = ?"


class LeaseLost(Conflict):
    """The run is no longer this server's: its lease expired and another claim took it."""

    code = "lease_lost"


def _held(lease: Lease) -> tuple[object, ...]:
    return (lease.run_id, lease.owner, lease.epoch)


class RunStore:
    def __init__(self, backend: Backend, server_id: str, *, retry_s: float = 60.0) -> None:
        """Open the store on `backend` as server `server_id`, bringing its schema up to date
        (`SchemaTooNew` if it is newer than this code). `retry_s`: how long a run's events and
        its end wait for an unreachable database before giving up."""
        self.backend = backend
        self.server_id = server_id
        self.retry_s = retry_s
        self.on_notice: Callable[[str, str], None] | None = None
        db = backend.connect()
        try:
            found, now = migrate(db)
        finally:
            db.close()
        self.schema_version = now
        if found != now:
            log.info("run store (%s): schema %d -> %d", backend.where, found, now)
        self._writer = GroupWriter(backend, on_notices=self._dispatch_all)
        backend.listen(self._dispatch)

    @property
    def shared(self) -> bool:
        return self.backend.shared

    @property
    def reachable(self) -> bool:
        return self._writer.reachable

    def _dispatch(self, channel: str, payload: str) -> None:
        handler = self.on_notice
        if handler is not None:
            try:
                handler(channel, payload)
            except Exception:
                log.exception("a run store notice handler failed (%s %s)", channel, payload)

    def _dispatch_all(self, notices: set[tuple[str, str]]) -> None:
        for channel, payload in sorted(notices):
            self._dispatch(channel, payload)

    def _read(self, query: Callable[[Db], Any]) -> Any:
        if not self._writer.reachable and self.backend.shared:
            # Fail fast rather than wait on a connection that cannot be made.
            raise unreachable(self.backend.where, writing=False)
        try:
            with self.backend.reading() as db:
                return query(db)
        except Unavailable:
            if not self._writer.reachable:
                raise
        # A connection from before an outage that has ended: once more, on a live one.
        with self.backend.reading() as db:
            return query(db)

    def stats(self) -> dict[str, Any]:
        return {
            "backend": self.backend.dialect.name,
            "reachable": self._writer.reachable,
            "schemaVersion": self.schema_version,
            **self._writer.stats(),
        }

    # ---- reads ---------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord | None:
        row = self._read(
            lambda db: db.one(f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,))
        )
        return None if row is None else rows.record(row)

    def view(self, run_id: str) -> RunView | None:
        """The run, its takes (recorded, or announced so far while it runs) and the seq of the
        last event its state includes: a snapshot to follow with `events_after`."""

        def query(db: Db) -> RunView | None:
            row = db.one(f"SELECT {_VIEW_COLUMNS} FROM runs WHERE id = ?", (run_id,))
            if row is None:
                return None
            record = rows.record(row)
            if record.status.finished:
                takes = self._takes_for_run(db, run_id)
            else:
                takes = rows.takes_from_json(row["live_takes"])
            return RunView(record, takes, int(row["event_seq"]))

        return cast(RunView | None, self._read(query))

    def find_by_client_run_id(self, client_run_id: str) -> RunRecord | None:
        sql = f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE client_run_id = ?"
        row = self._read(lambda db: db.one(sql, (client_run_id,)))
        return None if row is None else rows.record(row)

    def list_runs(self, limit: int = 50) -> list[RunSummary]:
        """The most recent runs, newest first, each queued one with its place in the queue."""
        sql = (
            f"SELECT {rows.SUMMARY_COLUMNS}, CASE WHEN status = 'queued' THEN "
            "(SELECT COUNT(*) FROM runs AS q WHERE q.status = 'queued' AND q.seq <= runs.seq) "
            "END AS queue_position FROM runs ORDER BY seq DESC LIMIT ?"
        )
        found = cast(list[Any], self._read(lambda db: db.all(sql, (limit,))))
        return [rows.summary(r) for r in found]

    def queued_count(self) -> int:
        row = self._read(
            lambda db: db.one("SELECT COUNT(*) AS n FROM runs WHERE status = 'queued'")
        )
        return int(row["n"])

    def unfinished_runs(self, status: RunStatus) -> list[RunRecord]:
        """Queued or running runs in `status`, oldest first (the order they were accepted in)."""
        if status.finished:
            raise ValueError(f"{status} is a finished status")
        sql = f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE status = ? ORDER BY seq"
        found = cast(list[Any], self._read(lambda db: db.all(sql, (status.value,))))
        return [rows.record(r) for r in found]

    def get_take(self, take_id: str) -> Take | None:
        sql = f"SELECT {rows.TAKE_COLUMNS} FROM takes WHERE id = ?"
        row = self._read(lambda db: db.one(sql, (take_id,)))
        return None if row is None else rows.take(row)

    @staticmethod
    def _takes_for_run(db: Db, run_id: str) -> list[Take]:
        found = db.all(
            f"SELECT {rows.TAKE_COLUMNS} FROM takes WHERE run_id = ? ORDER BY created_at, id",
            (run_id,),
        )
        return [rows.take(r) for r in found]

    def takes_for_run(self, run_id: str) -> list[Take]:
        return cast(list[Take], self._read(lambda db: self._takes_for_run(db, run_id)))

    def all_takes(self) -> list[Take]:
        sql = f"SELECT {rows.TAKE_COLUMNS} FROM takes ORDER BY id"
        return [rows.take(r) for r in cast(list[Any], self._read(lambda db: db.all(sql)))]

    def take_ids(self) -> set[str]:
        """The id of every recorded take (the start-up sweep keeps exactly their files)."""
        found = cast(list[Any], self._read(lambda db: db.all("SELECT id FROM takes")))
        return {str(r["id"]) for r in found}

    def events_after(self, run_id: str, after: int, limit: int = 1000) -> list[StoredEvent]:
        """The run's events with seq > `after`, in order."""
        sql = (
            f"SELECT {rows.EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ? "
            "ORDER BY seq LIMIT ?"
        )
        found = cast(list[Any], self._read(lambda db: db.all(sql, (run_id, after, limit))))
        return [rows.event(r) for r in found]

    def servers_alive(self, within_s: float) -> list[ServerSeen]:
        """The servers that renewed their presence in the last `within_s` seconds."""
        found = cast(list[Any], self._read(lambda db: db.all(leasing.ALIVE, (within_s,))))
        return [leasing.server_seen(r) for r in found]

    def get_asset(self, asset_id: str) -> AssetRow | None:
        sql = "SELECT id, kind, content_type, bytes, created_at FROM assets WHERE id = ?"
        row = self._read(lambda db: db.one(sql, (asset_id,)))
        if row is None:
            return None
        return AssetRow(
            row["id"], row["kind"], row["content_type"], row["bytes"], row["created_at"]
        )

    # ---- submitting ----------------------------------------------------------------------------

    def insert_run_future(self, new: NewRun) -> Future[tuple[RunRecord, bool]]:
        """Insert `new` as queued, or return the run already stored under its clientRunId
        (created False). Raises `Conflict` (through the future) if that clientRunId names a
        different request. Fails at once (503) while the database is unreachable."""
        nodes = {node_id: NodeState() for node_id in new.node_ids}
        values = (
            new.id,
            new.client_run_id,
            new.request_hash,
            rows.dumps(new.graph),
            new.target,
            new.created_at,
            rows.nodes_json(nodes),
            rows.dumps(sorted(new.needs)),
            rows.dumps(new.options),
        )
        insert = (
            "INSERT INTO runs (id, client_run_id, request_hash, graph, target, status, "
            "created_at, nodes, fraction, needs, options) "
            "VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, 0, ?, ?) "
            # Two servers may take the same clientRunId at once: the second one finds the first.
            "ON CONFLICT (client_run_id) WHERE client_run_id IS NOT NULL DO NOTHING"
        )

        def op(db: Db) -> Later[tuple[RunRecord, bool]]:
            inserted = db.execute(insert, values)
            # Its row count says whether it went in (no RETURNING: on SQLite a row returned is
            # one more step, and one more hand-off of the interpreter lock). It is read once the
            # whole group is sent: on PostgreSQL a group of submissions is one round trip.
            return Later(lambda: settle(db, inserted.rowcount == 1))

        def settle(db: Db, went_in: bool) -> tuple[RunRecord, bool]:
            if not went_in:
                row = db.one(
                    f"SELECT {rows.RUN_COLUMNS} FROM runs WHERE client_run_id = ?",
                    (new.client_run_id,),
                )
                assert row is not None  # the conflict was on it
                existing = rows.record(row)
                if existing.request_hash != new.request_hash:
                    raise Conflict(
                        f"clientRunId {new.client_run_id!r} was already used for another "
                        f"graph (run {existing.id})"
                    )
                return existing, False
            db.notify(QUEUED, self.server_id)  # the submitter claims it without the notice
            record = RunRecord(
                id=new.id,
                target=new.target,
                graph=new.graph,
                status=RunStatus.QUEUED,
                created_at=new.created_at,
                request_hash=new.request_hash,
                client_run_id=new.client_run_id,
                nodes=nodes,
                options=dict(new.options),
            )
            return record, True

        return self._writer.submit_later(op)

    def insert_run(self, new: NewRun) -> tuple[RunRecord, bool]:
        return self.insert_run_future(new).result()

    # ---- claiming, leases, recovery (leasing.py) -----------------------------------------------

    def claim_future(self, prepare: Callable[[], ClaimRequest | None]) -> Future[Claimed | None]:
        """Claim up to `request.limit` queued runs this server can serve, oldest first, each with
        a fresh lease and attempt; shared stores first put back runs whose lease expired.
        `prepare` makes the request when the write runs (once, even if it is retried), so room
        that freed while the write waited in the queue is claimed too; None claims nothing (the
        future resolves to None). Fails at once (503) while the database is unreachable."""
        prepared: list[ClaimRequest | None] = []

        def op(db: Db) -> Claimed | None:
            if not prepared:
                prepared.append(prepare())
            request = prepared[0]
            return None if request is None else leasing.claim(request)(db)

        return self._writer.submit(op)

    def recover_on_start(self, max_retries: int, *, holder: str | None) -> list[RunRecord]:
        """After a stop or crash: put back (or end) the runs left running by `holder` (None:
        by anyone, for a store only this server uses). Returns the runs waiting to be claimed."""

        def op(db: Db) -> None:
            if holder is None:
                leasing.put_back(db, "1 = 1", (), max_retries, self.server_id)
            else:
                leasing.put_back(db, "lease_owner = ?", (holder,), max_retries, self.server_id)

        self._writer.submit(op).result()
        return self.unfinished_runs(RunStatus.QUEUED)

    def heartbeat_future(
        self,
        *,
        started_at: float,
        holding: Sequence[str],
        lease_s: float,
        info: dict[str, Any],
    ) -> Future[Renewal]:
        """Renew this server's leases on `holding` and its presence; learn which of them are
        still its, which its clients asked to cancel, and which servers are alive."""
        op = leasing.heartbeat(
            self.server_id, started_at=started_at, holding=holding, lease_s=lease_s, info=info
        )
        return self._writer.submit(op)

    def leave(self) -> None:
        """This server stops: forget its presence (its leases were given back already)."""
        try:
            self._writer.submit(
                lambda db: db.execute("DELETE FROM servers WHERE id = ?", (self.server_id,))
            ).result(timeout=5)
        except Exception as exc:
            log.warning("could not remove this server (%s) from the store: %s", self.server_id, exc)

    # ---- a held run's events and end (each fenced by its lease) --------------------------------

    def append_events_future(
        self, collect: Callable[[], Sequence[JournalEntry]], lease_s: float | None = None
    ) -> Future[frozenset[str]]:
        """Append held runs' events and the state they lead to, every run in one write; resolves
        to the runs whose lease was lost (nothing was written for them). `collect` gives them
        when the write runs (once, even if it is retried), so events that arrive while it waits
        in the queue go with it. With `lease_s`, each run's lease is extended as its heartbeat
        would (to the database's clock plus `lease_s`): a server whose runs make progress keeps
        them. Waits out an unreachable database (up to `retry_s`). Not a durable write: a power
        cut may lose the events since the last durable commit, which only a running run has,
        and a running run is run again after one."""
        taken: list[Sequence[JournalEntry]] = []
        extend = "" if lease_s is None else ", lease_expires_at = {now} + ?"
        extended: tuple[object, ...] = () if lease_s is None else (lease_s,)

        def op(db: Db) -> frozenset[str]:
            if not taken:
                taken.append(collect())
            lost: set[str] = set()
            held: list[history.Entries] = []
            for entry in taken[0]:
                if not entry.events:
                    continue
                lease = entry.lease
                mirrored = db.execute(
                    f"UPDATE runs SET nodes = ?, fraction = ?, live_takes = ?{extend} "
                    f"WHERE {_HELD}",
                    (
                        rows.nodes_json(entry.mirror.nodes),
                        entry.mirror.fraction,
                        rows.takes_json(entry.mirror.takes),
                        *extended,
                        *_held(lease),
                    ),
                )
                if mirrored.rowcount != 1:  # refused before writing anything for it
                    lost.add(lease.run_id)
                else:
                    held.append(
                        history.Entries(lease.run_id, entry.attempt, lease.owner, entry.events)
                    )
            history.append_all(db, held)
            return frozenset(lost)

        return self._writer.submit(op, wait_s=self.retry_s, durable=False)

    def finish_future(
        self,
        lease: Lease,
        attempt: int,
        status: RunStatus,
        *,
        nodes: dict[str, NodeState],
        fraction: float,
        error: dict[str, Any] | None = None,
        takes: Iterable[Take] = (),
        events: Sequence[EventLike] = (),
        finished_at: float | None = None,
    ) -> Future[None]:
        """End a held run: its terminal state, takes and last events (its terminal event among
        them) in one transaction. Resolves once durable; `LeaseLost` if the run is gone."""
        ended = time.time() if finished_at is None else finished_at
        if not status.finished:
            raise ValueError(f"{status} is not a terminal status")
        take_rows = [rows.take_params(t) for t in takes]
        end = (
            "UPDATE runs SET status = ?, finished_at = ?, error = ?, nodes = ?, fraction = ?, "
            f"live_takes = '[]' WHERE {_HELD}"
        )
        record_take = (
            f"INSERT INTO takes ({rows.TAKE_COLUMNS}) VALUES ({rows.TAKE_MARKS}) "
            "ON CONFLICT (id) DO NOTHING"
        )

        def op(db: Db) -> Later[None]:
            ended_run = db.execute(
                end,
                (
                    status.value,
                    ended,
                    None if error is None else rows.dumps(error),
                    rows.nodes_json(nodes),
                    fraction,
                    *_held(lease),
                ),
            )
            # Whether it was still held is read once the whole group is sent: on PostgreSQL the
            # ends of a group's runs cost one round trip, not one each.
            return Later(lambda: settle(db, ended_run.rowcount == 1))

        def settle(db: Db, held: bool) -> None:
            if not held:  # the UPDATE changed nothing: the group goes on without this write
                raise LeaseLost(f"run {lease.run_id} is no longer held by {lease.owner}")
            # A take id is a function of (run, node, index): the primary key refuses a second row.
            for values in take_rows:
                db.execute(record_take, values)
            history.append(db, lease.run_id, attempt, lease.owner, events)

        return self._writer.submit_later(op, wait_s=self.retry_s)

    def requeue_future(
        self, lease: Lease, *, nodes: dict[str, NodeState], refund_attempt: bool
    ) -> Future[bool]:
        """Give a held run back to the queue (a graceful stop interrupted it); False if it was no
        longer held. Other servers hear of it at once."""

        def op(db: Db) -> bool:
            cur = db.execute(
                "UPDATE runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, "
                "started_at = NULL, nodes = ?, fraction = 0, live_takes = '[]', "
                f"attempts = {{greatest}}(attempts - ?, 0) WHERE {_HELD}",
                (rows.nodes_json(nodes), 1 if refund_attempt else 0, *_held(lease)),
            )
            if cur.rowcount == 1:
                db.notify(QUEUED, "")
            return cur.rowcount == 1

        return self._writer.submit(op, wait_s=self.retry_s)

    # ---- cancelling ----------------------------------------------------------------------------

    def cancel_queued(self, run_id: str) -> bool:
        """queued -> cancelled (with its terminal event). False if the run was not queued."""

        def op(db: Db) -> bool:
            row = db.one(
                "UPDATE runs SET status = 'cancelled', finished_at = ? "
                f"WHERE id = ? AND status = 'queued' RETURNING {rows.RUN_COLUMNS}",
                (time.time(), run_id),
            )
            if row is None:
                return False
            record = rows.record(row)
            history.end(db, record, self.server_id)
            return True

        return self._writer.submit(op).result()

    def request_cancel(self, run_id: str) -> str | None:
        """Ask the server running `run_id` to cancel it; returns that server, None if the run
        is not running."""

        def op(db: Db) -> str | None:
            row = db.one(
                "UPDATE runs SET cancel_requested = 1 WHERE id = ? AND status = 'running' "
                "RETURNING lease_owner",
                (run_id,),
            )
            if row is None:
                return None
            db.notify(CANCEL, run_id)
            return str(row["lease_owner"])

        return self._writer.submit(op).result()

    # ---- interactions --------------------------------------------------------------------------

    def add_interaction(self, run_id: str, info: Mapping[str, Any]) -> bool:
        """Store a running run's interaction (`runtime.interactions.Interaction.to_info`),
        durably, before it is acknowledged; False if the run is not running."""

        def op(db: Db) -> bool:
            cur = db.execute(
                "INSERT INTO interactions (run_id, id, chunk, body, created_at) "
                "SELECT ?, ?, ?, ?, ? WHERE EXISTS "
                "(SELECT 1 FROM runs WHERE id = ? AND status = 'running')",
                (
                    run_id,
                    str(info["id"]),
                    int(info["chunk"]),
                    json.dumps(dict(info)),
                    time.time(),
                    run_id,
                ),
            )
            return cur.rowcount == 1

        return self._writer.submit(op).result()

    def interactions_for_run(self, run_id: str) -> list[dict[str, Any]]:
        """A run's interactions, in the order they were stored."""

        def query(db: Db) -> list[dict[str, Any]]:
            found = db.all("SELECT body FROM interactions WHERE run_id = ? ORDER BY seq", (run_id,))
            return [cast(dict[str, Any], json.loads(str(row["body"]))) for row in found]

        return cast(list[dict[str, Any]], self._read(query))

    # ---- assets --------------------------------------------------------------------------------

    def record_asset(self, asset: AssetRow) -> None:
        """Note an uploaded asset's metadata (the same bytes again change nothing)."""
        self._writer.submit(
            lambda db: db.execute(
                "INSERT INTO assets (id, kind, content_type, bytes, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (asset.id, asset.kind, asset.content_type, asset.size, asset.created_at),
            )
        ).result()

    # ---- the end -------------------------------------------------------------------------------

    def close(self) -> None:
        self._writer.close()
        self.backend.close()
