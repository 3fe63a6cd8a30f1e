"""Rows to records and back: the one place the store's column encodings are written down."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any, cast

from inline_core.media import MediaKind, mime_for_suffix
from inline_core.server.run_state import NodeState, RunRecord, RunStatus
from inline_core.server.stores.records import RunSummary, StoredEvent
from inline_core.server.stores.sql import Row
from inline_core.takes import MediaFacts, Take

RUN_COLUMNS = (
    "id, client_run_id, request_hash, graph, target, status, attempts, created_at, started_at, "
    "finished_at, error, nodes, fraction, lease_owner, lease_epoch, options"
)
SUMMARY_COLUMNS = "id, status, target, fraction, created_at, lease_owner"
TAKE_COLUMNS = "id, run_id, node_id, kind, hash, uri, path, params, created_at, facts"
TAKE_MARKS = ", ".join("?" for _ in TAKE_COLUMNS.split(", "))
EVENT_COLUMNS = "seq, run_id, attempt, server_id, type, body, created_at"


# default=str: a runner's odd param value must never make a terminal commit fail. One encoder for
# every call: `json.dumps` with arguments builds one each time, a third of a small body's cost.
_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, default=str)


def dumps(value: object) -> str:
    return _ENCODER.encode(value)


def nodes_json(nodes: dict[str, NodeState]) -> str:
    return dumps({k: v.to_json() for k, v in nodes.items()})


def fresh_nodes_json(raw_nodes: str) -> str:
    """The stored node states of a run reset for a new attempt (every node queued again)."""
    return nodes_json({k: NodeState() for k in cast(dict[str, Any], json.loads(raw_nodes))})


def record(row: Row) -> RunRecord:
    raw_nodes = cast(dict[str, dict[str, Any]], json.loads(row["nodes"]))
    error = row["error"]
    status = RunStatus(row["status"])
    return RunRecord(
        id=row["id"],
        client_run_id=row["client_run_id"],
        request_hash=row["request_hash"],
        graph=cast(dict[str, Any], json.loads(row["graph"])),
        target=row["target"],
        status=status,
        attempts=row["attempts"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=None if error is None else cast(dict[str, Any], json.loads(error)),
        nodes={k: NodeState.from_json(v) for k, v in raw_nodes.items()},
        fraction=row["fraction"],
        holder=row["lease_owner"] if status == RunStatus.RUNNING else None,
        lease_epoch=row["lease_epoch"],
        options=cast(dict[str, Any], json.loads(row["options"])),
    )


def summary(row: Row) -> RunSummary:
    status = RunStatus(row["status"])
    return RunSummary(
        id=row["id"],
        status=status,
        target=row["target"],
        fraction=row["fraction"],
        created_at=row["created_at"],
        holder=row["lease_owner"] if status == RunStatus.RUNNING else None,
        queue_position=row["queue_position"],
    )


def take(row: Row) -> Take:
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
        facts=_facts(row),
    )


def _facts(row: Row) -> MediaFacts:
    """A take's stored facts; a take written before they were kept (a live take's row from an
    older server included) has its content type alone, from its file's suffix."""
    try:
        raw = row["facts"] or "{}"
    except (KeyError, IndexError):
        raw = "{}"
    suffix = os.path.splitext(str(row["path"]))[1]
    return MediaFacts.from_json(json.loads(raw), mime_for_suffix(suffix))


def take_params(t: Take) -> tuple[object, ...]:
    """A take as the values of TAKE_COLUMNS."""
    return (
        t.id,
        t.run_id,
        t.node_id,
        t.kind.value,
        t.hash,
        t.uri,
        t.path,
        dumps(t.params),
        t.created_at,
        dumps(t.facts.to_json()),
    )


def takes_json(takes: Iterable[Take]) -> str:
    """Takes announced by a running run, kept in its row until they are recorded at its end."""
    names = TAKE_COLUMNS.split(", ")
    return dumps([dict(zip(names, take_params(t), strict=True)) for t in takes])


def takes_from_json(raw: str) -> list[Take]:
    return [take(cast(Row, row)) for row in cast(list[dict[str, Any]], json.loads(raw))]


def event(row: Row) -> StoredEvent:
    return StoredEvent(
        seq=int(row["seq"]),
        run_id=row["run_id"],
        attempt=row["attempt"],
        server_id=row["server_id"],
        type=row["type"],
        body=cast(dict[str, Any], json.loads(row["body"])),
        created_at=row["created_at"],
    )
