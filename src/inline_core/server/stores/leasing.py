"""Claiming runs and keeping them: the writes behind `RunStore.claim_future`, its recovery at
start and `heartbeat_future`, each a function of the database inside the writer's transaction.

A claim takes the oldest queued runs whose needs the server's capabilities cover (on PostgreSQL
passing over rows another server is locking, never waiting for them), gives each a fresh lease
(the fencing epoch goes up by one) and attempt, and writes its `run_started`. A shared store first
puts back the runs whose lease expired: queued again within the retry limit, else ended.

On a shared store a claim takes no more than this server's share of the work: the runs queued or
running, divided among the servers alive, less what it runs already. A server with free workers
would otherwise take every queued run into one batch while the others idle: all of them finish
together at the batch's end, and a server that dies loses all of them. The share is never zero
while work is waiting, so a run only some servers can serve still runs, one share at a time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from inline_core.server import serialize
from inline_core.server.run_state import RunStatus
from inline_core.server.stores import history, rows
from inline_core.server.stores.records import (
    QUEUED,
    Claimed,
    ClaimRequest,
    Renewal,
    ServerSeen,
)
from inline_core.server.stores.sql import Db, Row

_WORK = (
    "SELECT (SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')) AS active, "
    "(SELECT COUNT(*) FROM runs WHERE status = 'running' AND lease_owner = ?) AS mine, "
    "(SELECT COUNT(*) FROM servers WHERE heartbeat_at > {now} - ?) AS alive"
)

# How long a server's row stays once it stopped renewing it (health lists only live ones).
FORGET_SERVERS_AFTER_S = 24 * 3600.0
ALIVE = (
    "SELECT id, started_at, {now} - heartbeat_at AS age, leases FROM servers "
    "WHERE heartbeat_at > {now} - ? ORDER BY id"
)
# The oldest queued runs this server can serve, locked once (a CTE that locks is evaluated
# once), rows another server is locking passed over, not waited for.
_CLAIM = (
    "WITH picked AS (SELECT seq FROM runs WHERE status = 'queued' AND {needs_met} "
    "AND id NOT IN ({json_values}) ORDER BY seq LIMIT ?{skip_locked}) "
    "UPDATE runs SET status = 'running', lease_owner = ?, "
    "lease_epoch = lease_epoch + 1, lease_expires_at = {now} + ?, "
    "attempts = attempts + 1, started_at = ?, live_takes = '[]' "
    "WHERE seq IN (SELECT seq FROM picked) "
    f"RETURNING seq, {rows.RUN_COLUMNS}"
)


def server_seen(row: Row) -> ServerSeen:
    return ServerSeen(row["id"], row["started_at"], max(0.0, float(row["age"])), row["leases"])


def claim(request: ClaimRequest) -> Callable[[Db], Claimed]:
    def op(db: Db) -> Claimed:
        requeued: list[str] = []
        exhausted: list[str] = []
        if request.take_over_expired:
            requeued, exhausted = put_back(
                db, "lease_expires_at < {now}", (), request.max_retries, request.server_id
            )
        limit = request.limit
        if request.take_over_expired and limit > 0:
            limit = min(limit, fair_share(db, request.server_id, request.lease_s))
        found: list[Any] = []
        if limit > 0:
            found = db.all(
                _CLAIM,
                (
                    rows.dumps(sorted(request.capabilities)),
                    rows.dumps(list(request.holding)),
                    limit,
                    request.server_id,
                    request.lease_s,
                    time.time(),
                ),
            )
        counted = db.one("SELECT COUNT(*) AS n FROM runs WHERE status = 'queued'")
        queued = int(counted["n"]) if counted is not None else 0
        claimed = [rows.record(r) for r in sorted(found, key=lambda r: int(r["seq"]))]
        ran_before = executions(db, [record.id for record in claimed]) if claimed else {}
        # Their history says they started with the claim: a snapshot that shows a run running
        # is never followed by its run_started.
        history.append_all(
            db,
            (
                history.Entries(
                    record.id,
                    record.attempts,
                    request.server_id,
                    [serialize.run_started_event(record.id, record.attempts, request.server_id)],
                )
                for record in claimed
            ),
        )
        return Claimed(claimed, queued, requeued, exhausted, ran_before)

    return op


def fair_share(db: Db, server_id: str, lease_s: float) -> int:
    """How many more runs `server_id` may claim: its share of the runs queued or running among
    the servers alive (itself at least), less the runs it runs."""
    row = db.one(_WORK, (server_id, lease_s))
    if row is None:
        return 0
    alive = max(1, int(row["alive"]))
    share = -(-int(row["active"]) // alive)  # rounded up: no run is left without a server
    return max(0, share - int(row["mine"]))


def executions(db: Db, run_ids: list[str]) -> dict[str, int]:
    """How many times each run was started (by a claim, on any server): a run that ran before
    changed holder that many times when it is claimed again."""
    found = db.all(
        "SELECT run_id, COUNT(*) AS n FROM events WHERE type = 'run_started' "
        "AND run_id IN ({json_values}) GROUP BY run_id",
        (rows.dumps(run_ids),),
    )
    return {str(r["run_id"]): int(r["n"]) for r in found}


def put_back(
    db: Db, condition: str, params: Sequence[object], max_retries: int, server_id: str
) -> tuple[list[str], list[str]]:
    """Runs running under `condition` whose holder is gone: queued again if they have been
    tried at most `max_retries` times (their seeds are in the stored graph, so the re-run
    reproduces), else ended as an error; cancelled if their client asked for it. Returns
    (queued again, ended)."""
    found = db.all(
        f"SELECT {rows.RUN_COLUMNS}, cancel_requested FROM runs "
        f"WHERE status = 'running' AND {condition} ORDER BY seq{{skip_locked}}",
        params,
    )
    requeued: list[str] = []
    ended: list[str] = []
    now = time.time()
    for row in found:
        record = rows.record(row)
        if row["cancel_requested"]:
            history.end(db, replace(record, status=RunStatus.CANCELLED, finished_at=now), server_id)
            ended.append(record.id)
        elif record.attempts <= max_retries:
            db.execute(
                "UPDATE runs SET status = 'queued', lease_owner = NULL, "
                "lease_expires_at = NULL, started_at = NULL, nodes = ?, fraction = 0, "
                "live_takes = '[]' WHERE id = ?",
                (rows.fresh_nodes_json(rows.nodes_json(record.nodes)), record.id),
            )
            requeued.append(record.id)
        else:
            error = {
                "code": "interrupted",
                "message": f"interrupted {record.attempts} times; not retried again",
            }
            failed = replace(record, status=RunStatus.ERROR, error=error, finished_at=now)
            history.end(db, failed, server_id)
            ended.append(record.id)
    if requeued:
        db.notify(QUEUED, "")
    return requeued, ended


def heartbeat(
    server_id: str,
    *,
    started_at: float,
    holding: Sequence[str],
    lease_s: float,
    info: dict[str, Any],
) -> Callable[[Db], Renewal]:
    def op(db: Db) -> Renewal:
        renewed: list[Any] = []
        if holding:
            renewed = db.all(
                "UPDATE runs SET lease_expires_at = {now} + ? WHERE status = 'running' "
                "AND lease_owner = ? AND id IN ({json_values}) "
                "RETURNING id, lease_epoch, cancel_requested",
                (lease_s, server_id, rows.dumps(list(holding))),
            )
        db.execute(
            "INSERT INTO servers (id, started_at, heartbeat_at, leases, info) "
            "VALUES (?, ?, {now}, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "heartbeat_at = excluded.heartbeat_at, leases = excluded.leases, "
            "info = excluded.info",
            (server_id, started_at, len(renewed), rows.dumps(info)),
        )
        db.execute("DELETE FROM servers WHERE heartbeat_at < {now} - ?", (FORGET_SERVERS_AFTER_S,))
        alive = db.all(ALIVE, (lease_s,))
        return Renewal(
            held={str(r["id"]): int(r["lease_epoch"]) for r in renewed},
            cancel_requested=frozenset(str(r["id"]) for r in renewed if r["cancel_requested"]),
            servers=[server_seen(r) for r in alive],
        )

    return op
