"""The event journal on a real run store: progress alone is paced, anything else is written at
once and takes the waiting progress with it, and journal commits skip SQLite's fsync."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_support import claim, new_run, open_store

from inline_core.server.event_journal import EventJournal
from inline_core.server.events import WireEvent
from inline_core.server.leases import HeldLease
from inline_core.server.live_run import LiveRun
from inline_core.server.stores.records import Lease
from inline_core.server.stores.run_store import RunStore
from inline_core.server.stores.sql import Db
from inline_core.server.stores.sqlite import SqliteBackend, SqliteDb

LONG_S = 30.0  # a pacing interval no test outlives: progress alone is never written twice


@pytest.fixture
def store(tmp_path: Path, database_url: str | None) -> Iterator[RunStore]:
    s = open_store(tmp_path, database_url)
    yield s
    s.close()


def running(store: RunStore, run_id: str) -> LiveRun:
    store.insert_run(new_run(run_id))
    [record] = claim(store)
    assert record.holder is not None
    held = HeldLease(Lease(record.id, record.holder, record.lease_epoch), time.monotonic() + 60)
    return LiveRun.claimed(record, None, held)


def progress(step: int) -> WireEvent:
    return WireEvent("progress", {"type": "progress", "nodeId": "t", "step": step}, "t")


def node_done() -> WireEvent:
    return WireEvent("node_done", {"type": "node_done", "nodeId": "t"}, "t")


def history(store: RunStore, run_id: str) -> list[tuple[str, object]]:
    return [(e.type, e.body.get("step")) for e in store.events_after(run_id, 0, 100)]


def wait_for(store: RunStore, run_id: str, event_type: str) -> list[tuple[str, object]]:
    deadline = time.monotonic() + 30  # a liveness bound: the write is queued at once
    while True:
        found = history(store, run_id)
        if event_type in [t for t, _ in found]:
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.01)


def test_progress_alone_waits_for_the_interval_and_a_milestone_takes_it_at_once(
    store: RunStore,
) -> None:
    lock = threading.RLock()
    failures: list[BaseException] = []
    journal = EventJournal(store, lock, lambda _run, exc: failures.append(exc), LONG_S)
    run = running(store, "run_a")
    with lock:
        journal.record(run, progress(1))  # the first write goes at once
    wait_for(store, "run_a", "progress")
    with lock:
        for step in range(2, 40):
            journal.record(run, progress(step))
    # Within the interval nothing more is written: the ticks wait, the newest in its node's slot.
    assert [s for t, s in history(store, "run_a") if t == "progress"] == [1]
    with lock:
        journal.record(run, node_done())  # not progress: written now, with the last tick
    found = wait_for(store, "run_a", "node_done")
    assert [e for e in found if e[0] != "run_started"] == [
        ("progress", 1),
        ("progress", 39),
        ("node_done", None),
    ]
    journal.close()
    assert failures == []


def test_paced_progress_is_written_once_the_interval_passes(store: RunStore) -> None:
    lock = threading.RLock()
    journal = EventJournal(store, lock, lambda _run, _exc: None, 0.05)
    run = running(store, "run_b")
    with lock:
        journal.record(run, progress(1))
        journal.record(run, progress(2))  # within the interval of the first write
    deadline = time.monotonic() + 30  # liveness bound for the paced write
    while ("progress", 2) not in history(store, "run_b"):
        assert time.monotonic() < deadline, history(store, "run_b")
        time.sleep(0.01)
    journal.close()


def test_sqlite_commits_a_write_that_need_not_be_durable_without_the_fsync(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path, None)
    writer = store._writer  # pyright: ignore[reportPrivateUsage]
    seen: list[int] = []

    def mode(db: Db) -> None:
        assert isinstance(db, SqliteDb)
        seen.append(int(db.sqlite.execute("PRAGMA synchronous").fetchone()[0]))

    try:
        assert isinstance(store.backend, SqliteBackend)
        writer.submit(mode, durable=False).result()
        writer.submit(mode).result()
        writer.submit(mode, durable=False).result()
        assert seen == [1, 2, 1]  # NORMAL (no fsync) for a journal's kind of write, else FULL
    finally:
        store.close()
