"""The event history's writes: appending a run's events (and moving its cursor), and ending a
run no server holds. Part of the transaction of whatever write calls them."""

from __future__ import annotations

from collections.abc import Iterable

from inline_core.server import serialize
from inline_core.server.run_state import RunRecord
from inline_core.server.stores import rows
from inline_core.server.stores.records import EVENTS, EventLike
from inline_core.server.stores.sql import Db


def append(db: Db, run_id: str, attempt: int, server_id: str, events: Iterable[EventLike]) -> int:
    """Append `events` to the history; move the run's cursor to the last; tell the servers.
    Returns the last event's seq (0 for no events)."""
    listed = list(events)
    if not listed:
        return 0
    values = ", ".join(["(?, ?, ?, ?, ?, {now})"] * len(listed))
    params: list[object] = []
    for event in listed:
        params.extend((run_id, attempt, server_id, event.type, rows.dumps(event.body)))
    inserted = db.all(
        "INSERT INTO events (run_id, attempt, server_id, type, body, created_at) "
        f"VALUES {values} RETURNING seq",
        params,
    )
    last = max(int(r["seq"]) for r in inserted)
    db.execute("UPDATE runs SET event_seq = ? WHERE id = ?", (last, run_id))
    db.notify(EVENTS, run_id)
    return last


def end(db: Db, record: RunRecord, server_id: str) -> None:
    """Finish `record` (a run no server holds: queued, or its holder gone) and append its
    terminal event, written by `server_id`."""
    db.execute(
        "UPDATE runs SET status = ?, finished_at = ?, error = ?, live_takes = '[]' WHERE id = ?",
        (
            record.status.value,
            record.finished_at,
            None if record.error is None else rows.dumps(record.error),
            record.id,
        ),
    )
    append(db, record.id, record.attempts, server_id, [serialize.terminal_event(record, [])])
