"""The event history's writes: appending runs' events, and ending a run no server holds. Part of
the transaction of whatever write calls them.

A run's snapshot cursor is the seq of its last event, read beside its row (`RunStore.view`), so
appending costs one INSERT for any number of runs and events, and no write to the runs' rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from inline_core.server import serialize
from inline_core.server.run_state import RunRecord
from inline_core.server.stores import rows
from inline_core.server.stores.records import EVENTS, EventLike
from inline_core.server.stores.sql import Db


@dataclass(frozen=True)
class Entries:
    """One run's events, as one attempt on one server wrote them."""

    run_id: str
    attempt: int
    server_id: str
    events: Sequence[EventLike]


def append_all(db: Db, entries: Iterable[Entries]) -> None:
    """Append every entry's events to the history, in order, and tell the servers which runs'
    histories grew. One statement that returns nothing: on SQLite a statement's every row
    returned is a step of its own, each handing the interpreter lock to another thread."""
    params: list[object] = []
    grown: list[str] = []
    for entry in entries:
        for event in entry.events:
            params.extend(
                (entry.run_id, entry.attempt, entry.server_id, event.type, rows.dumps(event.body))
            )
        if entry.events:
            grown.append(entry.run_id)
    if not params:
        return
    values = ", ".join(["(?, ?, ?, ?, ?, {now})"] * (len(params) // 5))
    db.execute(
        f"INSERT INTO events (run_id, attempt, server_id, type, body, created_at) VALUES {values}",
        params,
    )
    for run_id in grown:
        db.notify(EVENTS, run_id)


def append(db: Db, run_id: str, attempt: int, server_id: str, events: Sequence[EventLike]) -> None:
    """Append one run's `events`."""
    append_all(db, [Entries(run_id, attempt, server_id, events)])


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
